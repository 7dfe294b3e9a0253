//! The leader's duties run side by side: a slow expiry (here a seam hook that takes seconds
//! over each expiry) does not hold up the promotion of due jobs.

mod common;

use common::{fast_config, setup, start, Add, AddArgs};
use remuda::{JobState, NewJob, Worker, WorkerConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_expiry_does_not_hold_up_promotion() {
    let (_db, client) = setup().await;
    let conn = client.database().conn().await.expect("connection");
    conn.batch_execute(
        "CREATE FUNCTION slow_expiry(changed remuda.transition[]) RETURNS void
         LANGUAGE sql AS $$
             SELECT pg_sleep(4) FROM unnest(changed) c WHERE c.new_state = 'expired' LIMIT 1
         $$;
         INSERT INTO remuda.transition_hooks (name, function)
         VALUES ('slow_expiry', 'slow_expiry(remuda.transition[])');",
    )
    .await
    .expect("hook");
    let expiring = client
        .insert(
            NewJob::new("add", &AddArgs { a: 0, b: 0 })
                .expect("job")
                .queue("parked")
                .expires_at(chrono::Utc::now() + chrono::Duration::milliseconds(200)),
        )
        .await
        .expect("enqueue");
    // the lease (three intervals, 6 s) outlasts the slow expiry, so the leader keeps leading
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                maintenance_interval: Duration::from_secs(2),
                ..fast_config()
            })
            .register(Add),
    );
    // the expiry is under way: its statement sleeps in the hook
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let sleeping: bool = conn
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event = 'PgSleep')",
                &[],
            )
            .await
            .expect("activity")
            .get(0);
        if sleeping {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the expiry never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let delayed = client
        .insert(
            NewJob::new("add", &AddArgs { a: 2, b: 3 })
                .expect("job")
                .delay(Duration::from_millis(300)),
        )
        .await
        .expect("enqueue");
    let job = client
        .wait(delayed, Duration::from_secs(20))
        .await
        .expect("the delayed job ran");
    assert_eq!(job.state, JobState::Completed);
    let still = client.job(expiring).await.expect("job").expect("exists");
    assert_eq!(
        still.state,
        JobState::Available,
        "promoted and run while the expiry was still writing"
    );
    let expired = client
        .wait(expiring, Duration::from_secs(20))
        .await
        .expect("expired in the end");
    assert_eq!(expired.state, JobState::Expired);
    worker.shutdown().await;
}
