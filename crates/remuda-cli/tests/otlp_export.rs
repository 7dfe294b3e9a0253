//! Spans of attempts exported over OTLP (HTTP/protobuf) by `remuda worker` to a real receiver
//! on 127.0.0.1 that decodes them with the protocol's own definitions: a job that failed twice
//! and then completed gives three spans under the enqueuer's span, and a three-node workflow
//! one span per node under the run's; a job outside any trace gets a root span, and one whose
//! enqueuer did not sample its trace none.

mod common;

use common::{enqueue, migrated, remuda, wait_for_state, TempDir, WorkerProcess};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const ENQUEUER: &str = "00f067aa0ba902b7";

/// What the receiver got: each span with the `service.name` of its resource.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP receiver: decodes every `POST /v1/traces` body and answers 200.
async fn receiver() -> (u16, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received: Received = Arc::default();
    let store = received.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let store = store.clone();
            tokio::spawn(async move {
                // one connection may carry several requests (keep-alive)
                let mut data: Vec<u8> = Vec::new();
                let mut buf = [0u8; 65536];
                loop {
                    let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => data.extend_from_slice(&buf[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    while data.len() < end + 4 + length {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => data.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body: Vec<u8> = data.drain(..end + 4 + length).skip(end + 4).collect();
                    if head.starts_with("post /v1/traces") {
                        let request = ExportTraceServiceRequest::decode(body.as_slice())
                            .expect("an OTLP export request");
                        let mut spans = store.lock().expect("lock");
                        for resource in request.resource_spans {
                            let service = resource
                                .resource
                                .iter()
                                .flat_map(|r| r.attributes.iter())
                                .find(|a| a.key == "service.name")
                                .and_then(|a| a.value.as_ref()?.value.clone())
                                .map(|v| match v {
                                    Any::StringValue(s) => s,
                                    other => format!("{other:?}"),
                                })
                                .unwrap_or_default();
                            for scope in resource.scope_spans {
                                spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
                            }
                        }
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if socket.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, received)
}

fn config(dir: &TempDir) -> std::path::PathBuf {
    dir.write(
        "remuda.toml",
        r#"
[worker]
concurrency = 4
poll_interval = "100ms"
promote_interval = "50ms"
shutdown_timeout = "5s"

[tasks.flaky]
command = ["sh", "-c", "cat >/dev/null; if [ \"$REMUDA_JOB_ATTEMPT\" -lt 3 ]; then exit 75; fi; echo '\"third time\"'"]
max_attempts = 3
backoff = { kind = "fixed", delay = "100ms" }
retry_on = ["EXIT_75"]

[tasks.step]
command = ["sh", "-c", "cat"]

[tasks.env_trace]
command = ["sh", "-c", "cat >/dev/null; printf '\"%s\"' \"$TRACEPARENT\""]
"#,
    )
}

fn attribute(span: &Span, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.clone())
}

fn int(span: &Span, key: &str) -> i64 {
    match attribute(span, key) {
        Some(Any::IntValue(n)) => n,
        other => panic!("{key}: {other:?}"),
    }
}

fn text(span: &Span, key: &str) -> String {
    match attribute(span, key) {
        Some(Any::StringValue(s)) => s,
        other => panic!("{key}: {other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of job `id`, by attempt.
fn spans_of(received: &Received, id: i64) -> Vec<Span> {
    let mut spans: Vec<Span> = received
        .lock()
        .expect("lock")
        .iter()
        .filter(|(_, s)| int(s, "remuda.job.id") == id)
        .map(|(_, s)| s.clone())
        .collect();
    spans.sort_by_key(|s| int(s, "remuda.attempt"));
    spans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_retried_twice_and_a_three_node_workflow_arrive_as_spans_under_their_enqueuer() {
    let db = migrated().await;
    let (port, received) = receiver().await;
    let dir = TempDir::new();
    let config = config(&dir);
    let mut command = tokio::process::Command::new(common::BIN);
    command
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("OTEL_SERVICE_NAME", "remuda-tests");
    let log = dir.path().join("worker.log");
    let worker = WorkerProcess::spawn(command, &config, &[], db.conninfo(), &log);

    let tp = format!("00-{TRACE}-{ENQUEUER}-01");
    let flaky = enqueue(&db, &["flaky", "--traceparent", &tp]).await;
    let spec = dir.write(
        "chain.toml",
        r#"
name = "chain"
[nodes.a]
kind = "step"
[nodes.b]
kind = "step"
waits_for = ["a"]
[nodes.c]
kind = "step"
waits_for = ["b"]
"#,
    );
    let run_tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let started = remuda(
        &db,
        &[
            "workflow",
            "start",
            spec.to_str().expect("path"),
            "--traceparent",
            run_tp,
            "--wait",
            "--json",
        ],
    )
    .await;
    assert_eq!(common::code(&started), 0, "{}", common::stderr(&started));
    let job = wait_for_state(
        &db,
        flaky,
        &["completed", "failed"],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(job["state"], "completed", "{job}");
    // the last spans leave with the worker's shutdown at the latest
    assert!(worker.stop().await.success());

    let spans = spans_of(&received, flaky);
    assert_eq!(spans.len(), 3, "one span per attempt: {spans:?}");
    for (n, span) in spans.iter().enumerate() {
        assert_eq!(hex(&span.trace_id), TRACE, "the enqueuer's trace");
        assert_eq!(
            hex(&span.parent_span_id),
            ENQUEUER,
            "a child of the enqueuer's span"
        );
        assert_eq!(int(span, "remuda.attempt"), n as i64 + 1);
        assert_eq!(text(span, "remuda.job.kind"), "flaky");
        assert!(attribute(span, "remuda.queue_wait_ms").is_some());
        assert!(!text(span, "remuda.worker").is_empty());
    }
    let outcomes: Vec<String> = spans.iter().map(|s| text(s, "remuda.outcome")).collect();
    assert_eq!(outcomes, ["error", "error", "completed"]);
    assert_eq!(text(&spans[0], "remuda.error.code"), "EXIT_75");
    let ids: std::collections::HashSet<String> = spans.iter().map(|s| hex(&s.span_id)).collect();
    assert_eq!(ids.len(), 3, "a span id of its own per attempt");
    // the last one's id is the one the task was handed (job, attempt, claim time)
    let claimed: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(job["started_at"].clone()).expect("started_at");
    assert_eq!(
        hex(&spans[2].span_id),
        remuda::trace::attempt_span_id(flaky, 3, claimed)
    );

    let run: Vec<(String, Span)> = received
        .lock()
        .expect("lock")
        .iter()
        .filter(|(_, s)| text(s, "remuda.job.kind") == "step")
        .cloned()
        .collect();
    assert_eq!(run.len(), 3, "one span per node");
    for (service, span) in &run {
        assert_eq!(service, "remuda-tests");
        assert_eq!(hex(&span.trace_id), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(
            hex(&span.parent_span_id),
            "b7ad6b7169203331",
            "under the run's span"
        );
        assert_eq!(text(span, "remuda.outcome"), "completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outside_any_trace_gets_a_root_span_its_task_is_handed_and_an_unsampled_trace_none() {
    let db = migrated().await;
    let (port, received) = receiver().await;
    let dir = TempDir::new();
    let config = config(&dir);
    let mut command = tokio::process::Command::new(common::BIN);
    command.env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{port}"),
    );
    let log = dir.path().join("worker.log");
    let worker = WorkerProcess::spawn(command, &config, &[], db.conninfo(), &log);
    let root = enqueue(&db, &["env_trace"]).await;
    let unsampled = enqueue(
        &db,
        &[
            "step",
            "--traceparent",
            &format!("00-{TRACE}-{ENQUEUER}-00"),
        ],
    )
    .await;
    let seen = wait_for_state(&db, root, &["completed"], Duration::from_secs(30)).await;
    wait_for_state(&db, unsampled, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());

    let spans = spans_of(&received, root);
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert!(spans[0].parent_span_id.is_empty(), "a root span");
    // the task was handed the root's context: its spans (and jobs) join that trace
    let handed = seen["result"]["ok"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        handed,
        format!(
            "00-{}-{}-01",
            hex(&spans[0].trace_id),
            hex(&spans[0].span_id)
        ),
        "{seen}"
    );
    assert!(
        spans_of(&received, unsampled).is_empty(),
        "the enqueuer did not sample its trace"
    );
    let services: Vec<String> = received
        .lock()
        .expect("lock")
        .iter()
        .map(|(s, _)| s.clone())
        .collect();
    assert_eq!(services, ["remuda"], "the default service name");
}
