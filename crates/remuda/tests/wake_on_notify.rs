//! Idle workers start new jobs on the insert notification, not at their next poll, and
//! waiters hear of completion by notification, not at their fallback poll.

mod common;

use common::{fast_config, setup, start, Add, AddArgs};
use remuda::{Worker, WorkerConfig};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_sent_one_at_a_time_start_without_waiting_for_a_poll() {
    let (_db, client) = setup().await;
    // Polls so rare that any job started by a poll would blow the bound below.
    let config = WorkerConfig {
        poll_interval: Duration::from_secs(60),
        ..fast_config()
    };
    let worker = start(Worker::new(client.clone()).config(config).register(Add));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..30 {
        let sent = Instant::now();
        let id = client
            .enqueue::<Add>(&AddArgs { a: i, b: 1 })
            .await
            .expect("enqueue");
        let job = client
            .wait(id, Duration::from_secs(30))
            .await
            .expect("finished");
        assert_eq!(job.result, Some(remuda::JobResult::Ok((i + 1).into())));
        // generous for a loaded CI machine, far below both poll intervals (60 s and 1 s)
        assert!(
            sent.elapsed() < Duration::from_millis(900),
            "job {i} took {:?}",
            sent.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.shutdown().await;
}
