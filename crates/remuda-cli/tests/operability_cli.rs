//! `remuda dashboard`, `worker --metrics-bind`, `stats`, `delete`, `jobs delete` and the listing flags
//! of `remuda jobs`, through the real binary.

mod common;

use common::{code, enqueue, json, migrated, remuda, stderr, BIN};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_refuses_to_serve_beyond_the_loopback_without_a_token_of_ones_own() {
    let db = migrated().await;
    for args in [
        &["dashboard", "--bind", "0.0.0.0:0"][..],
        &["dashboard", "--bind", "0.0.0.0:0", "--no-auth"][..],
        &["dashboard", "--token", "short"][..],
    ] {
        let output = remuda(&db, args).await;
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
    }
    let output = remuda(&db, &["dashboard", "--bind", "0.0.0.0:0"]).await;
    assert!(
        stderr(&output).contains("not a loopback address"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_prints_its_address_and_token_serves_and_stops_on_sigterm() {
    let db = migrated().await;
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "--database-url",
            db.conninfo(),
            "dashboard",
            "--bind",
            "127.0.0.1:0",
        ])
        .env_remove("DATABASE_URL")
        .env_remove("REMUDA_DASHBOARD_TOKEN")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the dashboard");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let (mut address, mut token) = (None, None);
    while address.is_none() || token.is_none() {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("it says where it listens")
            .expect("read")
            .expect("a line");
        if let Some(rest) = line.strip_prefix("remuda dashboard on ") {
            address = rest.split_whitespace().next().map(str::to_string);
        }
        if let Some(rest) =
            line.strip_prefix("token (made up for this run; give --token to choose one): ")
        {
            token = Some(rest.trim().to_string());
        }
    }
    let (address, token) = (address.expect("address"), token.expect("token"));
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let refused = http
        .get(format!("{address}api/v1/queues"))
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status().as_u16(), 401);
    let answered = http
        .get(format!("{address}api/v1/queues"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("request");
    assert_eq!(answered.status().as_u16(), 200);
    common::terminate(&mut child, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_filtered_by_args_and_worker_and_show_their_last_error() {
    let db = migrated().await;
    enqueue(
        &db,
        &["mail", "--args", r#"{"user": 7, "to": "a@example.com"}"#],
    )
    .await;
    let other = enqueue(&db, &["mail", "--args", r#"{"user": 8}"#]).await;
    let listed = json(&remuda(&db, &["jobs", "--args", r#"{"user": 7}"#, "--json"]).await);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["args"]["to"], "a@example.com");
    let none = json(&remuda(&db, &["jobs", "--worker", "nobody-1-x", "--json"]).await);
    assert_eq!(none, serde_json::json!([]));
    let bad = remuda(&db, &["jobs", "--args", "{user"]).await;
    assert_eq!(code(&bad), 2);
    assert!(
        stderr(&bad).contains("--args must be JSON"),
        "{}",
        stderr(&bad)
    );
    let client = db.client().await.expect("client");
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'failed', finished_at = now(), attempt = 1,
                result = '{\"err\": {\"code\": \"SMTP_DOWN\", \"message\": \"connection refused\\nmore\", \"data\": null}}'
         WHERE id = $1",
        &[&other],
    )
    .await
    .expect("fail it");
    let text = common::stdout(&remuda(&db, &["jobs", "--state", "failed"]).await);
    assert!(
        text.contains("LAST_ERROR") && text.contains("SMTP_DOWN: connection refused"),
        "{text}"
    );
    assert!(!text.contains("more"), "one line of the message: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_serves_its_metrics_at_metrics_bind() {
    let db = migrated().await;
    let dir = common::TempDir::new();
    let config = dir.write(
        "remuda.toml",
        "[worker]\npoll_interval = \"200ms\"\n\n[tasks.resize]\nbuiltin = \"noop\"\nqueue = \"media\"\n",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = tokio::process::Command::new(BIN)
        .args(["--database-url", db.conninfo(), "worker", "--config"])
        .arg(&config)
        .args(["--metrics-bind", &format!("127.0.0.1:{port}")])
        .env_remove("DATABASE_URL")
        .kill_on_drop(true)
        .spawn()
        .expect("start the worker");
    for _ in 0..3 {
        enqueue(&db, &["resize", "--queue", "media"]).await;
    }
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let url = format!("http://127.0.0.1:{port}/metrics");
    let wanted = "remuda_jobs_completed_total{queue=\"media\",kind=\"resize\"} 3";
    let mut text = String::new();
    for _ in 0..100 {
        if let Ok(response) = http.get(&url).send().await {
            text = response.text().await.unwrap_or_default();
            if text.contains(wanted) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(text.contains(wanted), "{text}");
    assert!(text.contains("remuda_job_run_seconds_bucket{"), "{text}");
    assert!(text.contains("remuda_worker_running{worker="), "{text}");
    common::terminate(&mut child, Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_deleted_one_or_by_state_and_age_and_stats_count_the_recent_ones() {
    let db = migrated().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(enqueue(&db, &["mail"]).await);
    }
    let client = db.client().await.expect("client");
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'failed', attempt = 1,
                finished_at = CASE WHEN id = ANY($2) THEN now() - interval '2 days' ELSE now() END
         WHERE id = ANY($1)",
        &[&ids[..3].to_vec(), &ids[..2].to_vec()],
    )
    .await
    .expect("fail three, two of them long ago");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'completed', finished_at = now() WHERE id = $1",
        &[&ids[3]],
    )
    .await
    .expect("complete one");
    let stats = json(&remuda(&db, &["stats", "--window", "1h", "--json"]).await);
    assert_eq!(
        (stats[0]["completed"].as_i64(), stats[0]["failed"].as_i64()),
        (Some(1), Some(1)),
        "{stats}"
    );
    assert_eq!(stats[0]["failure_rate"].as_f64(), Some(0.5));
    let dry = json(
        &remuda(
            &db,
            &[
                "jobs",
                "delete",
                "--state",
                "failed",
                "--older-than",
                "1d",
                "--dry-run",
                "--json",
            ],
        )
        .await,
    );
    assert_eq!(
        (dry["matched"].as_i64(), dry["deleted"].as_i64()),
        (Some(2), Some(0)),
        "{dry}"
    );
    let done = json(
        &remuda(
            &db,
            &[
                "jobs",
                "delete",
                "--state",
                "failed",
                "--older-than",
                "1d",
                "--json",
            ],
        )
        .await,
    );
    assert_eq!(done["deleted"].as_i64(), Some(2), "{done}");
    assert!(client.job(ids[0]).await.expect("job").is_none());
    assert!(
        client.job(ids[2]).await.expect("job").is_some(),
        "the recent failure is kept"
    );
    let running = remuda(&db, &["jobs", "delete", "--state", "running"]).await;
    assert_eq!(code(&running), 2);
    let one = json(&remuda(&db, &["delete", &ids[4].to_string(), "--json"]).await);
    assert_eq!(
        (one["deleted"].as_bool(), one["previous_state"].as_str()),
        (Some(true), Some("available"))
    );
    let missing = remuda(&db, &["delete", &ids[4].to_string()]).await;
    assert_eq!(code(&missing), 2, "{}", stderr(&missing));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_draws_the_queues_and_quits_on_q() {
    let db = migrated().await;
    enqueue(&db, &["mail", "--queue", "outbox"]).await;
    // what a worker reported for the previous minute: 90 attempts, 9 failed, waits up to 5 ms
    let conn = db.database().expect("pool").conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.queue_minutes (queue, minute, completed, failed, wait)
         VALUES ('outbox', date_trunc('minute', now()) - interval '1 minute', 81, 9,
                 '{0,0,90}')",
    )
    .await
    .expect("activity");
    let once = common::stdout(&remuda(&db, &["top", "--once"]).await);
    assert!(
        once.contains("QUEUE") && once.contains("WAIT P95"),
        "{once}"
    );
    let outbox = once
        .lines()
        .find(|l| l.starts_with("outbox"))
        .unwrap_or_default();
    let fields: Vec<&str> = outbox.split_whitespace().collect();
    assert_eq!(
        fields.get(8..11),
        Some(&["9", "10.0%", "5ms"][..]),
        "{once}"
    );
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "--database-url",
            db.conninfo(),
            "top",
            "--interval",
            "200ms",
        ])
        .env_remove("DATABASE_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start top");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut stdin = child.stdin.take().expect("stdin");
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"q\n")
        .await
        .expect("press q");
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("it quits on q")
        .expect("output");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.matches("remuda top").count() >= 2,
        "it redraws: {text}"
    );
    assert!(text.contains("outbox"));
}
