//! Fault injection with real `remuda worker` processes: SIGKILL at random moments, a job that
//! kills every worker that runs it (crash-loop quarantine), bad input through every door, and
//! a soak that mixes kills with a database crash. (Partitions and database crashes under
//! library workers are in the library's `tests/faults.rs`.)
//!
//! The soak runs for `REMUDA_SOAK_SECS` seconds (default 12, the CI variant); for the long
//! variant: `REMUDA_SOAK_SECS=1200 cargo nextest run -p remuda-cli --test faults soak`.

mod common;

use common::{code, json, migrated, remuda, stderr, TempDir, WorkerProcess};
use remuda::testing::PrivateCluster;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Connects to the database behind a connection string, for checks the CLI does not show.
async fn sql(conninfo: &str) -> remuda::Client {
    remuda::Client::connect(conninfo).await.expect("client")
}

async fn scalar(
    client: &remuda::Client,
    query: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> i64 {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(query, params)
        .await
        .expect("query")
        .get(0)
}

/// Jobs the (dead) worker process `pid` still held: the most that its death can make run twice.
async fn held_by(client: &remuda::Client, pid: i32) -> i64 {
    scalar(
        client,
        "SELECT count(*) FROM remuda.jobs j JOIN remuda.workers w ON j.worker_id = w.id
         WHERE w.pid = $1 AND j.state = 'running'",
        &[&pid],
    )
    .await
}

async fn count_in(client: &remuda::Client, states: &[&str]) -> i64 {
    let states: Vec<String> = states.iter().map(|s| s.to_string()).collect();
    scalar(
        client,
        "SELECT count(*) FROM remuda.jobs WHERE state::text = ANY($1)",
        &[&states],
    )
    .await
}

/// Lines of an execution log (one per execution: "job_id attempt").
fn executions(log: &Path) -> Vec<(i64, i32)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect()
}

async fn enqueue_batch(conninfo: &str, kind: &str, n: usize) {
    let client = sql(conninfo).await;
    let jobs: Vec<remuda::NewJob> = (0..n)
        .map(|i| remuda::NewJob::new(kind, &serde_json::json!({ "i": i })).expect("job"))
        .collect();
    client.insert_bulk(&jobs).await.expect("enqueue");
}

/// A worker config recording each execution in `log`. Random kills are not the job's fault:
/// `crash_loop_limit` is set high where workers are killed at random (a job could be caught by
/// three kills in a row and be quarantined, rightly by the rule but not what those tests test).
fn worker_config(
    dir: &TempDir,
    log: &Path,
    rescue_after: &str,
    crash_loop_limit: u32,
    extra: &str,
) -> std::path::PathBuf {
    let log = log.to_str().expect("path");
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
concurrency = 8
poll_interval = "200ms"
heartbeat_interval = "250ms"
rescue_after = "{rescue_after}"
maintenance_interval = "250ms"
promote_interval = "100ms"
shutdown_timeout = "3s"
crash_loop_limit = {crash_loop_limit}

[tasks.record]
command = ["sh", "-c", "cat >/dev/null; echo $REMUDA_JOB_ID $REMUDA_JOB_ATTEMPT >> {log}; sleep 0.02"]
max_attempts = 20
backoff = {{ kind = "fixed", delay = "100ms" }}
{extra}
"#
        ),
    )
}

