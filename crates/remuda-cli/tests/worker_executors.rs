//! `remuda worker` running command, HTTP and built-in tasks, and `enqueue --wait` exit codes.

mod common;

use common::{
    code, enqueue, json, migrated, remuda, stderr, stdout, wait_for_state, TempDir, WorkerProcess,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A minimal HTTP/1.1 server for the tests: routes by path, counts calls to /flaky.
async fn http_server() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let flaky_calls = Arc::new(AtomicUsize::new(0));
    let calls = flaky_calls.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let calls = calls.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let (head, body) = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    data.extend_from_slice(&buf[..n]);
                    if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&data[..end]).to_string();
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        while data.len() < end + 4 + length {
                            let Ok(n) = socket.read(&mut buf).await else {
                                return;
                            };
                            if n == 0 {
                                break;
                            }
                            data.extend_from_slice(&buf[..n]);
                        }
                        break (head, String::from_utf8_lossy(&data[end + 4..]).to_string());
                    }
                };
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let auth = head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("authorization: ")
                            .or_else(|| l.strip_prefix("Authorization: "))
                    })
                    .unwrap_or("")
                    .to_string();
                let job: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let (status, text) = match path.as_str() {
                    "/ok" => (
                        "200 OK",
                        serde_json::json!({"echo": job["args"], "auth": auth}).to_string(),
                    ),
                    "/text" => ("200 OK", "plain words".to_string()),
                    "/flaky" => {
                        if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                            ("503 Service Unavailable", "try later".to_string())
                        } else {
                            ("200 OK", "{\"finally\": true}".to_string())
                        }
                    }
                    _ => ("404 Not Found", "no such thing".to_string()),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, flaky_calls)
}

fn config(port: u16, dir: &TempDir) -> std::path::PathBuf {
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
name = "media-1"
capabilities = ["ffmpeg"]
queues = ["default", "media"]
concurrency = 8
shutdown_timeout = "5s"
poll_interval = "200ms"
promote_interval = "50ms"

[tasks.echo]
command = ["sh", "-c", "cat"]

[tasks.text]
command = ["sh", "-c", "cat >/dev/null; echo hello from sh"]

[tasks.fail]
command = ["sh", "-c", "cat >/dev/null; echo first line >&2; echo 'the real reason' >&2; exit 3"]
max_attempts = 3
retry_on = ["EXIT_75"]

[tasks.tempfail]
command = ["sh", "-c", "cat >/dev/null; if [ \"$REMUDA_JOB_ATTEMPT\" -lt 2 ]; then exit 75; fi; echo '\"recovered\"'"]
max_attempts = 3
backoff = {{ kind = "fixed", delay = "100ms" }}
retry_on = ["EXIT_75"]

[tasks.daemon]
command = ["sh", "-c", "cat >/dev/null; sleep 30 & echo started"]

[tasks.hang]
command = ["sh", "-c", "sleep 60 & echo $! > {pidfile}; wait"]
timeout = "500ms"
max_attempts = 1
queue = "media"

[tasks.http_ok]
url = "http://127.0.0.1:{port}/ok"
headers = {{ Authorization = "Bearer ${{REMUDA_TEST_TOKEN}}" }}

[tasks.http_text]
url = "http://127.0.0.1:{port}/text"

[tasks.http_flaky]
url = "http://127.0.0.1:{port}/flaky"
backoff = {{ kind = "fixed", delay = "100ms" }}

[tasks.http_missing]
url = "http://127.0.0.1:{port}/missing"

[tasks.http_refused]
url = "http://127.0.0.1:1/nothing"
max_attempts = 2
backoff = {{ kind = "fixed", delay = "100ms" }}

[tasks.https_refused]
url = "https://127.0.0.1:1/nothing"
max_attempts = 1

[tasks.noop]
builtin = "noop"
"#,
            pidfile = dir.path().join("grandchild.pid").display()
        ),
    )
}

