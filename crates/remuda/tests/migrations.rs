//! Migrations outside a transaction: `CREATE INDEX CONCURRENTLY` and `ALTER TYPE … ADD VALUE`
//! run statement by statement under the migration lock, a run killed half-way is found and
//! finished by the next one, a schema newer than the build is still refused, and a job in a
//! state this build does not know is still read.

use remuda::testing::{migrate_with, ExtraMigration, TestDatabase};
use remuda::{Database, Error};
use std::time::Duration;

const INDEX_AND_STATE: ExtraMigration = ExtraMigration {
    version: remuda::migrate::LATEST + 1,
    name: "index_and_state",
    sql: "
-- an index built without blocking writers, and a new enum value
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_kind_extra_idx ON remuda.jobs_live (kind);
ALTER TYPE remuda.job_state ADD VALUE IF NOT EXISTS 'archived';
",
    outside_transaction: true,
};

fn label() -> String {
    format!("{:04}_index_and_state", INDEX_AND_STATE.version)
}

async fn one_bool(db: &Database, query: &str) -> bool {
    let conn = db.conn().await.expect("connection");
    conn.query_one(query, &[]).await.expect(query).get(0)
}

const INDEX_VALID: &str = "SELECT coalesce((SELECT i.indisvalid FROM pg_index i
    WHERE i.indexrelid = to_regclass('remuda.jobs_kind_extra_idx')), false)";
const INDEX_EXISTS: &str = "SELECT to_regclass('remuda.jobs_kind_extra_idx') IS NOT NULL";
const FINISHED: &str = "SELECT coalesce((SELECT finished FROM remuda.schema_migrations
    ORDER BY version DESC LIMIT 1), false)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_outside_a_transaction_builds_an_index_concurrently_and_adds_a_state() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    // connected while the schema is this build's
    let client = test.client().await.expect("client");
    let id = client
        .insert(remuda::NewJob::new("any", &()).expect("job"))
        .await
        .expect("enqueue");
    let report = migrate_with(&db, &[INDEX_AND_STATE])
        .await
        .expect("migrate");
    assert_eq!(report.applied, vec![label()]);
    assert_eq!(report.to, INDEX_AND_STATE.version);
    assert!(one_bool(&db, INDEX_VALID).await, "the index is valid");
    assert!(
        one_bool(
            &db,
            "SELECT 'archived' = ANY(enum_range(NULL::remuda.job_state)::text[])"
        )
        .await
    );
    assert!(one_bool(&db, FINISHED).await);
    // a job in the new state is still read by this build, which cannot name the state
    let conn = db.conn().await.expect("connection");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'archived' WHERE id = $1",
        &[&id],
    )
    .await
    .expect("archive");
    let job = client.job(id).await.expect("read").expect("exists");
    assert_eq!(job.state, remuda::JobState::Unknown);
    // the list of every state walks each state this build knows in its own index: it still
    // answers, without the job it cannot place (which is read by id above)
    let listed = client
        .jobs(&remuda::JobFilter::default())
        .await
        .expect("list");
    assert!(listed.is_empty(), "{listed:?}");
    let again = migrate_with(&db, &[INDEX_AND_STATE])
        .await
        .expect("migrate again");
    assert!(
        again.applied.is_empty() && again.resumed.is_empty(),
        "{again:?}"
    );
    // this build's own migrations stop short of it: the schema is newer, and refused
    match remuda::migrate::run(&db).await {
        Err(Error::SchemaTooNew { found, expected }) => {
            assert_eq!(
                (found, expected),
                (INDEX_AND_STATE.version, remuda::migrate::LATEST)
            )
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

/// The session building the index is killed while it waits for a writer's transaction: the
/// migration stays recorded as started, with an invalid index behind it. The next run drops
/// that index, builds it again and records the migration finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_half_way_is_found_and_finished_by_the_next_run() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    // a writer's open transaction: CREATE INDEX CONCURRENTLY waits for it after creating the
    // (still invalid) index
    let mut blocker = db.conn().await.expect("connection");
    let writer = blocker.transaction().await.expect("begin");
    writer
        .batch_execute("LOCK TABLE remuda.jobs IN ROW EXCLUSIVE MODE")
        .await
        .expect("lock");
    let migrating = {
        let db = db.clone();
        tokio::spawn(async move { migrate_with(&db, &[INDEX_AND_STATE]).await })
    };
    let watcher = db.conn().await.expect("connection");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let pid: i32 = loop {
        let row = watcher
            .query_opt(
                "SELECT pid FROM pg_stat_activity
                 WHERE datname = current_database() AND query LIKE '%CREATE INDEX CONCURRENTLY%'
                   AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .expect("activity");
        if let Some(row) = row {
            break row.get(0);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the index build never waited"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    watcher
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .expect("terminate");
    let killed = migrating.await.expect("joined");
    assert!(killed.is_err(), "{killed:?}");
    writer.rollback().await.expect("rollback");
    drop(blocker);
    assert!(!one_bool(&db, FINISHED).await, "recorded as started only");
    assert!(
        one_bool(&db, INDEX_EXISTS).await,
        "the build left its index"
    );
    assert!(!one_bool(&db, INDEX_VALID).await, "an invalid one");

    let report = migrate_with(&db, &[INDEX_AND_STATE])
        .await
        .expect("migrate again");
    assert_eq!(report.resumed, vec![label()], "{report:?}");
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.to, INDEX_AND_STATE.version);
    assert!(one_bool(&db, INDEX_VALID).await, "built again, valid");
    assert!(one_bool(&db, FINISHED).await);
}
