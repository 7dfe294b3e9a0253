//! The plain drain's work per job, counted by the server, never timed: one worker drains
//! `JOBS` no-op jobs in batches of 2 000 in a private cluster that counts every statement
//! (`pg_stat_statements`: statements, rows and shared buffers per job) and logs the plan each
//! one ran with its row counts (`auto_explain`: the rows every plan node read, per job). The
//! budgets below fail a change that adds work per job on the claim → execute → complete path,
//! on any machine and at any hour, where a timing would move by 2x with the machine.
//!
//! The drain runs in three states of the job table's statistics, since the statements are
//! planned once per connection from what the planner knows then: never analysed, analysed
//! with the backlog in it, and analysed empty with the worker started before its jobs came
//! (it has run one job, so every statement of the drain was planned on a near-empty table).
//!
//! Buffers alone do not see every regression: a batch array searched once per row (a
//! `ctid = ANY($1)` filter beside the lean completion's TID lookup halved the drain) reads
//! the same buffers and rows. Every plan is therefore also checked for a node run more than
//! once per statement whose condition takes a whole array parameter.

use remuda::db::cluster::ClusterOptions;
use remuda::testing::PrivateCluster;
use remuda::{Client, JobContext, Task, TaskError, Worker, WorkerConfig};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Jobs per drain.
const JOBS: i64 = 20_000;

/// The budgets, per job, for every state of the statistics, and the figures that set them
/// (20 000 jobs, debug build, the states never analysed / analysed with the backlog / analysed
/// empty with the worker first; statements without BEGIN, SET and COMMIT):
///
/// | measure                 | this build            | budget | what it catches                         |
/// |-------------------------|-----------------------|--------|-----------------------------------------|
/// | statements              | 0.0065–0.0069         | 0.02   | a statement per job (1.0), smaller batches |
/// | rows                    | 2.01                  | 2.5    | a row per job more                      |
/// | shared buffers          | 16.3–16.5             | 18     | an index entry per job more (~2)        |
/// | rows read by plan nodes | 12.08–13.14           | 14     | plans made on the empty table: 38       |
///
/// A completion moves its job from the live part to the finished part (DELETE … RETURNING
/// feeding an INSERT): the delete and the CTE it fills read one row per job more than the
/// update in place did (11.04 rows read by plan nodes), and the finished part's two indexes
/// cost fewer buffers than the live table's entries did (17.8).
/// The TID filter that halved the drain (`ctid = ANY($1)` beside `ctid = u.tid` in
/// complete_ok.sql) read the same buffers and rows: the array rule refuses it.
struct Budget {
    statements: f64,
    rows: f64,
    buffers: f64,
    examined: f64,
}

const BUDGET: Budget = Budget {
    statements: 0.02,
    rows: 2.5,
    buffers: 18.0,
    examined: 14.0,
};

/// The states of the job table's statistics when the worker plans its statements.
#[derive(Clone, Copy, Debug)]
enum Statistics {
    /// Never analysed (autovacuum is off in this cluster).
    None,
    /// Analysed with the whole backlog in the table.
    Fresh,
    /// Analysed while the table was empty, the worker started and one job run before the
    /// backlog came.
    PlannedEmpty,
    /// Analysed with the backlog behind `OTHER_KINDS` jobs of a kind no worker runs.
    BehindOtherKinds,
}

/// Jobs of a kind no worker runs ahead of the backlog (`Statistics::BehindOtherKinds`).
const OTHER_KINDS: i64 = 100_000;

/// Rows read by plan nodes per job, behind `OTHER_KINDS` jobs of another kind: the claims
/// walk each kind of the worker's in its order (claim.sql's walk by kind) rather than the
/// queue's, which passed over every job of the other kind in each claim. Measured (debug
/// build, 20 000 jobs): 21.2-22.2 by kind, 112.5 in the queue's order.
const BEHIND_OTHER_KINDS_EXAMINED: f64 = 30.0;

struct Noop;

impl Task for Noop {
    const KIND: &'static str = "noop";
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, _ctx: JobContext, _args: Value) -> Result<(), TaskError> {
        Ok(())
    }
}

/// What the server counted for one drain, per job.
#[derive(Debug)]
struct Work {
    statements: f64,
    rows: f64,
    buffers: f64,
    examined: f64,
    /// Plan nodes run more than once per statement with an array parameter in a condition:
    /// the statement's text and the condition.
    array_searches: Vec<String>,
    /// Plans logged of claims and of lean completions: none would mean nothing was measured.
    claims: usize,
    lean_writes: usize,
}

/// Statements of the test itself carry this comment and are not counted.
const OWN: &str = "/* work budget test */";