/// Fault 1: worker processes SIGKILLed at random moments while N jobs run, replacements
/// started each time. Every job ends completed, and the executions beyond one per job are no
/// more than the jobs the killed workers held when they died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_at_random_lose_no_job() {
    let db = migrated().await;
    let client = sql(db.conninfo()).await;
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let config = worker_config(&dir, &log, "1s", 1000, "");
    let n = 2000;
    enqueue_batch(db.conninfo(), "record", n).await;
    let mut workers: Vec<WorkerProcess> =
        (0..2).map(|_| WorkerProcess::start(&db, &config)).collect();
    let started = Instant::now();
    let mut kills = 0;
    let mut held_at_kills = 0;
    while count_in(&client, &["completed"]).await < n as i64 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the jobs did not all complete"
        );
        tokio::time::sleep(Duration::from_millis(300 + fastrand::u64(..700))).await;
        if kills < 6 {
            let victim = workers.remove(fastrand::usize(..workers.len()));
            let pid = victim.pid();
            victim.kill().await;
            kills += 1;
            held_at_kills += held_by(&client, pid).await;
            workers.push(WorkerProcess::start(&db, &config));
        }
    }
    for w in workers {
        assert!(w.stop().await.success());
    }
    assert!(
        kills >= 3,
        "the run was long enough to kill workers {kills} times"
    );
    let runs = executions(&log);
    let mut per_job: HashMap<i64, usize> = HashMap::new();
    for (id, _) in &runs {
        *per_job.entry(*id).or_default() += 1;
    }
    assert_eq!(per_job.len(), n, "every job ran");
    let extra = runs.len() as i64 - n as i64;
    eprintln!(
        "{n} jobs, {kills} kills, {} executions, {extra} extra, {held_at_kills} held at the kills",
        runs.len()
    );
    assert!(
        extra <= held_at_kills,
        "{extra} executions beyond one per job, but the killed workers held only {held_at_kills} jobs"
    );
    assert_eq!(count_in(&client, &["completed"]).await, n as i64);
}

/// Fault 5: a job that kills the worker process running it is handed to another worker only
/// `crash_loop_limit` times, then failed with CRASH_LOOP, its history showing each loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_kills_its_workers_is_quarantined() {
    let db = migrated().await;
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    // the crashing task is served on its own queue; a calm worker on another queue is the
    // maintenance leader that rescues after each crash
    let crashing = worker_config(
        &dir,
        &log,
        "1s",
        3,
        r#"
[tasks.crash]
queue = "crashy"
command = ["sh", "-c", "kill -KILL $REMUDA_WORKER_PID"]
max_attempts = 10
"#,
    );
    let calm_dir = TempDir::new();
    let calm = calm_dir.write(
        "calm.toml",
        r#"
[worker]
heartbeat_interval = "250ms"
rescue_after = "1s"
maintenance_interval = "250ms"

[tasks.idle]
builtin = "noop"
queue = "calm"
"#,
    );
    let leader = WorkerProcess::start(&db, &calm);
    let id = common::enqueue(&db, &["crash", "--queue", "crashy"]).await;
    let mut crashed = 0;
    loop {
        let mut worker = WorkerProcess::start(&db, &crashing);
        let status = tokio::time::timeout(Duration::from_secs(20), worker.child.wait())
            .await
            .expect("the job kills the worker")
            .expect("wait");
        assert!(!status.success());
        crashed += 1;
        // rescued (available again) or quarantined (failed)
        let job =
            common::wait_for_state(&db, id, &["available", "failed"], Duration::from_secs(20))
                .await;
        if job["state"] == "failed" {
            assert_eq!(job["result"]["err"]["code"], "CRASH_LOOP", "{job}");
            assert_eq!(job["attempt"], 3, "{job}");
            let codes: Vec<_> = job["errors"]
                .as_array()
                .expect("errors")
                .iter()
                .map(|e| e["code"].clone())
                .collect();
            assert_eq!(codes, ["WORKER_LOST"; 3], "{job}");
            break;
        }
        assert!(
            crashed < 3,
            "still handed out after {crashed} crashes: {job}"
        );
    }
    assert_eq!(crashed, 3);
    // an operator's retry starts the count again: one more crash is not a loop yet
    assert_eq!(code(&remuda(&db, &["retry", &id.to_string()]).await), 0);
    let mut worker = WorkerProcess::start(&db, &crashing);
    let _ = tokio::time::timeout(Duration::from_secs(20), worker.child.wait()).await;
    let job =
        common::wait_for_state(&db, id, &["available", "failed"], Duration::from_secs(20)).await;
    assert_eq!(job["state"], "available", "{job}");
    assert_eq!(job["attempt"], 4, "{job}");
    assert!(leader.stop().await.success());
}

/// A digest of everything in the job table.
async fn digest(client: &remuda::Client) -> String {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT coalesce(md5(string_agg(j::text, '|' ORDER BY j.id)), '') FROM remuda.jobs j",
            &[],
        )
        .await
        .expect("digest")
        .get(0)
}

