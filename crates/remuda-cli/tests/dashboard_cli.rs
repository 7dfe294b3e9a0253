//! `remuda dashboard` and the listing flags of `remuda jobs`, through the real binary.

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
    let pid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("it stops")
        .expect("status");
    assert!(status.success(), "{status:?}");
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
