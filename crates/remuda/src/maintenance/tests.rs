//! The lease's fencing term against a real PostgreSQL: a leader that lost the lease without
//! knowing it writes nothing.

use super::leader::{elect, Lease};
use super::{promoter, rescuer};
use crate::testing::TestDatabase;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leader_writes_nothing_once_another_was_elected() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
         VALUES ('a', 'a', 'h', 1, '{default}', '{x}', 1, 3600000, now()),
                ('b', 'b', 'h', 2, '{default}', '{x}', 1, 3600000, now()),
                ('dead', 'dead', 'h', 3, '{default}', '{x}', 1, 1000, now() - interval '1 hour');
         INSERT INTO remuda.jobs (state, queue, kind, args, run_at)
         VALUES ('scheduled', 'default', 'x', '{}', now() - interval '1 second');",
    )
    .await
    .expect("set the scene");
    let lease = Duration::from_secs(60);
    let first: Lease = elect(&db, "a", lease)
        .await
        .expect("elect")
        .expect("a leads");
    assert!(
        elect(&db, "b", lease).await.expect("elect").is_none(),
        "a holds the lease"
    );
    // a is cut off past its lease; b is elected meanwhile, a still believes it leads
    conn.batch_execute("UPDATE remuda.leader SET expires_at = now() - interval '1 second'")
        .await
        .expect("expire a's lease");
    let second = elect(&db, "b", lease)
        .await
        .expect("elect")
        .expect("b leads");
    assert!(second.term > first.term, "{first:?} then {second:?}");

    promoter::promote(&db, &first)
        .await
        .expect("stale promotion");
    rescuer::rescue(&db, &first, &crate::metrics::Metrics::new())
        .await
        .expect("stale rescue");
    let state = |sql: &'static str| {
        let db = db.clone();
        async move {
            let conn = db.conn().await.expect("conn");
            conn.query_one(sql, &[])
                .await
                .expect("query")
                .get::<_, String>(0)
        }
    };
    let job = "SELECT state::text FROM remuda.jobs";
    let verdict = "SELECT (heartbeat_at = '-infinity')::text FROM remuda.workers WHERE id = 'dead'";
    assert_eq!(
        state(job).await,
        "scheduled",
        "the stale leader promoted nothing"
    );
    assert_eq!(state(verdict).await, "false", "nor declared anyone dead");

    promoter::promote(&db, &second).await.expect("promotion");
    rescuer::rescue(&db, &second, &crate::metrics::Metrics::new())
        .await
        .expect("rescue");
    assert_eq!(state(job).await, "available");
    let gone = db
        .conn()
        .await
        .expect("conn")
        .query_opt("SELECT 1 FROM remuda.workers WHERE id = 'dead'", &[])
        .await
        .expect("query");
    assert!(
        gone.is_none(),
        "the leader declared it dead and forgot it (no jobs)"
    );
}

/// A claim can commit after its worker's row was removed (the server finishing a killed
/// worker's last claim, after the leader forgot the worker): its jobs then run for no one.
/// The leader registers such a worker again as dead, and the rescue takes its jobs; a stale
/// leader does neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_running_for_a_worker_the_registry_lost_are_rescued() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
         VALUES ('alive', 'alive', 'h', 1, '{default}', '{x}', 1, 3600000, now());
         INSERT INTO remuda.jobs (state, queue, kind, args, attempt, max_attempts, worker_id, started_at)
         VALUES ('running', 'default', 'x', '{\"n\": 1}', 1, 5, 'forgotten', now() - interval '1 second'),
                ('running', 'default', 'x', '{\"n\": 2}', 1, 5, 'alive', now() - interval '1 second');",
    )
    .await
    .expect("set the scene");
    let lease = Duration::from_secs(60);
    let stale: Lease = elect(&db, "alive", lease)
        .await
        .expect("elect")
        .expect("leads");
    conn.batch_execute("UPDATE remuda.leader SET expires_at = now() - interval '1 second'")
        .await
        .expect("expire the lease");
    assert!(
        rescuer::recall_forgotten(&db, &stale)
            .await
            .expect("stale look")
            .is_empty(),
        "a stale leader registers no one"
    );
    let leader = elect(&db, "other", lease)
        .await
        .expect("elect")
        .expect("leads");
    let found = rescuer::recall_forgotten(&db, &leader).await.expect("look");
    assert_eq!(found, vec!["forgotten".to_string()]);
    let (retried, failed) = rescuer::rescue(&db, &leader, &crate::metrics::Metrics::new())
        .await
        .expect("rescue");
    assert_eq!((retried, failed), (1, 0));
    let rows = conn
        .query(
            "SELECT args->>'n', state::text, coalesce(errors->-1->>'code', '') FROM remuda.jobs ORDER BY args->>'n'",
            &[],
        )
        .await
        .expect("jobs");
    let jobs: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("1".into(), "available".into(), "WORKER_LOST".into()),
            ("2".into(), "running".into(), String::new()),
        ],
        "the forgotten worker's job is rescued, the live worker's left alone"
    );
    let rows = conn
        .query("SELECT id FROM remuda.workers ORDER BY id", &[])
        .await
        .expect("workers");
    let workers: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        workers,
        vec!["alive".to_string()],
        "and forgotten again once its jobs were rescued"
    );
}

/// A worker the leader registered as dead while it was forgotten may register again before
/// that row is pruned (it woke up): its own settings replace the row's, so it is not declared
/// dead at every round after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_worker_that_registers_again_is_alive_with_its_own_settings() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (state, queue, kind, args, attempt, max_attempts, worker_id, started_at)
         VALUES ('running', 'default', 'x', '{}', 1, 5, 'woke', now() - interval '1 second');",
    )
    .await
    .expect("set the scene");
    let leader = elect(&db, "leader", Duration::from_secs(60))
        .await
        .expect("elect")
        .expect("leads");
    let found = rescuer::recall_forgotten(&db, &leader).await.expect("look");
    assert_eq!(found, vec!["woke".to_string()]);
    // the worker registers again before the rescue runs
    let queues = vec!["default".to_string()];
    let kinds = vec!["x".to_string()];
    let capabilities: Vec<String> = Vec::new();
    conn.query_one(
        crate::sql::WORKER_REGISTER,
        &[
            &"woke",
            &"woke",
            &"host",
            &7i32,
            &queues,
            &kinds,
            &4i32,
            &3_600_000i64,
            &3i32,
            &capabilities,
        ],
    )
    .await
    .expect("register again");
    let row = conn
        .query_one(
            "SELECT rescue_after_ms, pid, concurrency, heartbeat_at > '-infinity' FROM remuda.workers WHERE id = 'woke'",
            &[],
        )
        .await
        .expect("row");
    let (rescue_after, pid, concurrency, alive): (i64, i32, i32, bool) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        (rescue_after, pid, concurrency, alive),
        (3_600_000, 7, 4, true)
    );
    // its job from before the verdict is rescued once; later rounds declare it dead no more
    rescuer::rescue(&db, &leader, &crate::metrics::Metrics::new())
        .await
        .expect("rescue");
    let dead = conn
        .query_one(
            "SELECT heartbeat_at = '-infinity' FROM remuda.workers WHERE id = 'woke'",
            &[],
        )
        .await
        .expect("row")
        .get::<_, bool>(0);
    assert!(!dead, "a worker that registered again is alive");
}