/// Fault 7: bad input through every door of the CLI and its config file, each refused with
/// a clear error and exit 2, the database unchanged; names with quotes and SQL in them are
/// only ever data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_through_every_door_changes_nothing() {
    let db = migrated().await;
    let client = sql(db.conninfo()).await;
    // one job already there, so "unchanged" means more than "empty"
    let existing = common::enqueue(&db, &["k", "--args", r#"{"keep": true}"#]).await;
    let before = digest(&client).await;
    let dir = TempDir::new();
    // (over the 1 MiB payload limit, and too long for a command line: through a batch file)
    let big = dir.write(
        "big.jsonl",
        &format!("{{\"ok\": 1}}\n{{\"blob\": \"{}\"}}\n", "x".repeat(2 << 20)),
    );
    let batch = dir.write("batch.jsonl", "{\"ok\": 1}\n{\"broken\": \n");
    let configs = [
        ("unknown_key.toml", "[worker]\nconcurency = 4\n[tasks.a]\nbuiltin = \"noop\"\n", "unknown field"),
        ("bad_duration.toml", "[worker]\nrescue_after = \"soon\"\n[tasks.a]\nbuiltin = \"noop\"\n", "invalid duration"),
        ("negative.toml", "[worker]\nconcurrency = -4\n[tasks.a]\nbuiltin = \"noop\"\n", "concurrency"),
        ("heartbeat.toml", "[worker]\nheartbeat_interval = \"20s\"\nrescue_after = \"30s\"\n[tasks.a]\nbuiltin = \"noop\"\n", "at most half of rescue_after"),
        ("crash_loop.toml", "[worker]\ncrash_loop_limit = 0\n[tasks.a]\nbuiltin = \"noop\"\n", "crash_loop_limit"),
        ("not_toml.toml", "[worker\nname = 1", "worker config"),
        ("two_runners.toml", "[tasks.a]\nbuiltin = \"noop\"\nurl = \"http://x\"\n", "exactly one"),
        ("unknown_builtin.toml", "[tasks.a]\nbuiltin = \"rm -rf\"\n", "builtin"),
    ];
    let config_paths: Vec<(String, &str)> = configs
        .iter()
        .map(|(name, text, msg)| {
            (
                dir.write(name, text).to_str().expect("path").to_string(),
                *msg,
            )
        })
        .collect();
    let mut cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "enqueue".into(),
                "k".into(),
                "--args".into(),
                "[1, 2".into(),
            ],
            "not valid JSON",
        ),
        (
            vec![
                "enqueue-batch".into(),
                "k".into(),
                "--file".into(),
                big.to_str().expect("path").into(),
            ],
            "limit",
        ),
        (
            vec![
                "enqueue".into(),
                "k".into(),
                "--priority".into(),
                "99999999999".into(),
            ],
            "invalid value",
        ),
        (
            vec![
                "enqueue".into(),
                "k".into(),
                "--max-attempts".into(),
                "-3".into(),
            ],
            "at least 1",
        ),
        (
            vec![
                "enqueue".into(),
                "k".into(),
                "--deadline-in".into(),
                "-5s".into(),
            ],
            "invalid duration",
        ),
        (
            vec!["enqueue".into(), "k".into(), "--delay".into(), "-1h".into()],
            "invalid duration",
        ),
        (
            vec![
                "enqueue".into(),
                "k".into(),
                "--deadline".into(),
                "yesterday".into(),
            ],
            "invalid time",
        ),
        (vec!["enqueue".into(), "".into()], "kind"),
        (
            vec!["enqueue".into(), "k".into(), "--queue".into(), " ".into()],
            "queue",
        ),
        (
            vec![
                "enqueue-batch".into(),
                "k".into(),
                "--file".into(),
                batch.to_str().expect("path").into(),
            ],
            "line 2",
        ),
        (
            vec!["retry".into(), "--state".into(), "bogus".into()],
            "unknown job state",
        ),
        (
            vec!["retry".into(), "--state".into(), "completed".into()],
            "only failed",
        ),
        (
            vec!["retry".into(), "--queue".into(), "q".into()],
            "required",
        ),
        (vec!["cancel".into(), "-1".into()], "no job with id -1"),
        (
            vec![
                "jobs".into(),
                "--state".into(),
                "'; DROP TABLE remuda.jobs; --".into(),
            ],
            "unknown job state",
        ),
    ];
    let good = dir.write("good.toml", "[tasks.a]\nbuiltin = \"noop\"\n");
    let good = good.to_str().expect("path").to_string();
    for (flag, value, message) in [
        ("--concurrency", "0", "between 1 and"),
        ("--concurrency", "-2", "invalid value"),
        ("--crash-loop-limit", "0", "crash_loop_limit"),
        ("--rescue-after", "1s", "at most half of rescue_after"),
        ("--heartbeat-interval", "forever", "invalid duration"),
    ] {
        cases.push((
            vec![
                "worker".into(),
                "--config".into(),
                good.clone(),
                flag.into(),
                value.into(),
            ],
            message,
        ));
    }
    for (path, msg) in &config_paths {
        cases.push((vec!["worker".into(), "--config".into(), path.clone()], msg));
    }
    for (args, message) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = remuda(&db, &args).await;
        let shown: Vec<String> = args.iter().map(|a| a.chars().take(40).collect()).collect();
        assert_eq!(code(&output), 2, "{shown:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(message),
            "{shown:?} should say {message:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            digest(&client).await,
            before,
            "{shown:?} changed the database"
        );
    }
    // quotes and SQL in names are data, stored and shown verbatim
    let nasty = r#"q'; DROP TABLE remuda.jobs; --"#;
    let kind = r#"k"\'); DELETE FROM remuda.jobs; --"#;
    let id = common::enqueue(
        &db,
        &[kind, "--queue", nasty, "--args", r#"{"s": "'\"; --"}"#],
    )
    .await;
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["kind"], kind);
    assert_eq!(job["queue"], nasty);
    assert_eq!(job["args"]["s"], "'\"; --");
    assert_eq!(
        count_in(&client, &["available"]).await,
        2,
        "both jobs still there"
    );
    assert!(client.job(existing).await.expect("lookup").is_some());
}

