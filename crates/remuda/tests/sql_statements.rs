//! Every SQL statement remuda runs prepares against a migrated database: a typo or a column
//! that a migration renamed fails here, not in production.

mod common;

/// The text of remuda's statement `name`.
fn statement_text(name: &str) -> &'static str {
    remuda::sql::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no statement {name}"))
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_prepares() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    assert!(remuda::sql::ALL.len() >= 20);
    for (name, text) in remuda::sql::ALL {
        let statement = match conn.prepare(text).await {
            Ok(statement) => statement,
            Err(e) => panic!("statement {name} does not prepare: {e:?}"),
        };
        // behind a transaction-mode pooler a type the driver does not know would be looked
        // up with a named statement outside any transaction: PostgreSQL's own types only
        let column_types = statement.columns().iter().map(|c| c.type_());
        for ty in statement.params().iter().chain(column_types) {
            assert!(
                tokio_postgres::types::Type::from_oid(ty.oid()).is_some(),
                "statement {name} takes or returns {ty}, not one of PostgreSQL's own types: cast it (to text, say)"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_twice_and_concurrently_is_harmless() {
    let (db, client) = common::setup().await;
    let pool = db.database().expect("pool");
    let runs = (0..4).map(|_| remuda::migrate::run(&pool));
    for report in futures_util::future::join_all(runs).await {
        let report = report.expect("migrate");
        assert_eq!(report.to, remuda::migrate::LATEST);
        assert!(
            report.applied.is_empty(),
            "already migrated from the template"
        );
    }
    client.check().await.expect("schema is current");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_newer_than_the_build_is_refused() {
    let (db, client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.execute(
        "INSERT INTO remuda.schema_migrations (version, name) VALUES (999, 'future')",
        &[],
    )
    .await
    .expect("insert");
    let err = client.check().await.expect_err("too new");
    assert!(
        matches!(err, remuda::Error::SchemaTooNew { found: 999, .. }),
        "{err}"
    );
    let err = remuda::migrate::run(&pool)
        .await
        .expect_err("refuses to migrate");
    assert!(err.to_string().contains("upgrade remuda"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_without_the_schema_says_to_migrate() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    pool.conn()
        .await
        .expect("connection")
        .batch_execute("DROP SCHEMA remuda CASCADE")
        .await
        .expect("drop");
    let err = remuda::Client::connect(db.conninfo())
        .await
        .expect_err("no schema");
    assert!(err.to_string().contains("remuda migrate"), "{err}");
    assert!(err.is_database_unusable());
}

/// The body of the schema's function `name` (`remuda.start_jobs`), as applied.
async fn function_body(conn: &deadpool_postgres::Object, name: &str) -> String {
    conn.query_one(
        "SELECT prosrc FROM pg_proc WHERE oid = to_regproc($1)",
        &[&name],
    )
    .await
    .expect("the function")
    .get(0)
}

/// The plan of `statement` (prepared as `name` with parameter types `types`) run with `args`,
/// as remuda's own sessions make it: a generic plan (see `SESSION_OPTIONS`).
async fn generic_plan(
    conn: &deadpool_postgres::Object,
    name: &str,
    types: &str,
    statement: &str,
    args: &str,
) -> String {
    conn.batch_execute(&format!("PREPARE {name}({types}) AS {statement}"))
        .await
        .expect("prepare");
    let rows = conn
        .query(&format!("EXPLAIN EXECUTE {name}({args})"), &[])
        .await
        .expect("explain");
    rows.iter()
        .map(|row| row.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The hot statements keep the plans they were written for whatever the table's statistics
/// say: the claim and the common completion find their rows by place (a TID scan), release
/// and promotion by primary key (the general completion, inside its functions: see
/// `the_general_lane_never_scans_the_job_table_whatever_the_statistics`). Once a claim had a second
/// condition on the updated rows, and a plan made while few jobs were available walked the
/// whole available index for every claim (2 000 jobs/s); before that, a completion joined
/// through a partial index did O(n²) work (900 jobs/s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_statements_keep_their_plans_whatever_the_statistics() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind, state, finished_at)
             SELECT 'noop', 'completed', now() FROM generate_series(1, 20000);
         INSERT INTO remuda.jobs (kind, queue) SELECT 'noop', 'other' FROM generate_series(1, 20000);
         INSERT INTO remuda.jobs (kind) SELECT 'noop' FROM generate_series(1, 5);
         INSERT INTO remuda.jobs (kind, state, worker_id, started_at, attempt)
             SELECT 'noop', 'running', 'w', now(), 1 FROM generate_series(1, 3);
         ANALYZE remuda.jobs",
    )
    .await
    .expect("load and analyze");
    let cases = [
        (
            "claim",
            "text, text[], int[], int, text, text, text[], boolean",
            "'default', '{noop}', '{25}', 4000, 'w', 'n', '{}', false",
            "Tid Scan on jobs_live j",
        ),
        (
            "claim_head",
            "text, text[], bigint",
            "'default', '{noop}', 4000",
            "Index Scan using jobs_available_idx on jobs_live",
        ),
        (
            "complete_ok",
            "tid[], bigint[], int[], timestamptz[], jsonb[], text",
            "'{}', '{}', '{}', '{}', '{}', 'w'",
            "Tid Scan on jobs_live j",
        ),
        (
            "release_jobs",
            "bigint[], int[], text, timestamptz[]",
            "'{}', '{}', 'w', '{}'",
            "Index Scan using jobs_live_pkey on jobs_live j",
        ),
        (
            "expire",
            "bigint, text, bigint",
            "1000, 'w', 1",
            "Index Scan using jobs_expires_idx on jobs_live x",
        ),
        (
            "promote",
            "int, text, bigint",
            "1000, 'w', 1",
            "Index Scan using jobs_scheduled_idx on jobs_live",
        ),
        (
            "prune",
            "text, bigint, bigint, text, bigint",
            "'completed', 86400000, 10000, NULL, NULL",
            "state_queue_finished_at_idx on jobs_finished_",
        ),
    ];
    for (name, types, args, expected) in cases {
        let text = statement_text(name);
        let plan = generic_plan(&conn, name, types, text, args).await;
        assert!(
            plan.contains(expected),
            "{name}: expected {expected}:\n{plan}"
        );
        // the claim's walk by kind goes through each kind's index in order
        assert!(
            name != "claim" || plan.contains("Index Scan using jobs_available_kind_idx"),
            "claim: its walk by kind not by jobs_available_kind_idx:\n{plan}"
        );
    }
    // the promotion's update, in remuda.promote_jobs, under the function's own settings
    let body = function_body(&conn, "remuda.promote_jobs").await;
    conn.batch_execute("SET enable_seqscan = off")
        .await
        .expect("set");
    let update = body
        .split_once("UPDATE remuda.jobs_live")
        .and_then(|(_, rest)| rest.split_once("RETURNING"))
        .map(|(update, _)| format!("UPDATE remuda.jobs_live{update}RETURNING id"))
        .expect("the function's update");
    let plan = generic_plan(
        &conn,
        "promote_jobs",
        "bigint[]",
        &update.replace("ANY(ids)", "ANY($1)"),
        "'{1,2}'",
    )
    .await;
    assert!(
        plan.contains("Index Scan using jobs_live_pkey on jobs_live"),
        "promote_jobs:\n{plan}"
    );
    // the start every claim writes through, in remuda.start_jobs: the locked rows by place
    let body = function_body(&conn, "remuda.start_jobs").await;
    let body = body
        .replace("ANY(places)", "ANY($1)")
        .replace("worker_id = worker,", "worker_id = $2,")
        .replace("array_position(kinds,", "array_position($3,")
        .replace("defaults[", "$4[")
        .replace("count_them", "$5");
    let plan = generic_plan(
        &conn,
        "start_jobs",
        "tid[], text, text[], int[], bool",
        body.split_once("RETURN QUERY")
            .and_then(|(_, update)| update.rsplit_once(';'))
            .map(|(update, _)| update)
            .expect("the function's update"),
        "'{}', 'w', '{noop}', '{25}', false",
    )
    .await;
    assert!(
        plan.contains("Tid Scan on jobs_live j"),
        "start_jobs:\n{plan}"
    );
}

/// The statements run under planner settings of their own (`remuda::sql::PLANS`) plan no scan
/// of the job table however empty it was when they were planned, with and without its
/// statistics: a connection keeps its plan, and a worker started before its jobs came used
/// to scan the whole table in every claim and completion as it grew. The lean completion is
/// one TID lookup per outcome, with no search of the batch's arrays on each row (a
/// `ctid = ANY($1)` beside the lookup, kept as a filter, once halved the drain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_statements_never_scan_the_table_however_empty_it_was() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    let claim_types = "text, text[], int[], bigint, text, text, text[]";
    let claim_args = "'default', '{noop}', '{25}', 4000, 'w', 'n', '{}'";
    let cases = [
        (
            "claim",
            format!("{claim_types}, boolean"),
            format!("{claim_args}, true"),
        ),
        (
            "claim_head",
            "text, text[], bigint".to_string(),
            "'default', '{noop}', 4000".to_string(),
        ),
        (
            "claim_capped",
            claim_types.to_string(),
            claim_args.to_string(),
        ),
        (
            "claim_limited",
            format!("{claim_types}, text, bool"),
            format!("{claim_args}, NULL, false"),
        ),
        (
            "complete_ok",
            "tid[], bigint[], int[], timestamptz[], jsonb[], text".to_string(),
            "'{}', '{}', '{}', '{}', '{}', 'w'".to_string(),
        ),
        (
            "promote",
            "bigint, text, bigint".to_string(),
            "10000, 'w', 1".to_string(),
        ),
        (
            "notification_claim",
            "int, bigint, text, int, text[]".to_string(),
            "32, 30000, 'd', 5, '{webhook}'".to_string(),
        ),
        (
            "notification_sent",
            "bigint[]".to_string(),
            "'{1, 2}'".to_string(),
        ),
    ];
    let states = [
        ("never analysed, empty", "SELECT 1"),
        ("analysed empty", "ANALYZE remuda.jobs"),
        (
            "analysed with five jobs",
            "INSERT INTO remuda.jobs (kind) SELECT 'noop' FROM generate_series(1, 5); ANALYZE remuda.jobs",
        ),
    ];
    for (i, (state, setup)) in states.iter().enumerate() {
        conn.batch_execute(setup).await.expect("table state");
        for (name, types, args) in &cases {
            let plan_settings = remuda::sql::PLANS
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} has no planner settings"))
                .1;
            let text = statement_text(name);
            conn.batch_execute(&format!("BEGIN; {plan_settings}"))
                .await
                .expect("settings");
            let plan = generic_plan(&conn, &format!("{name}_{i}"), types, text, args).await;
            conn.batch_execute("COMMIT").await.expect("commit");
            assert!(
                !plan.contains("Seq Scan on jobs") && !plan.contains("Seq Scan on notifications"),
                "{name}, table {state}: a scan of the table:\n{plan}"
            );
            if *name == "notification_sent" {
                assert!(
                    plan.contains("notifications_pkey") && !plan.contains("notifications_due_idx"),
                    "{name}, table {state}: not found by primary key:\n{plan}"
                );
            }
            if *name == "notification_claim" {
                assert!(
                    plan.matches("Tid Scan on notifications").count() == 2,
                    "{name}, table {state}: the claimed rows not written by place:\n{plan}"
                );
            }
            if *name == "complete_ok" {
                assert!(
                    plan.contains("TID Cond: (ctid = u.tid)") && !plan.contains("ANY ($1)"),
                    "{name}, table {state}: not one TID lookup per outcome:\n{plan}"
                );
            }
        }
    }
}

/// A newer schema may add job states; this build's counts per queue keep working, and count
/// the states it knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_counts_survive_a_state_this_build_does_not_know() {
    let db = remuda::testing::TestDatabase::new()
        .await
        .expect("test database");
    let client = db.client().await.expect("client");
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("conn");
    // separate statements: a new enum value cannot be used in the transaction that adds it
    conn.batch_execute("ALTER TYPE remuda.job_state ADD VALUE 'waiting'")
        .await
        .expect("a state from the future");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (state, queue, kind, args) VALUES
           ('waiting', 'q', 'x', '{}'), ('available', 'q', 'x', '{}')",
    )
    .await
    .expect("jobs in it");
    let stats = client.queue_stats().await.expect("counts still work");
    let q = stats.iter().find(|s| s.queue == "q").expect("queue q");
    assert_eq!(q.count(remuda::JobState::Available), 1);
}

/// The general lane's write (`complete_jobs`) finds each row by primary key and writes it at
/// its place, through its seam hooks too, and never scans the job table, whatever the table's
/// statistics say: joined to the outcomes by id, a batch on a never analysed table was
/// planned as a scan of the table's running rows (estimated at one row) joined to the
/// outcomes by a nested loop, every outcome compared with every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_general_lane_never_scans_the_job_table_whatever_the_statistics() {
    let text = statement_text("complete_jobs");
    for (state, before) in [
        ("never analysed", "SELECT 1"),
        ("analysed empty", "ANALYZE remuda.jobs"),
    ] {
        let db = remuda::testing::TestDatabase::new()
            .await
            .expect("test database");
        let pool = db.database().expect("pool");
        let conn = pool.conn().await.expect("connection");
        conn.batch_execute(&format!(
            "{before};
             INSERT INTO remuda.jobs (kind, args, flags) SELECT 'x', '{{}}', 2 FROM generate_series(1, 3000);
             UPDATE remuda.jobs SET state = 'running', worker_id = 'w', attempt = 1, started_at = now();"
        ))
        .await
        .expect("3 000 running jobs");
        let rows = conn
            .query(
                "SELECT id, started_at::text FROM remuda.jobs WHERE id % 3 <> 0",
                &[],
            )
            .await
            .expect("their runs");
        let list = |column: usize, quoted: bool| {
            let items: Vec<String> = rows
                .iter()
                .map(|r| {
                    let v: String = if column == 0 {
                        r.get::<_, i64>(0).to_string()
                    } else {
                        r.get(column)
                    };
                    if quoted {
                        format!("\"{v}\"")
                    } else {
                        v
                    }
                })
                .collect();
            format!("'{{{}}}'", items.join(","))
        };
        let n = rows.len();
        let repeat = |v: &str| format!("'{{{}}}'", vec![v; n].join(","));
        let seq_scans =
            "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'remuda.jobs'::regclass";
        conn.batch_execute(&format!(
            "BEGIN; SELECT set_config('plan_cache_mode', 'force_custom_plan', true);
             PREPARE general(bigint[], int[], timestamptz[], text[], jsonb[], jsonb[], bigint[], text) AS {text}"
        ))
        .await
        .expect("prepared");
        let scans_before: i64 = conn.query_one(seq_scans, &[]).await.expect("scans").get(0);
        let written: i64 = conn
            .query_one(
                &format!(
                    "EXECUTE general({}, {}, {}, {}, {}, {}, {}, 'w')",
                    list(0, false),
                    repeat("1"),
                    list(1, true),
                    repeat("completed"),
                    repeat("\"{\\\"ok\\\": 1}\""),
                    repeat("NULL"),
                    repeat("0"),
                ),
                &[],
            )
            .await
            .expect("the batch written")
            .get("written");
        let scans_after: i64 = conn.query_one(seq_scans, &[]).await.expect("scans").get(0);
        conn.batch_execute("COMMIT").await.expect("commit");
        assert_eq!(written, n as i64, "{state}: every outcome written");
        assert_eq!(
            scans_after, scans_before,
            "{state}: the job table was scanned to write {n} outcomes"
        );
    }
}

/// The seam's workflow hook reads the node jobs of a batch by primary key, whatever else the
/// table holds: asked to group them by run in order with sorts off (remuda's sessions), the
/// planner walked the whole of the workflow index instead, every node job of every run ever
/// kept filtered through the batch's ids (140 ms of a 5 000-element batch of one map).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_hook_reads_its_batch_not_every_workflow_job() {
    let db = remuda::testing::TestDatabase::new()
        .await
        .expect("test database");
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind, args, flags, state, finished_at, workflow_id, workflow)
         SELECT 'x', '{}', 2, 'completed', now(), 1 + i % 5,
                jsonb_build_object('id', 1 + i % 5, 'node', 'n' || i)
         FROM generate_series(1, 5000) i",
    )
    .await
    .expect("5 000 node jobs of ended runs");
    // (index entries read in this transaction, over every index of the table)
    let read = "SELECT COALESCE(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)::bigint
                FROM pg_index WHERE indrelid = 'remuda.jobs'::regclass";
    conn.batch_execute("BEGIN").await.expect("begin");
    let before: i64 = conn.query_one(read, &[]).await.expect("reads").get(0);
    conn.batch_execute(
        "SELECT remuda.workflow_advance(ARRAY(
             SELECT ROW(j.id, j.queue, j.kind, j.flags, j.counted, 'running', j.state,
                        j.attempt)::remuda.transition
             FROM remuda.jobs j WHERE j.id IN (10, 20, 30)))",
    )
    .await
    .expect("the hook runs");
    let after: i64 = conn.query_one(read, &[]).await.expect("reads").get(0);
    conn.batch_execute("COMMIT").await.expect("commit");
    assert!(
        after - before <= 30,
        "the hook read {} index entries for a batch of 3 node jobs",
        after - before
    );
}

