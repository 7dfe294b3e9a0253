//! The reindexer against a real PostgreSQL: a mostly empty index is rebuilt and shrinks,
//! what an interrupted rebuild left is dropped, and a stale leader touches nothing.

use super::leader::elect;
use super::reindexer::{reindex, Thresholds};
use crate::testing::TestDatabase;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mostly_empty_index_is_rebuilt_and_leftovers_of_a_rebuild_are_dropped() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms)
         VALUES ('a', 'a', 'h', 1, '{default}', '{x}', 1, 3600000),
                ('b', 'b', 'h', 2, '{default}', '{x}', 1, 3600000);
         -- a burst of jobs drained: the available index keeps its pages
         INSERT INTO remuda.jobs (kind) SELECT 'x' FROM generate_series(1, 50000);
         UPDATE remuda.jobs SET state = 'completed', finished_at = now();",
    )
    .await
    .expect("a drained burst");
    conn.batch_execute("VACUUM ANALYZE remuda.jobs")
        .await
        .expect("vacuum");
    conn.batch_execute(
        "-- an interrupted rebuild's copy (a failed concurrent build stays, invalid)
         INSERT INTO remuda.jobs (kind, state, finished_at) VALUES ('dup', 'completed', now()), ('dup', 'completed', now());",
    )
    .await
    .expect("set the scene");
    let failed = conn
        .batch_execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_kind_idx_ccnew ON remuda.jobs (kind)")
        .await;
    assert!(failed.is_err(), "the duplicate kinds make the build fail");
    let size = |name: &'static str| {
        let db = db.clone();
        async move {
            db.conn()
                .await
                .expect("conn")
                .query_one("SELECT pg_relation_size(to_regclass($1))", &[&name])
                .await
                .expect("size")
                .get::<_, Option<i64>>(0)
        }
    };
    let before = size("remuda.jobs_available_idx").await.expect("exists");
    assert!(size("remuda.jobs_kind_idx_ccnew").await.is_some());

    let lease = Duration::from_secs(60);
    let stale = elect(&db, "a", lease)
        .await
        .expect("elect")
        .expect("a leads");
    conn.batch_execute("UPDATE remuda.leader SET expires_at = now() - interval '1 second'")
        .await
        .expect("a is cut off");
    let current = elect(&db, "b", lease)
        .await
        .expect("elect")
        .expect("b leads");
    let low = Thresholds {
        min_bytes: 64 << 10,
        max_bytes_per_entry: 200.0,
    };
    let nothing = reindex(&db, &stale, low).await.expect("stale run");
    assert!(
        nothing.rebuilt.is_empty() && nothing.dropped.is_empty(),
        "{nothing:?}"
    );
    assert!(
        size("remuda.jobs_kind_idx_ccnew").await.is_some(),
        "the stale leader dropped nothing"
    );

    let done = reindex(&db, &current, low).await.expect("reindex");
    assert_eq!(done.dropped, ["remuda.jobs_kind_idx_ccnew"]);
    assert!(
        done.rebuilt
            .contains(&"remuda.jobs_available_idx".to_string()),
        "{done:?}"
    );
    assert!(size("remuda.jobs_kind_idx_ccnew").await.is_none());
    let after = size("remuda.jobs_available_idx").await.expect("exists");
    assert!(after * 4 < before, "{before} bytes, then {after}");
    let healthy = reindex(&db, &current, low).await.expect("again");
    assert!(
        !healthy
            .rebuilt
            .contains(&"remuda.jobs_available_idx".to_string()),
        "a rebuilt index is left alone: {healthy:?}"
    );
}
