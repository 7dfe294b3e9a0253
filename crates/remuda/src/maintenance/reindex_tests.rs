//! The reindexer against a real PostgreSQL: a mostly empty index is rebuilt and shrinks,
//! what an interrupted rebuild left is dropped, and a stale leader touches nothing.

use super::reindexer::{reindex, Thresholds};
use crate::testing::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mostly_empty_index_is_rebuilt_and_leftovers_of_a_rebuild_are_dropped() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "-- a burst of jobs drained: the available index keeps its pages
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
         INSERT INTO remuda.jobs (kind) VALUES ('dup'), ('dup');",
    )
    .await
    .expect("set the scene");
    let failed = conn
        .batch_execute(
            "CREATE UNIQUE INDEX CONCURRENTLY jobs_kind_idx_ccnew ON remuda.jobs_live (kind)",
        )
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

    let (stale, current) = super::test_leases::stale_and_current(&db).await;
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

/// An index that filled since it was last counted (a backlog enqueued into a table analysed
/// while empty) is full, not bloated: a leader started into the backlog left it alone, where
/// it rebuilt every index of the live part in the middle of the drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_that_filled_since_it_was_counted_is_not_rebuilt() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute("ANALYZE remuda.jobs")
        .await
        .expect("counted empty");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind) SELECT 'x' FROM generate_series(1, 50000);
         SELECT pg_stat_force_next_flush();",
    )
    .await
    .expect("a backlog");
    conn.batch_execute("SELECT 1").await.expect("stats flushed");
    let counted: f64 = conn
        .query_one(
            "SELECT reltuples::float8 FROM pg_class WHERE oid = 'remuda.jobs_available_idx'::regclass",
            &[],
        )
        .await
        .expect("reltuples")
        .get(0);
    assert!(counted < 1000.0, "the index was counted since: {counted}");
    let (_, current) = super::test_leases::stale_and_current(&db).await;
    let low = Thresholds {
        min_bytes: 64 << 10,
        max_bytes_per_entry: 200.0,
    };
    let done = reindex(&db, &current, low).await.expect("reindex");
    assert!(
        !done
            .rebuilt
            .contains(&"remuda.jobs_available_idx".to_string()),
        "a full index was rebuilt: {done:?}"
    );
}