/// An outcome written while another transaction updates its running job (a waiter marking
/// it, a cancel) is written once that update commits: the general lane waits for the row and
/// writes its newest version. Its place read before the update named a version the write no
/// longer saw, and the outcome was dropped as if stale, leaving the job running. Forced: the
/// other transaction holds the row until the completion is seen waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_written_while_its_job_is_updated_is_written_after_the_update() {
    let db = remuda::testing::TestDatabase::new()
        .await
        .expect("test database");
    let pool = db.database().expect("pool");
    let writer = pool.conn().await.expect("connection");
    let other = pool.conn().await.expect("connection");
    let id: i64 = writer
        .query_one(
            "INSERT INTO remuda.jobs (kind, args, flags, state, worker_id, attempt, started_at)
             VALUES ('x', '{}', 2, 'running', 'w', 1, '2026-01-01T00:00:00Z') RETURNING id",
            &[],
        )
        .await
        .expect("a running job")
        .get(0);
    let pid: i32 = writer
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let text = statement_text("complete_jobs");
    writer
        .batch_execute(&format!(
            "PREPARE general(bigint[], int[], timestamptz[], text[], jsonb[], jsonb[], bigint[], text) AS {text}"
        ))
        .await
        .expect("prepared");
    other
        .batch_execute(&format!(
            "BEGIN; UPDATE remuda.jobs SET flags = flags | 1 WHERE id = {id}"
        ))
        .await
        .expect("the row held by an update");
    let write = tokio::spawn(async move {
        let row = writer
            .query_one(
                &format!(
                    "EXECUTE general('{{{id}}}', '{{1}}', '{{\"2026-01-01T00:00:00Z\"}}', '{{completed}}',
                                     '{{\"{{\\\"ok\\\": 1}}\"}}', '{{NULL}}', '{{0}}', 'w')"
                ),
                &[],
            )
            .await
            .expect("the outcome's statement");
        row.get::<_, i64>("written")
    });
    // the completion waits for the row: only then does the update commit
    loop {
        // (statistics are read once per transaction unless cleared)
        other
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .expect("clear");
        let waiting: bool = other
            .query_one(
                "SELECT COALESCE((SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1), false)",
                &[&pid],
            )
            .await
            .expect("its wait")
            .get(0);
        if waiting {
            break;
        }
        tokio::task::yield_now().await;
    }
    other.batch_execute("COMMIT").await.expect("commit");
    let written = write.await.expect("the write's task");
    let state: String = other
        .query_one("SELECT state::text FROM remuda.jobs WHERE id = $1", &[&id])
        .await
        .expect("its state")
        .get(0);
    assert_eq!(
        (written, state.as_str()),
        (1, "completed"),
        "the outcome was dropped"
    );
}

