//! What a new user meets on the command line, without a worker: data passed through exactly,
//! clear refusals, honest reports, scripts' contracts (exit codes, JSON errors, closed pipes).

mod common;

use common::*;
use std::process::Stdio;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_in_args_are_stored_exactly_never_rounded() {
    let db = migrated().await;
    let args = r#"{"a":123456789012345678901234567890,"b":18446744073709551617,"c":1.50,"e":-0,"f":1e400}"#;
    let id = enqueue(&db, &["exact", "--args", args]).await;
    let shown = stdout(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    for digits in [
        "123456789012345678901234567890",
        "18446744073709551617",
        "1.50",
    ] {
        assert!(shown.contains(digits), "{digits} lost in {shown}");
    }
    assert!(!shown.contains("e+29"), "rounded through a float: {shown}");
    // what PostgreSQL's jsonb itself stores for the same text
    let stored = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT (args = $1::text::jsonb) AS same FROM remuda.jobs WHERE id = $2",
            &[&args, &id],
        )
        .await
        .expect("compare");
    assert!(
        stored.get::<_, bool>("same"),
        "args differ from jsonb's own reading"
    );

    let dir = TempDir::new();
    let file = dir.write("jobs.jsonl", "{\"n\": 98765432109876543210987654321}\n");
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "exact",
            "--file",
            file.to_str().expect("path"),
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let batch_id = json(&output)["ids"][0].as_i64().expect("id");
    let shown = stdout(&remuda(&db, &["job", &batch_id.to_string(), "--json"]).await);
    assert!(shown.contains("98765432109876543210987654321"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_in_its_own_database_and_leaves_the_users_jobs_alone() {
    let db = migrated().await;
    let id = enqueue(&db, &["report", "--queue", "demo"]).await;
    let output = remuda(
        &db,
        &[
            "demo",
            "--jobs",
            "300",
            "--workers",
            "1",
            "--concurrency",
            "50",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(
        job["state"], "available",
        "the user's job is untouched: {job}"
    );
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    assert_eq!(
        queues.as_array().map(Vec::len),
        Some(1),
        "no demo jobs here: {queues}"
    );
}

/// `remuda enqueue ARGS… --json`, its report.
async fn enqueue_report(db: &TestDatabase, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["enqueue"];
    all.extend_from_slice(args);
    all.push("--json");
    json(&remuda(db, &all).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_keys_are_scoped_by_kind_and_optionally_by_queue() {
    let db = migrated().await;
    let ping = enqueue(&db, &["ping", "--unique-key", "k1"]).await;
    let other = enqueue_report(&db, &["other", "--unique-key", "k1"]).await;
    assert_eq!(
        other["duplicate"], false,
        "another kind may hold the same key: {other}"
    );
    assert_ne!(other["id"].as_i64(), Some(ping));
    let again = enqueue_report(&db, &["ping", "--unique-key", "k1"]).await;
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["id"].as_i64(), Some(ping));
    // per queue: the same kind may hold the key once in each queue
    let per_queue = ["sync", "--unique-key", "q", "--unique-per-queue", "--queue"];
    let in_queue = |queue: &'static str| {
        let mut args = per_queue.to_vec();
        args.push(queue);
        let db = &db;
        async move { enqueue_report(db, &args).await }
    };
    let a = in_queue("a").await;
    let b = in_queue("b").await;
    let a2 = in_queue("a").await;
    assert_eq!(
        (a["duplicate"].clone(), b["duplicate"].clone()),
        (false.into(), false.into())
    );
    assert_eq!(a2["duplicate"], true);
    assert_eq!(a2["id"], a["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_states_and_period_from_the_command_line() {
    let db = migrated().await;
    let nightly = [
        "nightly",
        "--unique-key",
        "n",
        "--unique-states",
        "scheduled,available,running,cancelled",
    ];
    let first = enqueue_report(&db, &nightly).await;
    let id = first["id"].as_i64().expect("id").to_string();
    assert_eq!(code(&remuda(&db, &["cancel", &id]).await), 0);
    let second = enqueue_report(&db, &nightly).await;
    assert_eq!(
        second["duplicate"], true,
        "a cancelled job still holds its key: {second}"
    );
    // without cancelled among its states, the default, a new job is made
    let hourly = ["hourly", "--unique-key", "h"];
    let plain = enqueue_report(&db, &hourly).await;
    assert_eq!(
        code(&remuda(&db, &["cancel", &plain["id"].to_string()]).await),
        0
    );
    let fresh = enqueue_report(&db, &hourly).await;
    assert_eq!(fresh["duplicate"], false);
    // a period: one per clock hour
    let tick = ["tick", "--unique-key", "t", "--unique-period", "1h"];
    let p1 = enqueue_report(&db, &tick).await;
    let p2 = enqueue_report(&db, &tick).await;
    assert_eq!(p2["duplicate"], true);
    assert_eq!(p1["id"], p2["id"]);
    let bad = remuda(
        &db,
        &[
            "enqueue",
            "tick",
            "--unique-key",
            "t",
            "--unique-states",
            "completed",
        ],
    )
    .await;
    assert_eq!(code(&bad), 2, "{}", stderr(&bad));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_batch_reports_duplicates_and_ids_in_line_order() {
    let db = migrated().await;
    let dir = TempDir::new();
    let file = dir.write("jobs.jsonl", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
    let path = file.to_str().expect("path");
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "one",
            "--file",
            path,
            "--unique-key",
            "only",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).contains("enqueued 1 job ") && stdout(&output).contains("2 duplicates"),
        "{}",
        stdout(&output)
    );
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "one",
            "--file",
            path,
            "--unique-key",
            "only",
            "--json",
        ],
    )
    .await;
    let report = json(&output);
    assert_eq!(report["inserted"], 0);
    assert_eq!(report["duplicates"], 3);
    let ids = report["ids"].as_array().expect("ids");
    assert_eq!(ids.len(), 3);
    assert!(
        ids.iter().all(|i| i == &ids[0]),
        "every line names the existing job: {report}"
    );
    let output = remuda(&db, &["enqueue-batch", "two", "--file", path, "--json"]).await;
    let report = json(&output);
    let ids: Vec<i64> = report["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(|i| i.as_i64())
        .collect();
    assert_eq!(ids.len(), 3);
    for (line, id) in ids.iter().enumerate() {
        let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
        assert_eq!(job["args"]["a"], line + 1, "ids follow the lines");
    }
    let nul = dir.write("nul.jsonl", "{\"a\":1}\n\n{\"a\":\"\\u0000\"}\n");
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "three",
            "--file",
            nul.to_str().expect("path"),
        ],
    )
    .await;
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("line 3"), "{}", stderr(&output));
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    assert_eq!(
        queues[0]["available"], 4,
        "nothing written from the bad file: {queues}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_could_never_run_are_refused() {
    let db = migrated().await;
    for args in [
        &["late", "--delay", "3s", "--deadline-in", "1s"][..],
        &["late", "--deadline", "2020-01-01T00:00:00Z"][..],
        &[
            "late",
            "--run-at",
            "2030-01-01T00:00:00Z",
            "--deadline",
            "2029-01-01T00:00:00Z",
        ][..],
        &["bad\tname"][..],
        &["ok", "--queue", "line\nbreak"][..],
    ] {
        let mut all = vec!["enqueue"];
        all.extend_from_slice(args);
        let output = remuda(&db, &all).await;
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
    }
    let output = remuda(
        &db,
        &["enqueue", "late", "--delay", "3s", "--deadline-in", "1s"],
    )
    .await;
    assert!(
        stderr(&output).contains("would expire"),
        "{}",
        stderr(&output)
    );
    let long = "q".repeat(201);
    let output = remuda(&db, &["enqueue", "x", "--queue", &long]).await;
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("over the limit of 200"),
        "{}",
        stderr(&output)
    );
    let output = remuda(&db, &["enqueue", "bad\tname"]).await;
    assert!(
        stderr(&output).contains("control character"),
        "{}",
        stderr(&output)
    );
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    assert_eq!(queues, serde_json::json!([]), "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn args_come_from_a_file_or_stdin_within_a_limit_the_user_sets() {
    let db = migrated().await;
    let dir = TempDir::new();
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2000));
    let file = dir.write("args.json", &big);
    let at = format!("@{}", file.display());
    let id = enqueue(&db, &["big", "--args", &at]).await;
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["args"]["pad"].as_str().map(str::len), Some(2000));

    let mut child = tokio::process::Command::new(BIN)
        .args([
            "--database-url",
            db.conninfo(),
            "enqueue",
            "piped",
            "--args",
            "-",
            "--json",
        ])
        .env_remove("DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"from\": \"stdin\"}")
        .await
        .expect("write");
    drop(stdin);
    let output = child.wait_with_output().await.expect("wait");
    let id = json(&output)["id"].as_i64().expect("id");
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["args"]["from"], "stdin");

    let small = remuda(
        &db,
        &[
            "enqueue",
            "big",
            "--args",
            &at,
            "--max-payload-bytes",
            "1000",
        ],
    )
    .await;
    assert_eq!(code(&small), 2);
    assert!(
        stderr(&small).contains("over the limit of 1000"),
        "{}",
        stderr(&small)
    );
    let raised = remuda(
        &db,
        &[
            "enqueue",
            "big",
            "--args",
            &at,
            "--max-payload-bytes",
            "3000",
        ],
    )
    .await;
    assert_eq!(code(&raised), 0, "{}", stderr(&raised));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_command_quietly() {
    let db = migrated().await;
    let dir = TempDir::new();
    let lines: String = (0..50).map(|i| format!("{{\"i\": {i}}}\n")).collect();
    let file = dir.write("jobs.jsonl", &lines);
    remuda(
        &db,
        &["enqueue-batch", "x", "--file", file.to_str().expect("path")],
    )
    .await;
    for args in [&["jobs", "--limit", "50"][..], &["jobs", "--json"][..]] {
        let mut child = tokio::process::Command::new(BIN)
            .args(["--database-url", db.conninfo()])
            .args(args)
            .env_remove("DATABASE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        drop(child.stdout.take()); // the reader is gone before anything is written
        let output = child.wait_with_output().await.expect("wait");
        assert_eq!(code(&output), 0, "{args:?}: {}", stderr(&output));
        assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_commands_report_errors_as_json_with_the_same_exit_codes() {
    let db = migrated().await;
    let cases: &[(&[&str], i32, &str)] = &[
        (&["job", "999999", "--json"], 2, "NOT_FOUND"),
        (&["enqueue", "x", "--args", "{", "--json"], 2, "BAD_INPUT"),
        (&["jobs", "--state", "nope", "--json"], 2, "BAD_INPUT"),
        (&["wait", "999999", "--json"], 2, "NOT_FOUND"),
    ];
    for (args, exit, kind) in cases {
        let output = remuda(&db, args).await;
        assert_eq!(code(&output), *exit, "{args:?}");
        let error: serde_json::Value = serde_json::from_str(stderr(&output).trim())
            .unwrap_or_else(|e| panic!("{args:?}: stderr is not JSON ({e}): {}", stderr(&output)));
        assert_eq!(error["error"]["code"], *kind, "{args:?}: {error}");
        assert!(error["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    let unreachable = tokio::process::Command::new(BIN)
        .args([
            "--database-url",
            "postgres://127.0.0.1:1/x",
            "jobs",
            "--json",
        ])
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("run");
    assert_eq!(code(&unreachable), 4);
    let error: serde_json::Value = serde_json::from_slice(&unreachable.stderr).expect("JSON error");
    assert_eq!(error["error"]["code"], "DATABASE");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("refused"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_is_idempotent_and_retry_starts_afresh_but_keeps_results_unless_forced() {
    let db = migrated().await;
    let id = enqueue(&db, &["x"]).await.to_string();
    assert_eq!(code(&remuda(&db, &["cancel", &id]).await), 0);
    let again = remuda(&db, &["cancel", &id]).await;
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(
        stdout(&again).contains("already cancelled"),
        "{}",
        stdout(&again)
    );
    let again = json(&remuda(&db, &["cancel", &id, "--json"]).await);
    assert_eq!(again["already"], true);

    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("conn");
    let done = enqueue(&db, &["y"]).await;
    conn.execute(
        "UPDATE remuda.jobs SET state = 'completed', attempt = 1, started_at = now(), finished_at = now(), worker_id = 'w-1', result = '{\"ok\": 42}' WHERE id = $1",
        &[&done],
    )
    .await
    .expect("simulate a completed run");
    let refused = remuda(&db, &["retry", &done.to_string()]).await;
    assert_eq!(code(&refused), 2);
    assert!(stderr(&refused).contains("--force"), "{}", stderr(&refused));
    let job = json(&remuda(&db, &["job", &done.to_string(), "--json"]).await);
    assert_eq!(job["result"]["ok"], 42, "the result is kept");
    let forced = remuda(&db, &["retry", &done.to_string(), "--force"]).await;
    assert_eq!(code(&forced), 0, "{}", stderr(&forced));
    let job = json(&remuda(&db, &["job", &done.to_string(), "--json"]).await);
    assert_eq!(job["state"], "available");
    assert_eq!(job["started_at"], serde_json::Value::Null, "{job}");
    assert_eq!(job["worker_id"], serde_json::Value::Null, "{job}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_that_do_not_exist_are_named_as_such() {
    let db = migrated().await;
    let show = remuda(&db, &["queue", "show", "nosuch"]).await;
    assert_eq!(code(&show), 0);
    assert!(
        stderr(&show).contains("no jobs and no settings"),
        "{}",
        stderr(&show)
    );
    let pause = remuda(&db, &["queue", "pause", "nosuch"]).await;
    assert!(stderr(&pause).contains("created now"), "{}", stderr(&pause));
    let again = remuda(&db, &["queue", "show", "nosuch"]).await;
    assert!(
        !stderr(&again).contains("no jobs and no settings"),
        "it has settings now"
    );
    // `remuda queues` lists the paused queue although it has no jobs, with its limits
    remuda(&db, &["queue", "set", "capped", "--max-running", "3"]).await;
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    let nosuch = queues
        .as_array()
        .and_then(|q| q.iter().find(|q| q["queue"] == "nosuch"))
        .expect("listed");
    assert_eq!(nosuch["paused"], true);
    let capped = queues
        .as_array()
        .and_then(|q| q.iter().find(|q| q["queue"] == "capped"))
        .expect("listed");
    assert_eq!(capped["max_running"], 3);
    let table = stdout(&remuda(&db, &["queues"]).await);
    assert!(
        table.contains("paused") && table.contains("max_running=3"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_choice_is_explained() {
    let db = migrated().await;
    let output = remuda(&db, &["jobs", "--json"]).await;
    assert_eq!(code(&output), 0);
    // an empty DATABASE_URL is unset: the local resolution runs, and -v says what it chose
    let output = tokio::process::Command::new(BIN)
        .args(["-v", "database-url"])
        .env("DATABASE_URL", "")
        .output()
        .await
        .expect("run");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(stderr(&output).contains("database:"), "{}", stderr(&output));
    let output = remuda(&db, &["-v", "jobs"]).await;
    assert!(
        stderr(&output).contains("from the URL given"),
        "{}",
        stderr(&output)
    );
    let bad = tokio::process::Command::new(BIN)
        .args([
            "--database-url",
            "postgres://127.0.0.1/x?bogus_option=1",
            "jobs",
        ])
        .output()
        .await
        .expect("run");
    assert_eq!(code(&bad), 2);
    assert!(stderr(&bad).contains("bogus_option"), "{}", stderr(&bad));
    let usage = stdout(
        &tokio::process::Command::new(BIN)
            .args(["enqueue", "--help"])
            .output()
            .await
            .expect("help"),
    );
    let first = usage
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap_or_default();
    assert!(
        !first.contains("--database-url"),
        "the URL is optional: {first}"
    );
    let nodb = tokio::process::Command::new(BIN)
        .args([
            "--database-url",
            "postgres://127.0.0.1/remuda_surely_no_such_db",
            "jobs",
        ])
        .output()
        .await
        .expect("run");
    assert_eq!(code(&nodb), 4);
    assert!(
        stderr(&nodb).contains("3D000") && stderr(&nodb).contains("does not exist"),
        "{}",
        stderr(&nodb)
    );
}