fn error_code(job: &serde_json::Value) -> String {
    job["result"]["err"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_tasks_report_results_and_errors() {
    let db = migrated().await;
    let dir = TempDir::new();
    let (port, _) = http_server().await;
    let worker = WorkerProcess::start(&db, &config(port, &dir));

    let echo = enqueue(&db, &["echo", "--args", r#"{"n": 5}"#]).await;
    let text = enqueue(&db, &["text"]).await;
    let fail = enqueue(&db, &["fail"]).await;
    let tempfail = enqueue(&db, &["tempfail"]).await;
    let hang = enqueue(&db, &["hang", "--queue", "media"]).await;
    let unknown = enqueue(&db, &["not_in_config"]).await;
    let daemon = enqueue(&db, &["daemon"]).await;

    let job = wait_for_state(&db, echo, &["completed"], Duration::from_secs(20)).await;
    // stdin carried the job: stdout echoes it back as the JSON result
    assert_eq!(job["result"]["ok"]["id"], echo);
    assert_eq!(job["result"]["ok"]["kind"], "echo");
    assert_eq!(job["result"]["ok"]["attempt"], 1);
    assert_eq!(job["result"]["ok"]["args"], serde_json::json!({"n": 5}));

    let job = wait_for_state(&db, text, &["completed"], Duration::from_secs(20)).await;
    assert_eq!(job["result"]["ok"], "hello from sh");

    let job = wait_for_state(&db, fail, &["failed"], Duration::from_secs(20)).await;
    assert_eq!(error_code(&job), "EXIT_3");
    assert_eq!(job["attempt"], 1, "EXIT_3 is not in retry_on");
    assert!(
        job["result"]["err"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("the real reason"),
        "{job}"
    );

    let job = wait_for_state(&db, tempfail, &["completed"], Duration::from_secs(20)).await;
    assert_eq!(job["result"]["ok"], "recovered");
    assert_eq!(job["attempt"], 2);
    assert_eq!(job["errors"][0]["code"], "EXIT_75");

    let job = wait_for_state(&db, hang, &["failed"], Duration::from_secs(20)).await;
    assert_eq!(error_code(&job), "TIMEOUT");
    // the whole process group was killed: the backgrounded grandchild is gone too
    let pid: i32 = std::fs::read_to_string(dir.path().join("grandchild.pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    let mut gone = false;
    for _ in 0..50 {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.is_empty() || state.contains(") Z") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "grandchild {pid} survived the timeout");

    // a background grandchild holding the pipes does not keep the job running
    let job = wait_for_state(&db, daemon, &["completed"], Duration::from_secs(10)).await;
    assert_eq!(job["result"]["ok"], "started");

    let job = json(&remuda(&db, &["job", &unknown.to_string(), "--json"]).await);
    assert_eq!(
        job["state"], "available",
        "a kind the worker does not know is left alone"
    );
    assert_eq!(job["attempt"], 0);

    let workers = json(&remuda(&db, &["workers", "--json"]).await);
    assert_eq!(workers.as_array().map(Vec::len), Some(1), "{workers}");
    assert_eq!(
        workers[0]["queues"],
        serde_json::json!(["default", "media"])
    );
    assert_eq!(workers[0]["name"], "media-1");
    assert_eq!(workers[0]["capabilities"], serde_json::json!(["ffmpeg"]));
    assert!(worker.stop().await.success());
    let workers = json(&remuda(&db, &["workers", "--json"]).await);
    assert_eq!(
        workers,
        serde_json::json!([]),
        "a stopped worker deregisters"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tasks_map_statuses_to_results_and_retries() {
    let db = migrated().await;
    let dir = TempDir::new();
    let (port, flaky_calls) = http_server().await;
    let worker = WorkerProcess::start(&db, &config(port, &dir));

    let ok = enqueue(&db, &["http_ok", "--args", r#"{"x": 1}"#]).await;
    let text = enqueue(&db, &["http_text"]).await;
    let flaky = enqueue(&db, &["http_flaky"]).await;
    let missing = enqueue(&db, &["http_missing"]).await;
    let refused = enqueue(&db, &["http_refused"]).await;
    let https = enqueue(&db, &["https_refused"]).await;

    let job = wait_for_state(&db, ok, &["completed"], Duration::from_secs(20)).await;
    assert_eq!(job["result"]["ok"]["echo"], serde_json::json!({"x": 1}));
    assert_eq!(
        job["result"]["ok"]["auth"], "Bearer tok3n",
        "${{VAR}} expanded in headers"
    );
    let job = wait_for_state(&db, text, &["completed"], Duration::from_secs(20)).await;
    assert_eq!(job["result"]["ok"], "plain words");

    let job = wait_for_state(&db, flaky, &["completed"], Duration::from_secs(20)).await;
    assert_eq!(job["attempt"], 3, "two 503s were retried");
    assert_eq!(job["errors"][0]["code"], "HTTP_503");
    assert_eq!(flaky_calls.load(Ordering::SeqCst), 3);

    let job = wait_for_state(&db, missing, &["failed"], Duration::from_secs(20)).await;
    assert_eq!(error_code(&job), "HTTP_404");
    assert_eq!(job["attempt"], 1, "a 404 is permanent");

    let job = wait_for_state(&db, refused, &["failed"], Duration::from_secs(20)).await;
    assert_eq!(error_code(&job), "HTTP_CONNECT");
    assert_eq!(job["attempt"], 2, "connection errors are retried");

    // https is supported (the connection itself is what fails here)
    let job = wait_for_state(&db, https, &["failed"], Duration::from_secs(20)).await;
    assert_eq!(error_code(&job), "HTTP_CONNECT", "{job}");
    assert!(worker.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_wait_exits_by_outcome() {
    let db = migrated().await;
    let dir = TempDir::new();
    let (port, _) = http_server().await;
    let worker = WorkerProcess::start(&db, &config(port, &dir));

    let output = remuda(&db, &["enqueue", "noop", "--args", r#"{"i": 7}"#, "--wait"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout(&output)).ok(),
        Some(serde_json::json!({"ok": {"i": 7}}))
    );

    let output = remuda(&db, &["enqueue", "fail", "--wait", "--json"]).await;
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert_eq!(json(&output)["result"]["err"]["code"], "EXIT_3");

    let output = remuda(
        &db,
        &[
            "enqueue",
            "nobody_runs_this",
            "--wait",
            "--wait-timeout",
            "300ms",
        ],
    )
    .await;
    assert_eq!(code(&output), 3, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("did not finish within 300ms"),
        "{}",
        stderr(&output)
    );
    assert!(worker.stop().await.success());
}

/// An endpoint that never completes the TCP handshake (its listen queue is full and it never
/// accepts) fails an attempt that has no timeout of its own with `HTTP_CONNECT` after the
/// client's connect timeout (10 s), instead of holding the slot until the request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_never_accepts_fails_after_the_connect_timeout() {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let port = socket.local_addr().expect("addr").port();
    let listener = socket.listen(0).expect("listen");
    // one connection waiting fills a queue of 0: the next handshakes get no answer
    let _waiting = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("fill the queue");
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
poll_interval = "200ms"

[tasks.http_blackhole]
url = "http://127.0.0.1:{port}/never"
max_attempts = 1
"#
        ),
    );
    let worker = WorkerProcess::start(&db, &config);
    let id = enqueue(&db, &["http_blackhole"]).await;
    let job = wait_for_state(&db, id, &["failed"], Duration::from_secs(40)).await;
    assert_eq!(error_code(&job), "HTTP_CONNECT", "{job}");
    let message = job["result"]["err"]["message"].as_str().unwrap_or_default();
    // reqwest's words for its connect timeout (which depend on where it was cut short)
    assert!(
        message.contains("deadline has elapsed") || message.contains("timed out"),
        "{message}"
    );
    assert!(worker.stop().await.success());
    drop(listener);
}