/// Results that are not UTF-8 text, and outputs over the limit, fail their job with a clear
/// code (from a command's stdout and from an HTTP answer alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_outputs_that_cannot_be_results_fail_clearly() {
    let db = migrated().await;
    // an HTTP endpoint that answers 200 with bytes that are not UTF-8
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4\r\nconnection: close\r\n\r\n\"\xff\xfe\"")
                    .await;
            });
        }
    });
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
max_payload_bytes = 1000
poll_interval = "100ms"

[tasks.binary]
command = ["sh", "-c", "cat >/dev/null; printf '\\377\\376'"]
max_attempts = 3

[tasks.huge]
command = ["sh", "-c", "cat >/dev/null; head -c 5000 /dev/zero | tr '\\0' x"]
max_attempts = 3

[tasks.web]
url = "http://127.0.0.1:{port}/"
max_attempts = 3
"#
        ),
    );
    let worker = WorkerProcess::start(&db, &config);
    for (kind, code) in [
        ("binary", "RESULT_NOT_UTF8"),
        ("huge", "RESULT_TOO_LARGE"),
        ("web", "RESULT_NOT_UTF8"),
    ] {
        let id = common::enqueue(&db, &[kind]).await;
        let job = common::wait_for_state(&db, id, &["failed"], Duration::from_secs(20)).await;
        assert_eq!(job["result"]["err"]["code"], code, "{job}");
        assert_eq!(job["attempt"], 1, "not retried: {job}");
        let message = job["result"]["err"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains("UTF-8") || message.contains("limit"),
            "{message}"
        );
    }
    assert!(worker.stop().await.success());
}