/// The moves between the live and the finished part name every column of a job: a column
/// added to the job table and left out of one of them would be lost when a job ends or is
/// revived. The lean completion, remuda.finish_jobs and the revive are read as the database
/// holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_move_between_the_parts_carries_every_column() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    let columns: Vec<String> = conn
        .query(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = 'remuda' AND table_name = 'jobs' ORDER BY ordinal_position",
            &[],
        )
        .await
        .expect("columns")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(columns.len() > 30, "{columns:?}");
    let body = |function: &'static str| {
        let conn = &conn;
        async move {
            conn.query_one(
                "SELECT prosrc FROM pg_proc WHERE oid = to_regproc($1)",
                &[&function],
            )
            .await
            .expect("the function")
            .get::<_, String>(0)
        }
    };
    let moves = [
        ("complete_ok.sql", statement_text("complete_ok").to_string()),
        ("remuda.finish_jobs", body("remuda.finish_jobs").await),
        ("remuda.revive_jobs", body("remuda.revive_jobs").await),
    ];
    for (name, text) in moves {
        let start = text
            .find("INSERT INTO remuda.jobs_")
            .unwrap_or_else(|| panic!("{name} inserts into a part"));
        let list = &text[start..];
        let list =
            &list[list.find('(').expect("a column list") + 1..list.find(')').expect("its end")];
        let named: Vec<String> = list.split(',').map(|c| c.trim().to_string()).collect();
        assert_eq!(named, columns, "{name}'s move names every column, in order");
    }
}

