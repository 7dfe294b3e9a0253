//! The schema's functions live in files applied on every migrate: each recorded by its hash,
//! applied again only when its text changed, never replaced by an older remuda, and a
//! client of this build refuses a database whose functions are not its own.

use remuda::testing::TestDatabase;
use remuda::{Database, Error};

async fn one<T: for<'a> tokio_postgres::types::FromSql<'a>>(db: &Database, query: &str) -> T {
    let conn = db.conn().await.expect("connection");
    conn.query_one(query, &[]).await.expect(query).get(0)
}

async fn run(db: &Database, sql: &str) {
    let conn = db.conn().await.expect("connection");
    conn.batch_execute(sql).await.expect(sql);
}

/// `remuda.is_final` replaced by a wrong body, as a database of an older build would have it.
const WRONG_IS_FINAL: &str = "
    CREATE OR REPLACE FUNCTION remuda.is_final(state remuda.job_state)
    RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT false /* older */ $$;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_function_file_is_applied_again_and_nothing_else_is() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let files: i64 = one(&db, "SELECT count(*) FROM remuda.schema_functions").await;
    assert!(files >= 40, "every function file is recorded: {files}");
    let again = remuda::migrate::run(&db).await.expect("migrate");
    assert!(again.functions.is_empty(), "{again:?}");

    run(&db, WRONG_IS_FINAL).await;
    run(
        &db,
        "UPDATE remuda.schema_functions SET hash = 'older' WHERE name = 'jobs/is_final'",
    )
    .await;
    match test.client().await {
        Err(Error::FunctionsOutdated { files }) => assert_eq!(files, vec!["jobs/is_final"]),
        other => panic!(
            "a client of this build must refuse older functions: {:?}",
            other.err()
        ),
    }
    let report = remuda::migrate::run(&db).await.expect("migrate");
    assert_eq!(report.functions, vec!["jobs/is_final"]);
    assert!(one::<bool>(&db, "SELECT remuda.is_final('completed')").await);
    test.client()
        .await
        .expect("the functions are this build's again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_a_newer_remuda_applied_are_left_alone() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    run(&db, &WRONG_IS_FINAL.replace("older", "newer")).await;
    run(
        &db,
        "UPDATE remuda.schema_functions SET hash = 'newer', remuda_version = '999.0.0'
         WHERE name = 'jobs/is_final'",
    )
    .await;
    let report = remuda::migrate::run(&db).await.expect("migrate");
    assert!(report.functions.is_empty(), "{report:?}");
    let body: String = one(
        &db,
        "SELECT prosrc FROM pg_proc WHERE oid = 'remuda.is_final'::regproc",
    )
    .await;
    assert!(body.contains("newer"), "{body}");
    test.client()
        .await
        .expect("a newer remuda's functions do not stop this build");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_migrated_before_function_files_gets_them_and_keeps_its_hooks() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    // as a database of the build before: no record of functions, version 17, every job in
    // one table
    run(
        &db,
        "DROP FUNCTION remuda.lock_jobs(bigint[], boolean);
         ALTER TABLE remuda.jobs DETACH PARTITION remuda.jobs_live;
         DROP TABLE remuda.jobs, remuda.jobs_finished, remuda.unique_finished;
         ALTER TABLE remuda.jobs_live DROP CONSTRAINT jobs_live_state;
         ALTER TABLE remuda.jobs_live RENAME TO jobs;
         ALTER INDEX remuda.jobs_live_pkey RENAME TO jobs_pkey;
         ALTER TRIGGER jobs_live_notify_insert ON remuda.jobs RENAME TO jobs_notify_insert;
         CREATE INDEX jobs_finished_idx ON remuda.jobs (state, queue, finished_at)
             WHERE state IN ('completed', 'failed', 'cancelled', 'expired');
         DROP TABLE remuda.schema_functions;
         DROP TABLE remuda.failures;
         DROP TABLE remuda.history;
         DROP TABLE remuda.run_history;
         DROP TABLE remuda.steps;
         DROP FUNCTION remuda.steps_forget() CASCADE;
         DROP TABLE remuda.throttles;
         ALTER TABLE remuda.jobs DROP COLUMN formed;
         DROP TABLE remuda.queue_groups, remuda.fair_clocks;
         ALTER TABLE remuda.jobs DROP COLUMN group_key, DROP COLUMN fair_tag;
         ALTER TABLE remuda.queues DROP COLUMN fairness, DROP COLUMN fair_clock, DROP COLUMN rate_burst;
         ALTER TABLE remuda.jobs DROP COLUMN traceparent, DROP COLUMN tracestate;
         ALTER TABLE remuda.workflows DROP COLUMN traceparent, DROP COLUMN tracestate;
         ALTER TABLE remuda.workflows DROP COLUMN group_key;
         ALTER TABLE remuda.schedules DROP COLUMN group_key;
         DELETE FROM remuda.schema_migrations WHERE version >= 18;",
    )
    .await;
    let report = remuda::migrate::run(&db).await.expect("migrate");
    assert_eq!(
        report.applied,
        vec![
            "0018_functions",
            "0019_failures",
            "0020_history",
            "0021_steps",
            "0022_formed_jobs",
            "0023_fair_share",
            "0024_trace_context",
            "0025_fair_share_index",
            "0026_finished_storage",
            "0027_live_fillfactor",
            "0028_run_and_schedule_groups",
            "0029_fair_tags",
            "0030_kind_walk",
            "0031_rate_burst"
        ]
    );
    assert!(report.functions.len() >= 40, "{report:?}");
    let hooks: Vec<String> = {
        let conn = db.conn().await.expect("connection");
        conn.query(
            "SELECT name || ' ' || function::text FROM remuda.transition_hooks ORDER BY name",
            &[],
        )
        .await
        .expect("hooks")
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    assert_eq!(
        hooks,
        vec![
            "notify remuda.notify_outbox(remuda.transition[])",
            "workflow remuda.workflow_advance(remuda.transition[])"
        ]
    );
}