/// A restart of the database that outlasts `rescue_after` runs no job twice that a live worker
/// finished meanwhile: the rescuer counts silence from the server's start, so a worker that
/// cannot heartbeat because the server was down is not declared dead the moment it returns.
/// Forced: worker A is stopped (SIGSTOP) across the restart while worker B, which runs none
/// of A's jobs, leads the maintenance for longer than a round, so B's rescuer looks before A
/// can heartbeat (A then has the rest of its 5 s from the restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_past_rescue_after_runs_no_finished_job_again() {
    let cluster = PrivateCluster::start().await.expect("private cluster");
    let conninfo = cluster.conninfo();
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let config_a = common::recording_config(&dir, &log, "1", 4, "100ms", "5s");
    let other = TempDir::new();
    let config_b = other.write(
        "remuda.toml",
        r#"
[worker]
heartbeat_interval = "250ms"
rescue_after = "5s"
maintenance_interval = "250ms"

[tasks.other]
command = ["true"]
"#,
    );
    let a = WorkerProcess::start_at(&conninfo, &config_a, None);
    let b = WorkerProcess::start_at(&conninfo, &config_b, None);
    let client = sql(&conninfo).await;
    let jobs: Vec<remuda::NewJob> = (0..4)
        .map(|i| remuda::NewJob::new("record", &serde_json::json!({ "i": i })).expect("job"))
        .collect();
    client.insert_many(&jobs).await.expect("enqueue");
    common::until(
        "the four jobs to start",
        Duration::from_secs(20),
        async || common::executions_per_job(&log).len() == 4,
    )
    .await;
    cluster.crash().await.expect("crash the database");
    // the jobs end (1 s) and their outcomes wait; the server stays away past rescue_after
    tokio::time::sleep(Duration::from_secs(6)).await;
    a.signal(nix::sys::signal::Signal::SIGSTOP);
    cluster.restart().await.expect("restart the database");
    assert_eq!(
        count_in(&client, &["completed"]).await,
        0,
        "the jobs ended before the crash: nothing tested"
    );
    // B elects itself (A's lease lapsed while the server was down) and its rescuer runs rounds
    common::until("B to lead", Duration::from_secs(10), async || {
        scalar(
            &client,
            "SELECT count(*) FROM remuda.leader l JOIN remuda.workers w ON w.id = l.leader_id
             WHERE l.expires_at > now() AND w.pid = $1",
            &[&b.pid()],
        )
        .await
            == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    a.signal(nix::sys::signal::Signal::SIGCONT);
    common::until(
        "the four jobs to complete",
        Duration::from_secs(30),
        async || count_in(&client, &["completed"]).await == 4,
    )
    .await;
    let per_job = common::executions_per_job(&log);
    assert!(per_job.values().all(|&n| n == 1), "ran again: {per_job:?}");
    let rescued = scalar(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE attempt > 1 OR errors <> '[]'",
        &[],
    )
    .await;
    assert_eq!(
        rescued, 0,
        "jobs rescued from a worker that was only waiting for the server"
    );
    assert!(a.stop().await.success());
    assert!(b.stop().await.success());
}

/// A worker started on `cluster` whose registration waits on a lock the test holds on the
/// workers table, until the server crashes under it (the crash ends the lock too).
async fn crashed_while_registering(
    cluster: &PrivateCluster,
    config: &Path,
    client: &remuda::Client,
) -> WorkerProcess {
    let conninfo = cluster.conninfo();
    let (locker, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    locker
        .batch_execute("BEGIN; LOCK TABLE remuda.workers IN EXCLUSIVE MODE")
        .await
        .expect("lock the workers");
    let worker = WorkerProcess::start_at(&conninfo, config, None);
    common::until(
        "the registration to wait",
        Duration::from_secs(20),
        async || {
            scalar(
                client,
                "SELECT count(*) FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND query ILIKE '%remuda.workers%'",
                &[],
            )
            .await
                == 1
        },
    )
    .await;
    cluster.crash().await.expect("crash the database");
    drop(locker);
    worker
}

/// A worker whose start-up loses the database (a restart begins while it registers) waits for
/// the server and runs jobs when it is back, instead of exiting. Forced: the test holds the
/// workers table locked until the worker's registration waits on it, then crashes the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_starting_as_the_database_restarts_waits_for_it() {
    let cluster = PrivateCluster::start().await.expect("private cluster");
    let conninfo = cluster.conninfo();
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let config = common::recording_config(&dir, &log, "0", 2, "100ms", "3s");
    let client = sql(&conninfo).await;
    let mut worker = crashed_while_registering(&cluster, &config, &client).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.restart().await.expect("restart the database");
    let job = remuda::NewJob::new("record", &serde_json::json!({})).expect("job");
    client.insert_many(&[job]).await.expect("enqueue");
    common::until("the job to complete", Duration::from_secs(30), async || {
        let exited = worker.child.try_wait().expect("worker status");
        assert!(exited.is_none(), "the worker exited: {exited:?}");
        count_in(&client, &["completed"]).await == 1
    })
    .await;
    assert!(worker.stop().await.success());
}

/// Fault 8: the soak. Mixed jobs (quick, slow, failing once) are fed for the whole run while
/// worker processes are SIGKILLed at random and the database crashes once. At the end every
/// job is completed: lost and stuck must be 0; duplicates (executions beyond what the
/// outcomes account for) are bounded by the jobs the killed workers held, and those of any
/// worker that fenced itself because the database stayed away past its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak() {
    let secs: u64 = std::env::var("REMUDA_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let cluster = PrivateCluster::start().await.expect("private cluster");
    let conninfo = cluster.conninfo();
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let stderr_log = dir.path().join("workers.log");
    let config = worker_config(
        &dir,
        &log,
        "10s",
        1000,
        &format!(
            r#"
[tasks.slow]
command = ["sh", "-c", "cat >/dev/null; echo $REMUDA_JOB_ID $REMUDA_JOB_ATTEMPT >> {log}; sleep 0.5"]
max_attempts = 20

[tasks.flaky]
command = ["sh", "-c", "cat >/dev/null; echo $REMUDA_JOB_ID $REMUDA_JOB_ATTEMPT >> {log}; [ $REMUDA_JOB_ATTEMPT -ge 2 ] || exit 3"]
max_attempts = 20
backoff = {{ kind = "fixed", delay = "200ms" }}
"#,
            log = log.to_str().expect("path")
        ),
    );
    let start_worker = || WorkerProcess::start_at(&conninfo, &config, Some(&stderr_log));
    let mut workers: Vec<WorkerProcess> = (0..3).map(|_| start_worker()).collect();
    let client = sql(&conninfo).await;
    let started = Instant::now();
    let run_for = Duration::from_secs(secs);
    let crash_at = run_for / 2;
    let mut crashed = false;
    let mut outage = Duration::ZERO;
    let (mut kills, mut held_at_kills) = (0, 0i64);
    let mut next_kill = Instant::now() + Duration::from_millis(1000 + fastrand::u64(..2000));
    while started.elapsed() < run_for {
        // feed, keeping a backlog of at most 1 000 (the workers run a few hundred `sh` a
        // second; an endless backlog would only measure that). A failure while the database
        // is down is fine: those jobs were not enqueued.
        let backlog = tokio::time::timeout(Duration::from_secs(2), async {
            let conn = client.database().conn().await.ok()?;
            let row = conn
                .query_one(
                    "SELECT count(*) FROM remuda.jobs WHERE state IN ('available', 'scheduled')",
                    &[],
                )
                .await
                .ok()?;
            row.try_get::<_, i64>(0).ok()
        })
        .await
        .ok()
        .flatten()
        .unwrap_or(i64::MAX);
        let jobs: Vec<remuda::NewJob> = (0..60)
            .map(|i| {
                let kind = match i % 20 {
                    0 => "slow",
                    1 | 2 => "flaky",
                    _ => "record",
                };
                remuda::NewJob::new(kind, &serde_json::json!({ "i": i })).expect("job")
            })
            .collect();
        if backlog < 1000 {
            let _ = tokio::time::timeout(Duration::from_secs(2), client.insert_many(&jobs)).await;
        }
        if !crashed && started.elapsed() >= crash_at {
            crashed = true;
            let down = Instant::now();
            cluster.crash().await.expect("crash the database");
            tokio::time::sleep(Duration::from_secs(5)).await;
            cluster.restart().await.expect("restart the database");
            outage = down.elapsed();
        }
        if Instant::now() >= next_kill {
            let victim = workers.remove(fastrand::usize(..workers.len()));
            let pid = victim.pid();
            victim.kill().await;
            kills += 1;
            held_at_kills += held_by(&client, pid).await;
            let replacement = start_worker();
            // registered before the run goes on, so the crash never meets a start-up's
            // first contact, which fails at once (see the start-up test above)
            let pid = replacement.pid();
            common::until(
                "the replacement to register",
                Duration::from_secs(30),
                async || {
                    scalar(
                        &client,
                        "SELECT count(*) FROM remuda.workers WHERE pid = $1",
                        &[&pid],
                    )
                    .await
                        > 0
                },
            )
            .await;
            workers.push(replacement);
            next_kill = Instant::now() + Duration::from_millis(1000 + fastrand::u64(..3000));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // drain: everything must end completed
    let drain_started = Instant::now();
    while count_in(&client, &["available", "running", "scheduled"]).await > 0
        && drain_started.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for w in workers {
        let status = w.stop().await;
        assert!(
            status.success(),
            "a worker stopped with {status}: {}",
            std::fs::read_to_string(&stderr_log).unwrap_or_default()
        );
    }
    let jobs = count_in(
        &client,
        &[
            "available",
            "running",
            "scheduled",
            "completed",
            "failed",
            "cancelled",
            "expired",
        ],
    )
    .await;
    let completed = count_in(&client, &["completed"]).await;
    let stuck = count_in(&client, &["available", "running", "scheduled"]).await;
    let lost = jobs - completed;
    // executions the outcomes account for: one per task error recorded, plus the success
    let accounted = scalar(
        &client,
        "SELECT coalesce(sum((state = 'completed')::int
                             + (SELECT count(*) FROM jsonb_array_elements(errors) e
                                WHERE e->>'code' <> 'WORKER_LOST')), 0)::bigint
         FROM remuda.jobs",
        &[],
    )
    .await;
    let runs = executions(&log).len() as i64;
    let duplicates = runs - accounted;
    let workers_log = std::fs::read_to_string(&stderr_log).unwrap_or_default();
    let rejected: i64 = workers_log
        .lines()
        .filter_map(|l| {
            let (before, _) = l.split_once(" outcomes rejected as stale")?;
            let (count, _) = before.rsplit_once(" of ")?;
            count.rsplit(' ').next()?.parse::<i64>().ok()
        })
        .sum();
    let held_at_fences = stopped_by_fences(&workers_log);
    println!(
        "soak {secs} s: jobs {jobs}, executions {runs}, duplicates {duplicates}, lost {lost}, stuck {stuck}, rejected stale writes {rejected}, worker kills {kills} (holding {held_at_kills} jobs), database crashes 1 (down {outage:?}; workers fenced holding {held_at_fences} jobs)"
    );
    if lost > 0 {
        let conn = client.database().conn().await.expect("conn");
        for row in conn
            .query(
                "SELECT id, kind, state::text, attempt, result::text, errors::text FROM remuda.jobs
                 WHERE state <> 'completed' LIMIT 20",
                &[],
            )
            .await
            .expect("lost jobs")
        {
            eprintln!(
                "not completed: job {} {} {} attempt {} result {:?} errors {:?}",
                row.get::<_, i64>(0),
                row.get::<_, String>(1),
                row.get::<_, String>(2),
                row.get::<_, i32>(3),
                row.get::<_, Option<String>>(4),
                row.get::<_, String>(5)
            );
        }
    }
    assert!(jobs > 0);
    assert_eq!(lost, 0, "lost jobs");
    assert_eq!(stuck, 0, "stuck jobs");
    assert!(
        duplicates <= held_at_kills + held_at_fences,
        "{duplicates} duplicate executions, more than the {held_at_kills} jobs the killed workers held and the {held_at_fences} the fenced ones stopped"
    );
}

/// Jobs that workers stopped on fencing themselves, as their log says: a worker whose
/// heartbeats found no database for longer than `rescue_after` less an interval (a restart
/// slowed by a loaded machine) stops its jobs before anyone may rescue them, and those run
/// again. Like a killed worker's, each may have run once already.
fn stopped_by_fences(workers_log: &str) -> i64 {
    workers_log
        .lines()
        .filter_map(|l| {
            let (_, after) = l
                .split_once("; stopping its ")
                .or_else(|| l.split_once("; aborting its "))?;
            after.split(' ').next()?.parse::<i64>().ok()
        })
        .sum()
}
