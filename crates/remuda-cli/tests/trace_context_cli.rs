//! The trace context through the CLI and a `remuda worker`: `enqueue --traceparent` (or
//! TRACEPARENT) is the trace a job continues; a command task gets its attempt's context in
//! TRACEPARENT / TRACESTATE (and a `remuda enqueue` inside it continues it), an HTTP task in
//! the `traceparent` / `tracestate` headers; a malformed one is refused with exit 2, and one
//! that only comes along in the environment is ignored.

mod common;

use common::{
    code, enqueue, json, migrated, remuda, stderr, wait_for_state, TempDir, WorkerProcess,
};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// An HTTP server answering every request with the `traceparent` and `tracestate` headers it
/// got, as a JSON string "traceparent|tracestate".
async fn header_echo() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let head = loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                    if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        break String::from_utf8_lossy(&data[..end]).to_lowercase();
                    }
                };
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
                        .unwrap_or_default()
                };
                let text = format!("\"{}|{}\"", header("traceparent"), header("tracestate"));
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

fn config(dir: &TempDir, port: u16, conninfo: &str) -> std::path::PathBuf {
    let bin = common::BIN;
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
concurrency = 4
poll_interval = "100ms"
shutdown_timeout = "5s"

[tasks.env_echo]
command = ["sh", "-c", "cat >/dev/null; printf '\"%s|%s\"' \"$TRACEPARENT\" \"$TRACESTATE\""]

[tasks.fan_out]
command = ["sh", "-c", "cat >/dev/null; {bin} --database-url '{conninfo}' enqueue leaf --queue leaves --json"]

[tasks.http_echo]
url = "http://127.0.0.1:{port}/"
"#
        ),
    )
}

/// The attempt's context a finished job's task saw: (traceparent, tracestate).
async fn seen(db: &common::TestDatabase, id: i64) -> (String, String, serde_json::Value) {
    let job = wait_for_state(db, id, &["completed", "failed"], Duration::from_secs(30)).await;
    assert_eq!(job["state"], "completed", "{job}");
    let text = job["result"]["ok"].as_str().unwrap_or("").to_string();
    let (tp, ts) = text.split_once('|').unwrap_or_default();
    (tp.to_string(), ts.to_string(), job)
}

/// The attempt's span id, as every part of remuda derives it.
fn span_of(job: &serde_json::Value) -> String {
    let started: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(job["started_at"].clone()).expect("started_at");
    remuda::trace::attempt_span_id(
        job["id"].as_i64().expect("id"),
        job["attempt"].as_i64().expect("attempt") as i32,
        started,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_and_http_tasks_get_their_attempts_trace_and_a_task_that_enqueues_continues_it() {
    let db = migrated().await;
    let port = header_echo().await;
    let dir = TempDir::new();
    let config = config(&dir, port, db.conninfo());
    let worker = WorkerProcess::start(&db, &config);

    let traced = ["--traceparent", TP, "--tracestate", "vendor=abc"];
    let env_job = enqueue(&db, &[&["env_echo"][..], &traced].concat()).await;
    let http_job = enqueue(&db, &[&["http_echo"][..], &traced].concat()).await;
    let plain_job = enqueue(&db, &["env_echo"]).await;
    let fan_job = enqueue(&db, &["fan_out", "--traceparent", TP]).await;

    for id in [env_job, http_job] {
        let (tp, ts, job) = seen(&db, id).await;
        let expected = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", span_of(&job));
        assert_eq!(
            (tp.as_str(), ts.as_str()),
            (expected.as_str(), "vendor=abc"),
            "job {id}"
        );
        assert_eq!(job["trace"]["traceparent"], TP, "stored as enqueued");
    }
    let (tp, ts, _) = seen(&db, plain_job).await;
    assert_eq!(
        (tp.as_str(), ts.as_str()),
        ("", ""),
        "no trace, no variables"
    );

    let fan = wait_for_state(
        &db,
        fan_job,
        &["completed", "failed"],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(fan["state"], "completed", "{fan}");
    let leaf = fan["result"]["ok"]["id"].as_i64().expect("the leaf's id");
    let leaf = json(&remuda(&db, &["job", &leaf.to_string(), "--json"]).await);
    assert_eq!(
        leaf["trace"]["traceparent"],
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", span_of(&fan)),
        "the job enqueued inside the task continues its attempt's trace"
    );
    assert!(worker.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_traceparent_is_refused_with_exit_2_and_one_from_the_environment_ignored() {
    let db = migrated().await;
    for bad in [
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "zz",
    ] {
        let out = remuda(&db, &["enqueue", "leaf", "--traceparent", bad]).await;
        assert_eq!(code(&out), 2, "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("traceparent"), "{}", stderr(&out));
    }
    let client = db.client().await.expect("client");
    assert_eq!(
        common::count(&client, "SELECT count(*) FROM remuda.jobs").await,
        0,
        "no job enqueued"
    );
    // one that only comes along in the environment (another tool's) is ignored, saying so
    let out = tokio::process::Command::new(common::BIN)
        .args(["--database-url", db.conninfo(), "enqueue", "leaf", "--json"])
        .env("TRACEPARENT", "01-not-a-context")
        .output()
        .await
        .expect("run remuda");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("TRACEPARENT in the environment is ignored"),
        "{}",
        stderr(&out)
    );
    let id = json(&out)["id"].to_string();
    let job = json(&remuda(&db, &["job", &id, "--json"]).await);
    assert!(job["trace"].is_null(), "{job}");
}