/// Both ways a worker gives jobs back write through the one release (`remuda.release_jobs`):
/// the release of named runs gives back only those still running for the worker in the
/// same run, attempt restored; the release of orphans gives back every job running for the
/// worker but those it knows, and leaves other workers' jobs alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_gives_back_the_named_runs_and_the_orphans_only() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    let ids: Vec<i64> = conn
        .query(
            "INSERT INTO remuda.jobs (kind, state, worker_id, started_at, attempt)
             SELECT 'noop', 'running', CASE WHEN i = 6 THEN 'other' ELSE 'w' END,
                    '2026-01-01T00:00:00Z', 2
             FROM generate_series(1, 6) i ORDER BY i RETURNING id",
            &[],
        )
        .await
        .expect("running jobs")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let started: chrono::DateTime<chrono::Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
    let later: chrono::DateTime<chrono::Utc> = "2026-01-01T00:00:01Z".parse().expect("time");
    // jobs 1 and 2 in their run; job 3 named with another run's claim time: not released
    let released: i64 = conn
        .query_one(
            statement_text("release_jobs"),
            &[
                &&ids[..3],
                &vec![2i32; 3],
                &"w",
                &vec![started, started, later],
            ],
        )
        .await
        .expect("release")
        .get("released");
    assert_eq!(released, 2);
    // the worker knows job 4: jobs 3 and 5 are its orphans, job 6 another worker's
    let orphans: i64 = conn
        .query_one(statement_text("release_orphans"), &[&"w", &vec![ids[3]]])
        .await
        .expect("release orphans")
        .get("released");
    assert_eq!(orphans, 2);
    let rows = conn
        .query(
            "SELECT state::text, attempt, worker_id FROM remuda.jobs WHERE id = ANY($1) ORDER BY id",
            &[&ids],
        )
        .await
        .expect("jobs");
    let found: Vec<(String, i32, Option<String>)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let available = ("available".to_string(), 1, None);
    let running = |worker: &str| ("running".to_string(), 2, Some(worker.to_string()));
    assert_eq!(
        found,
        vec![
            available.clone(),
            available.clone(),
            available.clone(),
            running("w"),
            available,
            running("other"),
        ]
    );
}

