//! The bulk path (binary COPY): everything or nothing is inserted, jobs with a start time are
//! scheduled, and workers hear of the load at commit.

mod common;

use common::{fast_config, setup, start, Add, AddArgs};
use remuda::{JobState, NewJob, Worker, WorkerConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_load_is_inserted_whole_and_wakes_workers() {
    let (_db, client) = setup().await;
    // A worker that would poll only every 30 s: only the insert notification can wake it.
    let config = WorkerConfig {
        poll_interval: Duration::from_secs(30),
        ..fast_config()
    };
    let worker = start(Worker::new(client.clone()).config(config).register(Add));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut jobs: Vec<NewJob> = (0..20_000)
        .map(|i| NewJob::for_task::<Add>(&AddArgs { a: i, b: 1 }).expect("job"))
        .collect();
    jobs.push(
        NewJob::for_task::<Add>(&AddArgs { a: 0, b: 0 })
            .expect("job")
            .delay(Duration::from_secs(3600)),
    );
    let inserted = client.insert_bulk(&jobs).await.expect("bulk insert");
    assert_eq!(inserted, 20_001);

    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let stats = client.queue_stats().await.expect("stats");
        if stats[0].count(JobState::Completed) == 20_000 {
            assert_eq!(
                stats[0].count(JobState::Scheduled),
                1,
                "the delayed job waits"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the bulk load was not drained: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = worker.shutdown().await;
    assert_eq!(report.completed, 20_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_load_with_one_bad_job_inserts_nothing() {
    let (_db, client) = setup().await;
    let client = client.with_max_payload(100);
    let mut jobs: Vec<NewJob> = (0..1000)
        .map(|i| NewJob::new("noop", &i).expect("job"))
        .collect();
    jobs.push(NewJob::new("noop", &"y".repeat(500)).expect("job"));
    let err = client.insert_bulk(&jobs).await.expect_err("too large");
    assert!(
        err.to_string().contains("over the limit of 100 bytes"),
        "{err}"
    );
    assert!(
        client.queue_stats().await.expect("stats").is_empty(),
        "nothing was written"
    );
}
