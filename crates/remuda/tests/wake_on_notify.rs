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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_loses_its_connection_reconnects_and_the_worker_catches_up() {
    let (db, client) = setup().await;
    let config = WorkerConfig {
        poll_interval: Duration::from_secs(60),
        ..fast_config()
    };
    let worker = start(Worker::new(client.clone()).config(config).register(Add));
    let id = client
        .enqueue::<Add>(&AddArgs { a: 1, b: 1 })
        .await
        .expect("enqueue");
    if let Err(e) = client.wait(id, Duration::from_secs(10)).await {
        let job = client.job(id).await;
        let finished = worker.handle.is_finished();
        let outcome = if finished {
            Some(worker.handle.await)
        } else {
            None
        };
        panic!(
            "the first job did not run: {e}; job {job:?}; worker finished {finished}: {outcome:?}"
        );
    }

    // Cut the LISTEN connection of this test's database (only ours: our own backend) and, in
    // the same transaction, enqueue a job: its notification goes out at commit, while the
    // listener is still down (it reconnects after a 50 ms backoff at the earliest). The worker
    // polls only every minute, so only its poll after reconnecting can find the job in time.
    let mut conn = db.database().expect("pool").conn().await.expect("conn");
    let tx = conn.transaction().await.expect("begin");
    let killed: i64 = tx
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
            &[],
        )
        .await
        .expect("terminate the listener")
        .get(0);
    assert!(killed >= 1, "found the listener's backend");
    let ids = client
        .insert_in(
            &**tx,
            &[remuda::NewJob::for_task::<Add>(&AddArgs { a: 2, b: 2 }).expect("job")],
        )
        .await
        .expect("enqueue");
    tx.commit().await.expect("commit");
    let id = ids[0];
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("picked up after the reconnect");
    assert_eq!(job.result, Some(remuda::JobResult::Ok(4.into())));
    worker.shutdown().await;
}