/// What an UPDATE's SET list assigns (each column and its expression) and the columns its
/// RETURNING list names, in order.
fn set_and_returning(update: &str) -> (Vec<(String, String)>, Vec<String>) {
    let code: String = update
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let (_, set) = code.split_once("SET ").expect("a SET list");
    let (set, rest) = set.split_once("WHERE ").expect("a WHERE clause");
    let (_, returning) = rest.split_once("RETURNING ").expect("a RETURNING list");
    let assigned = set
        .lines()
        .filter_map(|line| line.trim().split_once(" = "))
        .map(|(column, value)| {
            let value = value.trim().trim_end_matches(',');
            (column.trim().to_string(), value.to_string())
        })
        .collect();
    let returning = returning.split(';').next().unwrap_or(returning);
    let returned = returning
        .trim()
        .split(',')
        .map(|item| item.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    (assigned, returned)
}

/// The plain claim writes its own copy of the one start (`remuda.start_jobs`) for speed: it
/// assigns the same columns the same way (but `counted`, which only the limited claims set)
/// and returns the same ones (but the concurrency key, which only the limited claims read).
/// A column or a rule changed in one place and not the other fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_claim_starts_jobs_as_the_one_writer_does() {
    let (db, _client) = common::setup().await;
    let conn = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("connection");
    let body = function_body(&conn, "remuda.start_jobs").await;
    // the function's arguments by the claim's parameters
    let body = body.replace("= worker,", "= $5,").replace(
        "defaults[array_position(kinds, j.kind)]",
        "($3::int[])[array_position($2::text[], j.kind)]",
    );
    let (mut assigned, mut returned) = set_and_returning(&body);
    assigned.retain(|(column, _)| column != "counted");
    returned.retain(|column| column != "j.concurrency_key");
    let claim = statement_text("claim").replace("j.ctid AS tid", "j.ctid");
    let (claim_assigned, claim_returned) = set_and_returning(&claim);
    assert_eq!(claim_assigned, assigned);
    assert_eq!(claim_returned, returned);
    assert!(
        assigned.len() >= 6 && returned.len() >= 13,
        "{assigned:?} {returned:?}"
    );
}