/// A table another session holds as a rebuild of its index does (`REINDEX CONCURRENTLY`
/// keeps a SHARE UPDATE EXCLUSIVE lock between its steps, and waits for older transactions)
/// is passed over by the vacuum duty, not waited for: the two deadlocked, and the server
/// cancelled the vacuum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_held_by_a_rebuild_is_passed_over_by_the_vacuum_not_waited_for() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let (_, current) = super::test_leases::stale_and_current(&db).await;
    let conn = db.conn().await.expect("conn");
    // statistics that no longer tell the table's size: due for an analysis
    conn.batch_execute(
        "ANALYZE remuda.jobs_live;
         INSERT INTO remuda.jobs (kind) SELECT 'x' FROM generate_series(1, 5000);
         SELECT pg_stat_force_next_flush();",
    )
    .await
    .expect("rows past the statistics");
    conn.batch_execute("SELECT 1").await.expect("stats flushed");
    let mut holder = db.conn().await.expect("holder");
    let held = holder.transaction().await.expect("begin");
    held.batch_execute("LOCK TABLE remuda.jobs_live IN SHARE UPDATE EXCLUSIVE MODE")
        .await
        .expect("held as a rebuild holds it");
    let done = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        super::duties::vacuum_due(&db, &current),
    )
    .await
    .expect("the vacuum duty waited for the table's holder");
    done.expect("the vacuum duty");
    held.rollback().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_full_of_dead_rows_is_vacuumed_by_the_leader_and_not_by_a_stale_one() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let (stale, current) = super::test_leases::stale_and_current(&db).await;
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind) SELECT 'x' FROM generate_series(1, 10000);
         DELETE FROM remuda.jobs",
    )
    .await
    .expect("dead rows");
    let vacuums = || async {
        db.conn()
            .await
            .expect("conn")
            .query_one(
                "SELECT vacuum_count + autovacuum_count, n_dead_tup FROM pg_stat_user_tables
                 WHERE schemaname = 'remuda' AND relname = 'jobs_live'",
                &[],
            )
            .await
            .expect("stats")
            .get::<_, i64>(0)
    };
    // the statistics arrive a moment after the transaction that made them
    let mut seen = false;
    for _ in 0..50 {
        let n: i64 = conn
            .query_one(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'remuda' AND relname = 'jobs_live'",
                &[],
            )
            .await
            .expect("dead")
            .get(0);
        if n >= 10_000 {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(seen, "the statistics show the dead rows");
    let before = vacuums().await;
    let none = super::duties::vacuum_due(&db, &stale).await.expect("stale");
    assert!(none.is_empty(), "{none:?}");
    let done = super::duties::vacuum_due(&db, &current)
        .await
        .expect("vacuum");
    assert!(done.contains(&"remuda.jobs_live".to_string()), "{done:?}");
    let mut counted = false;
    for _ in 0..50 {
        if vacuums().await > before {
            counted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(counted, "the job table was vacuumed");
}

/// The live jobs' table is small by design and starts empty: a statement planned on it then
/// keeps a plan made for no rows. The leader analyses a table whose rows grew past what its
/// statistics say (and again once they shrink), not only one full of dead rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_whose_rows_grew_past_its_statistics_is_analysed_and_again_once_they_shrink() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let (_stale, current) = super::test_leases::stale_and_current(&db).await;
    let conn = db.conn().await.expect("conn");
    let believed = || async {
        db.conn()
            .await
            .expect("conn")
            .query_one(
                "SELECT reltuples::float8 FROM pg_class WHERE oid = 'remuda.jobs_live'::regclass",
                &[],
            )
            .await
            .expect("reltuples")
            .get::<_, f64>(0)
    };
    let live_seen = |n: i64| {
        let db = db.clone();
        async move {
            for _ in 0..50 {
                let live: i64 = db
                    .conn()
                    .await
                    .expect("conn")
                    .query_one(
                        "SELECT n_live_tup FROM pg_stat_user_tables
                         WHERE schemaname = 'remuda' AND relname = 'jobs_live'",
                        &[],
                    )
                    .await
                    .expect("live")
                    .get(0);
                if (n == 0 && live == 0) || (n > 0 && live >= n) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("the statistics never showed {n} live rows");
        }
    };
    // (the session sends its statistics at once, not at its next idle flush)
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind) SELECT 'x' FROM generate_series(1, 5000);
         SELECT pg_stat_force_next_flush()",
    )
    .await
    .expect("a backlog");
    live_seen(5000).await;
    assert!(believed().await < 1.0, "not analysed yet");
    let done = super::duties::vacuum_due(&db, &current).await.expect("due");
    assert!(done.contains(&"remuda.jobs_live".to_string()), "{done:?}");
    assert!(believed().await >= 4000.0, "analysed with its rows");
    // only its statistics were stale: analysed, not vacuumed (no pass over the table and
    // every index for rows that are not dead)
    let (vacuums, analyses): (i64, i64) = {
        let row = conn
            .query_one(
                "SELECT vacuum_count, analyze_count FROM pg_stat_user_tables
                 WHERE schemaname = 'remuda' AND relname = 'jobs_live'",
                &[],
            )
            .await
            .expect("counts");
        (row.get(0), row.get(1))
    };
    assert_eq!((vacuums, analyses), (0, 1));
    // from a small sample (its row count was what was stale): a histogram of 10, not 100
    let bounds: i32 = conn
        .query_one(
            "SELECT array_length(histogram_bounds::text::text[], 1) FROM pg_stats
             WHERE schemaname = 'remuda' AND tablename = 'jobs_live' AND attname = 'id'",
            &[],
        )
        .await
        .expect("statistics")
        .get(0);
    assert!(bounds <= 11, "{bounds} bounds");
    // nothing more to do while the statistics hold
    let done = super::duties::vacuum_due(&db, &current).await.expect("due");
    assert!(!done.contains(&"remuda.jobs_live".to_string()), "{done:?}");
    // the backlog drained (moved, as completions move them)
    conn.batch_execute(
        "WITH gone AS (DELETE FROM remuda.jobs_live RETURNING id)
         SELECT count(*) FROM gone;
         SELECT pg_stat_force_next_flush()",
    )
    .await
    .expect("drained");
    live_seen(0).await;
    let done = super::duties::vacuum_due(&db, &current).await.expect("due");
    assert!(done.contains(&"remuda.jobs_live".to_string()), "{done:?}");
    assert!(believed().await < 1000.0, "analysed empty again");
}