/// A private cluster that counts every statement and logs every plan with its row counts,
/// and an administrator's connection to it.
async fn counting_cluster() -> (PrivateCluster, remuda::db::Conn) {
    let options = ClusterOptions {
        extra_settings: "shared_preload_libraries = 'pg_stat_statements, auto_explain'\n\
             pg_stat_statements.track = top\npg_stat_statements.track_utility = off\n\
             track_io_timing = off\nautovacuum = off\n\
             auto_explain.log_analyze = on\nauto_explain.log_timing = off\n\
             auto_explain.log_format = json\nlogging_collector = on\n\
             log_destination = 'jsonlog'\nlog_directory = 'log'\n\
             log_rotation_size = 0\nlog_rotation_age = 0\n"
            .into(),
        ..ClusterOptions::default()
    };
    let cluster = PrivateCluster::start_with(&options)
        .await
        .expect("a private cluster");
    let admin = Client::connect(&cluster.conninfo())
        .await
        .expect("admin client");
    let admin = admin.database().conn().await.expect("admin connection");
    admin
        .batch_execute("CREATE EXTENSION pg_stat_statements")
        .await
        .expect("pg_stat_statements");
    (cluster, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_drain_stays_within_its_work_budget_whatever_the_statistics() {
    let (cluster, admin) = counting_cluster().await;
    let mut failures = Vec::new();
    for (i, statistics) in [
        Statistics::None,
        Statistics::Fresh,
        Statistics::PlannedEmpty,
    ]
    .into_iter()
    .enumerate()
    {
        let dbname = format!("drain_{i}");
        let work = drain(&cluster, &admin, &dbname, statistics).await;
        eprintln!("{statistics:?}: {work:?}");
        let over = |name: &str, value: f64, budget: f64| {
            (value > budget)
                .then(|| format!("{statistics:?}: {name} {value:.3} per job, budget {budget}"))
        };
        failures.extend(over("statements", work.statements, BUDGET.statements));
        failures.extend(over("rows", work.rows, BUDGET.rows));
        failures.extend(over("shared buffers", work.buffers, BUDGET.buffers));
        failures.extend(over(
            "rows read by plan nodes",
            work.examined,
            BUDGET.examined,
        ));
        if work.statements == 0.0 || work.claims == 0 || work.lean_writes == 0 {
            failures.push(format!(
                "{statistics:?}: nothing measured (statements, claims and lean writes seen: {work:?})"
            ));
        }
        failures.extend(work.array_searches.iter().map(|s| {
            format!("{statistics:?}: a batch array searched once per row (the statement's work grows with the square of its batch): {s}")
        }));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A worker whose queue's head is jobs of a kind it does not run claims its own jobs without
/// reading the others in every claim (the drain behind them ran at a third of its speed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_behind_jobs_of_other_kinds_reads_its_own_jobs() {
    let (cluster, admin) = counting_cluster().await;
    let work = drain(
        &cluster,
        &admin,
        "drain_behind",
        Statistics::BehindOtherKinds,
    )
    .await;
    eprintln!("behind other kinds: {work:?}");
    assert!(work.claims > 0, "no claim seen: {work:?}");
    assert!(
        work.examined <= BEHIND_OTHER_KINDS_EXAMINED,
        "rows read by plan nodes {:.1} per job, budget {BEHIND_OTHER_KINDS_EXAMINED}",
        work.examined
    );
}

/// Jobs enqueued at once into a queue with fair share are tagged with work in proportion to
/// their number: each job finds its group's next tag by the group's place, where a join of
/// the jobs with their groups, planned as a nested loop, compared every job with every
/// group (100 000 jobs over 1 000 groups: 10 s to enqueue). Rows read by plan nodes per job,
/// 5 000 jobs over 1 000 groups (debug build): 2 022 by the join, 25 by place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_queues_enqueue_is_tagged_in_proportion_to_its_jobs_not_its_groups() {
    const TAGGED: i64 = 5_000;
    let (cluster, admin) = counting_cluster().await;
    let dbname = "fair_enqueue";
    let url = migrated_database(&cluster, &admin, dbname).await;
    let client = Client::connect(&url).await.expect("client");
    client
        .change_queue(
            "fair",
            &remuda::QueueChange {
                fairness: Some(remuda::Fairness::Group),
                ..remuda::QueueChange::default()
            },
        )
        .await
        .expect("fair queue");
    admin
        .batch_execute(&format!(
            "{OWN} ALTER DATABASE {dbname} SET auto_explain.log_min_duration = 0; \
             {OWN} ALTER DATABASE {dbname} SET auto_explain.log_nested_statements = on"
        ))
        .await
        .expect("log plans");
    let conn = Client::connect(&url)
        .await
        .expect("enqueuing client")
        .database()
        .conn()
        .await
        .expect("connection");
    conn.batch_execute(&format!(
        "INSERT INTO remuda.jobs (kind, queue, group_key) \
         SELECT 'noop', 'fair', 'g' || (i % 1000) FROM generate_series(1, {TAGGED}) i"
    ))
    .await
    .expect("enqueue");
    let tagged: i64 = conn
        .query_one(
            &format!("{OWN} SELECT count(*) FROM remuda.jobs WHERE fair_tag IS NOT NULL"),
            &[],
        )
        .await
        .expect("tagged")
        .get(0);
    assert_eq!(tagged, TAGGED, "every job tagged");
    let examined = plans(&admin, &conn, dbname).await.examined / TAGGED as f64;
    eprintln!("rows read by plan nodes per job tagged: {examined:.1}");
    assert!(
        examined < 100.0,
        "rows read by plan nodes {examined:.1} per job: the tagging grows with jobs × groups"
    );
}

/// A new database `dbname` in `cluster` with remuda's schema; its address.
async fn migrated_database(
    cluster: &PrivateCluster,
    admin: &remuda::db::Conn,
    dbname: &str,
) -> String {
    admin
        .batch_execute(&format!("{OWN} CREATE DATABASE {dbname}"))
        .await
        .expect("create database");
    let url = cluster
        .conninfo()
        .replace("dbname='remuda'", &format!("dbname='{dbname}'"));
    assert!(url.contains(dbname), "no database name to replace in {url}");
    let pool = remuda::Database::new(&url, 2).expect("pool");
    remuda::migrate::run(&pool).await.expect("migrate");
    url
}

/// Drains `JOBS` jobs in a new database `dbname` with its statistics in state `statistics`,
/// and returns what the server counted.
async fn drain(
    cluster: &PrivateCluster,
    admin: &remuda::db::Conn,
    dbname: &str,
    statistics: Statistics,
) -> Work {
    let url = migrated_database(cluster, admin, dbname).await;
    let setup = Client::connect(&url).await.expect("client");
    let conn = setup.database().conn().await.expect("connection");
    let enqueue = format!(
        "{OWN} INSERT INTO remuda.jobs (kind, args) SELECT 'noop', jsonb_build_object('i', i) \
         FROM generate_series(1, {JOBS}) i"
    );
    match statistics {
        Statistics::None => conn.batch_execute(&enqueue).await.expect("enqueue"),
        Statistics::Fresh => conn
            .batch_execute(&format!("{enqueue}; {OWN} ANALYZE remuda.jobs"))
            .await
            .expect("enqueue and analyze"),
        Statistics::PlannedEmpty => conn
            .batch_execute(&format!("{OWN} ANALYZE remuda.jobs"))
            .await
            .expect("analyze empty"),
        Statistics::BehindOtherKinds => conn
            .batch_execute(&format!(
                "{OWN} INSERT INTO remuda.jobs (kind, args) SELECT 'elsewhere', '{{}}' \
                 FROM generate_series(1, {OTHER_KINDS}); {enqueue}; {OWN} ANALYZE remuda.jobs"
            ))
            .await
            .expect("enqueue behind other kinds and analyze"),
    }
    // from here every plan of this database's new sessions is logged, and counted
    admin
        .batch_execute(&format!(
            "{OWN} ALTER DATABASE {dbname} SET auto_explain.log_min_duration = 0; \
             {OWN} SELECT pg_stat_statements_reset()"
        ))
        .await
        .expect("log plans");
    let client = Client::connect(&url).await.expect("worker client");
    let worker = Worker::new(client.clone())
        .config(WorkerConfig {
            concurrency: 2000,
            claim_batch: 2000,
            ..WorkerConfig::default()
        })
        .register(Noop);
    let stats = worker.stats();
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    let running = tokio::spawn(worker.run(async move { token.cancelled().await }));
    let mut expected = JOBS as u64;
    if let Statistics::PlannedEmpty = statistics {
        // not awaited: a job someone waits for is written by the general lane, and the lean
        // completion would not be planned
        client
            .enqueue::<Noop>(&serde_json::json!({"first": true}))
            .await
            .expect("first job");
        written(&stats, 1).await;
        conn.batch_execute(&enqueue).await.expect("enqueue");
        expected += 1;
    }
    written(&stats, expected).await;
    stop.cancel();
    running.await.expect("worker task").expect("worker stopped");
    let counted = counted(admin, dbname).await;
    let plans = plans(admin, &conn, dbname).await;
    Work {
        statements: counted.0 / JOBS as f64,
        rows: counted.1 / JOBS as f64,
        buffers: counted.2 / JOBS as f64,
        examined: plans.examined / JOBS as f64,
        array_searches: plans.searches,
        claims: plans.claims,
        lean_writes: plans.lean_writes,
    }
}

/// Waits until the worker has written `expected` outcomes.
async fn written(stats: &remuda::WorkerStats, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while stats.written.load(Ordering::Relaxed) < expected {
        assert!(
            Instant::now() < deadline,
            "written {} of {expected}",
            stats.written.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Statements, rows and shared buffers that `pg_stat_statements` counted in `dbname`, but
/// for the test's own.
async fn counted(admin: &remuda::db::Conn, dbname: &str) -> (f64, f64, f64) {
    let row = admin
        .query_one(
            &format!(
                "{OWN} SELECT coalesce(sum(s.calls), 0)::float8, coalesce(sum(s.rows), 0)::float8, \
                 coalesce(sum(s.shared_blks_hit + s.shared_blks_read), 0)::float8 \
                 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
                 WHERE d.datname = $1 AND s.query NOT LIKE '%work budget test%'"
            ),
            &[&dbname],
        )
        .await
        .expect("pg_stat_statements");
    (row.get(0), row.get(1), row.get(2))
}

/// What the plans `auto_explain` logged in one database show.
#[derive(Default)]
struct Plans {
    /// Rows their nodes read, in all.
    examined: f64,
    /// Nodes that search an array parameter once per row.
    searches: Vec<String>,
    /// Plans of claims, and of lean completions.
    claims: usize,
    lean_writes: usize,
}

/// The plans `auto_explain` logged in `dbname` (see [`Plans`]). A marker statement, logged
/// last, says when the collector has written everything before it.
async fn plans(admin: &remuda::db::Conn, conn: &remuda::db::Conn, dbname: &str) -> Plans {
    // a session of the database opened before its plans were logged, told to log them
    let marker = format!("work budget marker {dbname}");
    conn.batch_execute(&format!(
        "SET auto_explain.log_min_duration = 0; SELECT '{marker}'"
    ))
    .await
    .expect("marker");
    let deadline = Instant::now() + Duration::from_secs(30);
    let log = loop {
        let row = admin
            .query_one(
                &format!("{OWN} SELECT pg_read_file(pg_current_logfile('jsonlog'))"),
                &[],
            )
            .await
            .expect("read the server log");
        let log: String = row
            .try_get::<_, Option<String>>(0)
            .expect("the log's text")
            .unwrap_or_default();
        if log.contains(&marker) {
            break log;
        }
        assert!(Instant::now() < deadline, "the plans were never logged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut found = Plans::default();
    for line in log.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if record["dbname"] != dbname {
            continue;
        }
        let Some(message) = record["message"].as_str() else {
            continue;
        };
        let Some((_, plan)) = message.split_once("plan:\n") else {
            continue;
        };
        let plan: Value = serde_json::from_str(plan).expect("a plan in JSON");
        let text = plan["Query Text"].as_str().unwrap_or_default();
        if text.contains("work budget") {
            continue;
        }
        found.claims += usize::from(text.contains("-- Claim up to"));
        found.lean_writes += usize::from(text.contains("-- Write many successful outcomes"));
        let (examined, searches) = (&mut found.examined, &mut found.searches);
        walk(&plan["Plan"], &mut |node| {
            let loops = node["Actual Loops"].as_f64().unwrap_or(0.0);
            let read: f64 = [
                "Actual Rows",
                "Rows Removed by Filter",
                "Rows Removed by Join Filter",
                "Rows Removed by Index Recheck",
            ]
            .iter()
            .map(|k| node[*k].as_f64().unwrap_or(0.0))
            .sum();
            *examined += loops * read;
            if loops > 1.0 {
                for key in [
                    "Filter",
                    "Join Filter",
                    "TID Cond",
                    "Index Cond",
                    "Recheck Cond",
                ] {
                    if let Some(cond) = node[key].as_str().filter(|c| c.contains("ANY ($")) {
                        let first = text.lines().find(|l| !l.starts_with("--")).unwrap_or("");
                        let found = format!("{key} {cond} (in {first:?})");
                        if !searches.contains(&found) {
                            searches.push(found);
                        }
                    }
                }
            }
        });
    }
    found
}

/// Calls `visit` on `node` and every node below it.
fn walk(node: &Value, visit: &mut impl FnMut(&Value)) {
    visit(node);
    if let Some(children) = node["Plans"].as_array() {
        for child in children {
            walk(child, visit);
        }
    }
}