/// The claim's walk by kind (claim.sql's $8) takes the jobs its walk in the queue's order
/// takes, in that order: each kind's by priority, time and id, merged, behind jobs of a kind
/// the worker does not run, with priorities and kinds interleaved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_by_kind_takes_what_the_claim_in_the_queues_order_takes() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let mut conn = pool.conn().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind, priority) SELECT 'elsewhere', 0 FROM generate_series(1, 3000);
         INSERT INTO remuda.jobs (kind, priority, run_at)
             SELECT (ARRAY['a', 'b', 'elsewhere'])[1 + i % 3], i % 4,
                    now() - make_interval(secs => i % 7)
             FROM generate_series(1, 900) i;
         ANALYZE remuda.jobs",
    )
    .await
    .expect("jobs");
    // the first 250 of the worker's kinds in the queue's order, by id
    let expected: Vec<i64> = conn
        .query(
            "SELECT id FROM (SELECT id FROM remuda.jobs WHERE state = 'available' AND kind IN ('a', 'b')
             ORDER BY priority, run_at, id LIMIT 250) first ORDER BY id",
            &[],
        )
        .await
        .expect("expected")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(expected.len(), 250);
    for by_kind in [false, true] {
        let tx = conn.transaction().await.expect("begin");
        let mut claimed = claim_ids(&tx, &["a", "b"], 250, by_kind).await;
        claimed.sort();
        assert_eq!(claimed, expected, "by kind: {by_kind}");
        tx.rollback().await.expect("rollback");
    }
}

