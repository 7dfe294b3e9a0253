//! The leader's duties run side by side: a slow expiry (here a seam hook that takes seconds
//! over each expiry) does not hold up the promotion of due jobs. A new leader starts them in
//! turn, not all at once.

mod common;

use common::{fast_config, setup, start, Add, AddArgs};
use remuda::{JobState, NewJob, Worker, WorkerConfig};
use std::collections::HashMap;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_starts_its_duties_in_turn() {
    let (_db, client) = setup().await;
    // interval / 10 = 300 ms, capped at 100 ms apart; the duties that run each interval
    // (rescue, expiry, repair) or less often run once in the first three seconds
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                maintenance_interval: Duration::from_secs(3),
                ..fast_config()
            })
            .register(Add),
    );
    let in_turn = [
        "rescue",
        "expiry",
        "workflow_repair",
        "retention",
        "rate_buckets",
        "reindex",
        "vacuum",
    ];
    // the journal is written at each election round: the first after the duties ran
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let first: HashMap<String, chrono::DateTime<chrono::Utc>> = loop {
        let status = client.maintenance_status().await.expect("status");
        let seen: HashMap<_, _> = status
            .duties
            .iter()
            .map(|d| (d.duty.clone(), d.started_at))
            .collect();
        if in_turn.iter().all(|d| seen.contains_key(*d)) {
            break seen;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not every duty ran: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    worker.shutdown().await;
    // positions 0, 1, 5, 6, 7, 8, 9 of the ten: each at least its turn after the first
    let positions = [0, 1, 5, 6, 7, 8, 9];
    let rescue = first["rescue"];
    for (duty, position) in in_turn.iter().zip(positions) {
        let after = (first[*duty] - rescue).num_milliseconds();
        assert!(
            after >= position * 100 - 20,
            "{duty} started {after} ms after rescue, before its turn ({} ms): {first:?}",
            position * 100
        );
    }
}
