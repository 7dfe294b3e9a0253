//! The CLI's contract for scripts: subcommands, JSON fields, exit codes, bad-input errors.

mod common;

use common::{code, enqueue, json, migrated, remuda, stderr, stdout, TempDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subcommand_has_help() {
    for sub in [
        "migrate",
        "enqueue",
        "enqueue-batch",
        "worker",
        "job",
        "jobs",
        "cancel",
        "retry",
        "queues",
        "workers",
        "demo",
        "database-url",
    ] {
        let output = tokio::process::Command::new(common::BIN)
            .args([sub, "--help"])
            .output()
            .await
            .expect("run");
        assert_eq!(code(&output), 0, "{sub} --help");
        assert!(
            stdout(&output).contains("Usage: remuda"),
            "{sub}: {}",
            stdout(&output)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_is_idempotent_and_reports_json() {
    let db = migrated().await;
    let output = remuda(&db, &["migrate", "--json"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["to"], remuda::migrate::LATEST);
    assert_eq!(report["applied"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_json_has_the_documented_fields() {
    let db = migrated().await;
    let id = enqueue(
        &db,
        &[
            "resize",
            "--args",
            r#"{"w": 640}"#,
            "--queue",
            "media",
            "--priority",
            "-3",
            "--max-attempts",
            "4",
            "--timeout",
            "30s",
        ],
    )
    .await;
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    for field in [
        "id",
        "kind",
        "queue",
        "state",
        "attempt",
        "max_attempts",
        "priority",
        "run_at",
        "created_at",
        "started_at",
        "finished_at",
        "result",
        "errors",
        "unique_key",
        "concurrency_key",
    ] {
        assert!(job.get(field).is_some(), "missing {field}: {job}");
    }
    assert_eq!(job["id"], id);
    assert_eq!(job["kind"], "resize");
    assert_eq!(job["queue"], "media");
    assert_eq!(job["state"], "available");
    assert_eq!(job["priority"], -3);
    assert_eq!(job["max_attempts"], 4);
    assert_eq!(job["timeout_ms"], 30_000);
    assert_eq!(job["args"], serde_json::json!({"w": 640}));
    assert_eq!(job["errors"], serde_json::json!([]));

    let listed = json(&remuda(&db, &["jobs", "--json", "--queue", "media"]).await);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["id"], id);
    let none = json(&remuda(&db, &["jobs", "--json", "--state", "failed"]).await);
    assert_eq!(none, serde_json::json!([]));

    let text = remuda(&db, &["job", &id.to_string()]).await;
    assert!(stdout(&text).contains("resize"), "{}", stdout(&text));

    // the table columns operators query have the same names
    let pool = db.database().expect("pool");
    let row = pool
        .conn()
        .await
        .expect("conn")
        .query_one("SELECT id, kind, queue, state::text, attempt, priority, run_at, created_at, started_at, finished_at FROM remuda.jobs", &[])
        .await
        .expect("operator SQL");
    assert_eq!(row.get::<_, String>(3), "available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_json_lists_every_state() {
    let db = migrated().await;
    enqueue(&db, &["a", "--queue", "q1"]).await;
    enqueue(&db, &["a", "--queue", "q1", "--delay", "1h"]).await;
    enqueue(&db, &["a", "--queue", "q2"]).await;
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    let q1 = queues
        .as_array()
        .and_then(|a| a.iter().find(|q| q["queue"] == "q1"))
        .expect("q1");
    for state in [
        "scheduled",
        "available",
        "running",
        "completed",
        "failed",
        "cancelled",
        "expired",
    ] {
        assert!(q1.get(state).is_some(), "missing {state}: {q1}");
    }
    assert_eq!(q1["available"], 1);
    assert_eq!(q1["scheduled"], 1);
    assert_eq!(q1["completed"], 0);
    let workers = json(&remuda(&db, &["workers", "--json"]).await);
    assert_eq!(workers, serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_retry_from_the_command_line() {
    let db = migrated().await;
    let id = enqueue(&db, &["x"]).await;
    let output = remuda(&db, &["cancel", &id.to_string(), "--json"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(json(&output)["previous_state"], "available");
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["state"], "cancelled");
    assert_eq!(job["result"]["err"]["code"], "CANCELLED");

    let again = remuda(&db, &["cancel", &id.to_string()]).await;
    assert_eq!(code(&again), 0, "cancelling twice is no error");
    assert!(
        stdout(&again).contains("already cancelled"),
        "{}",
        stderr(&again)
    );

    let output = remuda(&db, &["retry", &id.to_string()]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["state"], "available");

    let missing = remuda(&db, &["job", "987654321"]).await;
    assert_eq!(code(&missing), 2);
    assert!(
        stderr(&missing).contains("no job with id 987654321"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_and_deadlines_from_the_command_line() {
    let db = migrated().await;
    // three cancelled jobs in queue a (two of kind x), one in queue b
    let mut ids = Vec::new();
    for (kind, queue) in [("x", "a"), ("x", "a"), ("y", "a"), ("x", "b")] {
        let id = enqueue(&db, &[kind, "--queue", queue]).await;
        assert_eq!(code(&remuda(&db, &["cancel", &id.to_string()]).await), 0);
        ids.push(id);
    }
    let output = remuda(
        &db,
        &[
            "retry",
            "--state",
            "cancelled",
            "--queue",
            "a",
            "--kind",
            "x",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(json(&output)["retried"], 2);
    let output = remuda(&db, &["retry", "--state", "cancelled", "--queue", "a"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).contains("1 cancelled job is available again"),
        "{}",
        stdout(&output)
    );
    let states: Vec<_> =
        futures_util::future::join_all(
            ids.iter().map(|id| {
                let db = &db;
                async move {
                    json(&remuda(db, &["job", &id.to_string(), "--json"]).await)["state"].clone()
                }
            }),
        )
        .await;
    assert_eq!(states, ["available", "available", "available", "cancelled"]);
    let output = remuda(&db, &["retry", "--state", "failed", "--json"]).await;
    assert_eq!(json(&output)["retried"], 0, "none failed");

    let id = enqueue(&db, &["x", "--deadline", "2031-02-03T04:05:06Z"]).await;
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["expires_at"], "2031-02-03T04:05:06Z");
    let id = enqueue(&db, &["x", "--deadline-in", "10m"]).await;
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert!(job["expires_at"].is_string(), "{job}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_unique_enqueue_prints_the_existing_id() {
    let db = migrated().await;
    let first = json(
        &remuda(
            &db,
            &["enqueue", "report", "--unique-key", "daily-42", "--json"],
        )
        .await,
    );
    assert_eq!(first["duplicate"], false);
    let output = remuda(
        &db,
        &["enqueue", "report", "--unique-key", "daily-42", "--json"],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        json(&output),
        serde_json::json!({"id": first["id"], "duplicate": true})
    );
    let output = remuda(&db, &["enqueue", "report", "--unique-key", "daily-42"]).await;
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output).trim(), first["id"].to_string());
    assert!(
        stderr(&output).contains("exists already"),
        "{}",
        stderr(&output)
    );
    let job = json(&remuda(&db, &["job", &first["id"].to_string(), "--json"]).await);
    assert_eq!(job["unique_key"], "daily-42");
    let other = json(&remuda(&db, &["enqueue", "report", "--json"]).await);
    assert_eq!(other["duplicate"], false);
    let plain = json(&remuda(&db, &["job", &other["id"].to_string(), "--json"]).await);
    assert_eq!(plain["unique_key"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_and_cluster_settings_from_the_command_line() {
    let db = migrated().await;
    let show = json(&remuda(&db, &["queue", "show", "mail", "--json"]).await);
    assert_eq!(show["name"], "mail");
    assert_eq!(show["paused"], false);
    assert_eq!(show["max_running"], serde_json::Value::Null);
    let paused = json(&remuda(&db, &["queue", "pause", "mail", "--json"]).await);
    assert_eq!(paused["paused"], true);
    let set = remuda(
        &db,
        &[
            "queue",
            "set",
            "mail",
            "--max-running",
            "5",
            "--key-limit",
            "2",
            "--rate",
            "100/1s",
            "--max-depth",
            "3",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&set), 0, "{}", stderr(&set));
    let set = json(&set);
    assert_eq!(set["paused"], true, "set leaves the pause alone");
    assert_eq!(set["max_running"], 5);
    assert_eq!(set["key_limit"], 2);
    assert_eq!(set["rate"], "100/1s");
    assert_eq!(set["max_depth"], 3);
    assert_eq!(set["rate_per"], "queue");
    let per_kind = remuda(
        &db,
        &[
            "queue",
            "set",
            "mail",
            "--rate",
            "10/1m",
            "--rate-per",
            "kind",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&per_kind), 0, "{}", stderr(&per_kind));
    let per_kind = json(&per_kind);
    assert_eq!(per_kind["rate"], "10/1m");
    assert_eq!(per_kind["rate_per"], "kind");
    let bad = remuda(
        &db,
        &[
            "queue",
            "set",
            "mail",
            "--rate",
            "1/1s",
            "--rate-per",
            "tenant",
        ],
    )
    .await;
    assert_eq!(code(&bad), 2);
    assert!(
        stderr(&bad).contains("per queue, kind or key"),
        "{}",
        stderr(&bad)
    );
    let cleared = json(&remuda(&db, &["queue", "set", "mail", "--rate", "none", "--json"]).await);
    assert_eq!(cleared["rate"], serde_json::Value::Null);
    assert_eq!(cleared["max_running"], 5);
    // paused queues accept jobs; max_depth refuses the fourth waiting one with exit 2
    for _ in 0..3 {
        enqueue(
            &db,
            &["send", "--queue", "mail", "--concurrency-key", "customer:7"],
        )
        .await;
    }
    let full = remuda(&db, &["enqueue", "send", "--queue", "mail"]).await;
    assert_eq!(code(&full), 2, "{}", stderr(&full));
    assert!(
        stderr(&full).contains("queue mail is full"),
        "{}",
        stderr(&full)
    );
    assert!(stderr(&full).contains("--max-depth"), "{}", stderr(&full));
    let show = json(&remuda(&db, &["queue", "show", "mail", "--json"]).await);
    assert_eq!(show["jobs"]["available"], 3);
    let resumed = json(&remuda(&db, &["queue", "resume", "mail", "--json"]).await);
    assert_eq!(resumed["paused"], false);
    let job = json(&remuda(&db, &["jobs", "--queue", "mail", "--json", "--limit", "1"]).await);
    assert_eq!(job[0]["concurrency_key"], "customer:7");
    for (args, message) in [
        (vec!["queue", "set", "mail", "--rate", "fast"], "not a rate"),
        (
            vec!["queue", "set", "mail", "--max-running", "-1"],
            "not a limit",
        ),
        (vec!["queue", "set", "mail"], "nothing to set"),
        (
            vec!["cluster", "set", "--max-running", "lots"],
            "not a limit",
        ),
    ] {
        let output = remuda(&db, &args).await;
        assert_eq!(code(&output), 2, "{args:?}");
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let cluster = json(&remuda(&db, &["cluster", "set", "--max-running", "40", "--json"]).await);
    assert_eq!(cluster["max_running"], 40);
    let cluster = json(&remuda(&db, &["cluster", "set", "--max-running", "none", "--json"]).await);
    assert_eq!(cluster["max_running"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_batch_inserts_every_line_or_none() {
    let db = migrated().await;
    let dir = TempDir::new();
    let lines: String = (0..2500).map(|i| format!("{{\"i\": {i}}}\n")).collect();
    let file = dir.write("jobs.jsonl", &lines);
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "bulk",
            "--file",
            file.to_str().expect("path"),
            "--queue",
            "bulk",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["count"], 2500);
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    assert_eq!(queues[0]["queue"], "bulk");
    assert_eq!(queues[0]["available"], 2500);

    let bad = dir.write("bad.jsonl", "{\"i\": 1}\n{\"i\": \n");
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "bulk",
            "--file",
            bad.to_str().expect("path"),
        ],
    )
    .await;
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("line 2"), "{}", stderr(&output));
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    assert_eq!(
        queues[0]["available"], 2500,
        "nothing written from the bad file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_a_clear_error_and_nothing_written() {
    let db = migrated().await;
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["enqueue", "k", "--args", "{not json"],
            2,
            "--args is not valid JSON",
        ),
        (
            &["enqueue", "k", "--delay", "10 parsecs"],
            2,
            "invalid duration",
        ),
        (&["enqueue", "k", "--run-at", "tomorrow"], 2, "invalid time"),
        (
            &[
                "enqueue",
                "k",
                "--delay",
                "1s",
                "--run-at",
                "2030-01-01T00:00:00Z",
            ],
            2,
            "cannot be used with",
        ),
        (
            &["enqueue", "k", "--no-such-flag"],
            2,
            "unexpected argument",
        ),
        (&["enqueue", "k", "--max-attempts", "0"], 2, "at least 1"),
        (
            &["worker", "--config", "/nonexistent/remuda.toml"],
            2,
            "cannot read worker config",
        ),
        (&["jobs", "--state", "done"], 2, "unknown job state"),
        (
            &["enqueue", "k", "--args", r#"{"s": "\u0000"}"#],
            2,
            "NUL character",
        ),
        (
            &[
                "enqueue",
                "k",
                "--delay",
                "10000000000000000000s10000000000000000000s",
            ],
            2,
            "too long",
        ),
        (
            &["enqueue-batch", "k", "--file", "/nonexistent.jsonl"],
            2,
            "cannot read",
        ),
    ];
    for (args, expected_code, message) in cases {
        let output = remuda(&db, args).await;
        assert_eq!(
            code(&output),
            *expected_code,
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    assert_eq!(queues, serde_json::json!([]), "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_or_missing_schema_exits_4() {
    let output = tokio::process::Command::new(common::BIN)
        .args([
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
            "queues",
        ])
        .output()
        .await
        .expect("run");
    assert_eq!(code(&output), 4, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("cannot connect to PostgreSQL"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        stderr(&output).trim().lines().count(),
        1,
        "one line: {}",
        stderr(&output)
    );

    let db = migrated().await;
    let pool = db.database().expect("pool");
    pool.conn()
        .await
        .expect("conn")
        .batch_execute("DROP SCHEMA remuda CASCADE")
        .await
        .expect("drop");
    let output = remuda(&db, &["enqueue", "k"]).await;
    assert_eq!(code(&output), 4, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("remuda migrate"),
        "{}",
        stderr(&output)
    );
    let output = remuda(&db, &["migrate"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(code(&remuda(&db, &["enqueue", "k"]).await), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_takes_kind_defaults_from_a_worker_config() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        "[tasks.resize]\ncommand = [\"true\"]\nqueue = \"media\"\nmax_attempts = 7\ntimeout = \"2m\"\n",
    );
    let id = enqueue(&db, &["resize", "--config", config.to_str().expect("path")]).await;
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["queue"], "media");
    assert_eq!(job["max_attempts"], 7);
    assert_eq!(job["timeout_ms"], 120_000);
    let output = remuda(
        &db,
        &[
            "enqueue",
            "other",
            "--config",
            config.to_str().expect("path"),
        ],
    )
    .await;
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("has no [tasks.other]"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_reports_throughput_latency_and_costs_as_json() {
    let db = migrated().await;
    let output = remuda(
        &db,
        &[
            "bench",
            "-n",
            "3000",
            "--pickup",
            "5",
            "--concurrency",
            "200",
            "--backlog",
            "500",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["jobs"], 3000);
    assert_eq!(report["backlog"], 500);
    assert!(
        report["enqueue_jobs_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
        "{report}"
    );
    assert!(
        report["drain_jobs_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
        "{report}"
    );
    assert_eq!(report["pickup_ms"]["samples"], 5);
    assert!(
        report["pickup_ms"]["p99"].as_f64().unwrap_or(0.0)
            >= report["pickup_ms"]["p50"].as_f64().unwrap_or(1.0)
    );
    assert!(report["database_bytes"].as_i64().unwrap_or(0) > 0);
    assert!(
        report["cpu_seconds"]["worker"].as_f64().unwrap_or(0.0) > 0.0,
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_churn_and_schedules_modes_report_their_figures_as_json() {
    let db = migrated().await;
    let output = remuda(
        &db,
        &[
            "bench", "--churn", "3s", "--retain", "1s", "--rate", "1000", "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    let sizes = report["sizes"].as_array().expect("sizes");
    assert_eq!(sizes.len(), 11, "the start and each tenth: {report}");
    for field in ["t_s", "rows", "table_bytes", "index_bytes"] {
        assert!(
            sizes.iter().all(|s| s[field].is_number()),
            "{field}: {report}"
        );
    }
    assert_eq!(
        report["drain_jobs_per_sec"].as_array().map(Vec::len),
        Some(10)
    );
    assert!(report["completed"].as_u64().unwrap_or(0) > 0, "{report}");

    let output = remuda(
        &db,
        &["bench", "--schedules", "3", "--duration", "1s", "--json"],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    for field in ["fired", "duplicates", "missing"] {
        assert!(report[field].is_number(), "{field}: {report}");
    }
    assert!(report["lateness_ms"]["p50"].is_number() && report["lateness_ms"]["p99"].is_number());
    assert_eq!(
        (&report["duplicates"], &report["missing"]),
        (&0.into(), &0.into())
    );
    let bad = remuda(&db, &["bench", "--retain", "1s"]).await;
    assert_eq!(code(&bad), 2, "--retain needs --churn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_workflow_modes_report_nodes_per_second_and_step_latency_beside_a_plain_drain() {
    let db = migrated().await;
    for (shape, nodes) in [("wide", "20"), ("map", "50"), ("chain", "5")] {
        let output = remuda(
            &db,
            &["bench", "--workflow", shape, "--nodes", nodes, "--json"],
        )
        .await;
        assert_eq!(code(&output), 0, "{shape}: {}", stderr(&output));
        let report = json(&output);
        assert_eq!(report["workflow"], shape);
        assert!(
            report["plain_drain_jobs_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
            "{report}"
        );
        if shape == "chain" {
            assert!(
                report["step_ms"]["p50"].is_number() && report["step_ms"]["p99"].is_number(),
                "{report}"
            );
            assert_eq!(
                report["step_ms"]["samples"], 4,
                "one step between each two nodes"
            );
        } else {
            assert!(
                report["nodes_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
                "{report}"
            );
        }
    }
    let bad = remuda(&db, &["bench", "--nodes", "10"]).await;
    assert_eq!(code(&bad), 2, "--nodes needs --workflow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_notify_reports_deliveries_and_their_latency_beside_a_plain_drain() {
    let db = migrated().await;
    let output = remuda(&db, &["bench", "--notify", "300", "--json"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["notify"], 300);
    for field in ["deliveries_per_sec", "plain_drain_jobs_per_sec"] {
        assert!(
            report[field].as_f64().unwrap_or(0.0) > 0.0,
            "{field}: {report}"
        );
    }
    let (p50, p99) = (&report["delivery_ms"]["p50"], &report["delivery_ms"]["p99"]);
    assert!(
        p50.as_f64().unwrap_or(-1.0) >= 0.0 && p99.as_f64() >= p50.as_f64(),
        "{report}"
    );
    let bad = remuda(&db, &["bench", "--notify", "10", "--workflow", "wide"]).await;
    assert_eq!(code(&bad), 2, "--notify is a mode of its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_limit_modes_report_their_queue_beside_a_plain_one() {
    let db = migrated().await;
    let modes: [&[&str]; 4] = [
        &[
            "--limit",
            "key",
            "-n",
            "2000",
            "--keys",
            "20",
            "--key-limit",
            "2",
        ],
        &["--limit", "global", "-n", "2000", "--max-running", "50"],
        &["--limit", "rate", "--rate", "400/1s", "--duration", "2s"],
        &["--unhandled", "500", "-n", "2000"],
    ];
    for mode in modes {
        let args = [&["bench", "--concurrency", "200", "--json"][..], mode].concat();
        let output = remuda(&db, &args).await;
        assert_eq!(code(&output), 0, "{mode:?}: {}", stderr(&output));
        let report = json(&output);
        for field in ["drain_jobs_per_sec", "plain_drain_jobs_per_sec"] {
            assert!(
                report[field].as_f64().unwrap_or(0.0) > 0.0,
                "{field}: {report}"
            );
        }
        match mode[1] {
            "key" => {
                assert_eq!(report["keys"], 20);
                assert!(report["key_wait_ms"]["worst_over_median"].is_number());
            }
            "global" => {
                let seen = report["max_running_seen"].as_i64().unwrap_or(-1);
                assert!((1..=50).contains(&seen), "the cap held: {report}");
            }
            "rate" => {
                let achieved = report["achieved_rate_per_sec"].as_f64().unwrap_or(0.0);
                assert!(
                    (300.0..=440.0).contains(&achieved),
                    "near 400/s over the window: {report}"
                );
                let burst = report["burst_max"].as_f64().unwrap_or(f64::MAX);
                assert!(burst <= 401.0, "no burst above the bucket: {report}");
            }
            _ => assert_eq!(report["unhandled"], 500),
        }
    }
    let bad = remuda(&db, &["bench", "--limit", "key", "--unhandled", "5"]).await;
    assert_eq!(code(&bad), 2, "--unhandled is a mode of its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_processes_compares_worker_processes_with_one() {
    let db = migrated().await;
    let output = remuda(
        &db,
        &[
            "bench",
            "--processes",
            "--workers",
            "3",
            "-n",
            "3000",
            "--concurrency",
            "100",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    assert_eq!(report["processes"], 3);
    let shares = report["shares"].as_array().expect("shares");
    let total: i64 = shares.iter().filter_map(|s| s.as_i64()).sum();
    assert_eq!(
        total, 3000,
        "every job ran once, by one of the processes: {report}"
    );
    assert!(
        report["drain_jobs_per_sec"].as_f64().unwrap_or(0.0) > 0.0
            && report["plain_drain_jobs_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
        "{report}"
    );
}