/// The claim's walk by kind passes over the jobs another worker holds and takes the next
/// ones, as the walk in the queue's order does: two workers of one kind behind jobs of
/// another both claim, where taking each kind's first jobs before locking them left the
/// second with nothing (and idle until the next poll).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_by_kind_passes_over_jobs_another_worker_holds() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let mut holder = pool.conn().await.expect("holder");
    let mut conn = pool.conn().await.expect("claimer");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind) SELECT 'elsewhere' FROM generate_series(1, 500);
         INSERT INTO remuda.jobs (kind) SELECT 'a' FROM generate_series(1, 300);
         ANALYZE remuda.jobs",
    )
    .await
    .expect("jobs");
    let held = holder.transaction().await.expect("begin");
    let held_ids: Vec<i64> = held
        .query(
            "SELECT id FROM remuda.jobs_live WHERE kind = 'a' AND state = 'available'
             ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE",
            &[],
        )
        .await
        .expect("another worker's claim holds the first jobs")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(held_ids.len(), 100);
    let tx = conn.transaction().await.expect("begin");
    let claimed = claim_ids(&tx, &["a"], 50, true).await;
    assert_eq!(claimed.len(), 50, "the next jobs taken: {claimed:?}");
    assert!(
        claimed.iter().all(|id| !held_ids.contains(id)),
        "a held job taken: {claimed:?}"
    );
    tx.rollback().await.expect("rollback");
    held.rollback().await.expect("release");
}

/// The claim's walk by kind goes through each kind's index whatever the statistics say:
/// taken while the queue held jobs of one other kind only, they made any kind look like all
/// the jobs, and the walk went through the queue's index instead, reading every job of the
/// other kinds in every claim (75-88 ms a claim of 2 000 behind 100 000 of them, against
/// 16-22 through the kind's index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_by_kind_walks_the_kinds_index_under_statistics_that_saw_other_kinds_only() {
    let (db, _client) = common::setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (kind, priority) SELECT 'elsewhere', -1 FROM generate_series(1, 20000);
         ANALYZE remuda.jobs;
         INSERT INTO remuda.jobs (kind) SELECT 'a' FROM generate_series(1, 20000);
         SET enable_seqscan = off",
    )
    .await
    .expect("jobs, statistics taken before the kind's came");
    for mode in ["force_custom_plan", "force_generic_plan"] {
        conn.batch_execute(&format!("SET plan_cache_mode = {mode}; DEALLOCATE ALL"))
            .await
            .expect("plan mode");
        let plan = generic_plan(
            &conn,
            "claim",
            "text, text[], int[], int, text, text, text[], boolean",
            statement_text("claim"),
            "'default', '{a}', '{25}', 2000, 'w', 'n', '{}', true",
        )
        .await;
        assert!(
            plan.contains("Index Scan using jobs_available_kind_idx"),
            "{mode}: the walk by kind not through the kind's index:\n{plan}"
        );
    }
}

/// The ids of the jobs claim.sql takes in `tx`: up to `n` of `kinds` from the default queue,
/// for worker "w", walked `by_kind` or in the queue's order.
async fn claim_ids(tx: &remuda::db::Tx<'_>, kinds: &[&str], n: i64, by_kind: bool) -> Vec<i64> {
    let kinds: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
    let defaults = vec![25i32; kinds.len()];
    let capabilities: Vec<String> = Vec::new();
    tx.batch_execute(remuda::sql::CLAIM_PLAN)
        .await
        .expect("settings");
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        &"default",
        &kinds,
        &defaults,
        &n,
        &"w",
        &"n",
        &capabilities,
        &by_kind,
    ];
    tx.query(statement_text("claim"), &params)
        .await
        .expect("claim")
        .iter()
        .map(|r| r.get("id"))
        .collect()
}
