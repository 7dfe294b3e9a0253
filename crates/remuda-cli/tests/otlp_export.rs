//! Spans of attempts exported over OTLP (HTTP/protobuf) by `remuda worker` to a real receiver
//! on 127.0.0.1 that decodes them with the protocol's own definitions: a job that failed twice
//! and then completed gives three spans under the enqueuer's span, and a three-node workflow
//! one span per node under the run's; a job outside any trace gets a root span (one trace for
//! all its attempts), and one whose enqueuer did not sample its trace none; the sampler, gzip,
//! retries of 503 and 429, a refusal, a slow collector and a silent one at the worker's stop,
//! and the counts of `/metrics`.

mod common;

use common::{enqueue, migrated, remuda, wait_for_state, TempDir, WorkerProcess};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const ENQUEUER: &str = "00f067aa0ba902b7";

/// What the receiver took (answered with a success): each span with the `service.name` of
/// its resource.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// How the receiver answers its `n`th request (from 0): a status, after a delay, with a
/// `Retry-After` of so many seconds.
#[derive(Clone, Copy)]
struct Reply {
    status: u16,
    delay: Duration,
    retry_after: Option<u64>,
}

const OK: Reply = Reply {
    status: 200,
    delay: Duration::ZERO,
    retry_after: None,
};

/// A request as it came: its `content-encoding`, the answer it got, and when.
#[derive(Clone, Debug)]
struct Request {
    encoding: Option<String>,
    status: u16,
    at: std::time::Instant,
}

struct Receiver {
    port: u16,
    received: Received,
    requests: Arc<Mutex<Vec<Request>>>,
}

/// An OTLP/HTTP receiver answering 200 at once.
async fn receiver() -> (u16, Received) {
    let r = receiver_with(|_| OK).await;
    (r.port, r.received)
}

/// An OTLP/HTTP receiver: decodes every `POST /v1/traces` body (gunzipped when it says it is
/// gzipped) and answers as `reply` says; the spans of a request count as received once a
/// success answer was written.
async fn receiver_with(reply: impl Fn(usize) -> Reply + Send + Sync + 'static) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received: Received = Arc::default();
    let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
    let (store, log) = (received.clone(), requests.clone());
    let reply = Arc::new(reply);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (store, log, reply) = (store.clone(), log.clone(), reply.clone());
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
                    let header = |name: &str| {
                        head.lines()
                            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
                    };
                    let length: usize = header("content-length:")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let encoding = header("content-encoding:");
                    while data.len() < end + 4 + length {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => data.extend_from_slice(&buf[..n]),
                        }
                    }
                    let mut body: Vec<u8> = data.drain(..end + 4 + length).skip(end + 4).collect();
                    if !head.starts_with("post /v1/traces") {
                        return;
                    }
                    let answer = {
                        let mut log = log.lock().expect("lock");
                        let answer = reply(log.len());
                        log.push(Request {
                            encoding: encoding.clone(),
                            status: answer.status,
                            at: std::time::Instant::now(),
                        });
                        answer
                    };
                    if encoding.as_deref() == Some("gzip") {
                        let mut plain = Vec::new();
                        flate2::read::GzDecoder::new(body.as_slice())
                            .read_to_end(&mut plain)
                            .expect("a gzip body");
                        body = plain;
                    }
                    let request = ExportTraceServiceRequest::decode(body.as_slice())
                        .expect("an OTLP export request");
                    tokio::time::sleep(answer.delay).await;
                    let retry = answer
                        .retry_after
                        .map(|s| format!("retry-after: {s}\r\n"))
                        .unwrap_or_default();
                    let head = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: application/x-protobuf\r\n{retry}content-length: 0\r\n\r\n",
                        answer.status
                    );
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    if answer.status != 200 {
                        continue;
                    }
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
            });
        }
    });
    Receiver {
        port,
        received,
        requests,
    }
}

/// A worker exporting to `port` with `env` set, its stderr in `dir/worker.log`.
fn exporting_worker(
    db: &common::TestDatabase,
    dir: &TempDir,
    port: u16,
    env: &[(&str, &str)],
    args: &[&str],
) -> WorkerProcess {
    configured_worker(db, dir, &config(dir), port, env, args)
}

/// A worker of `config` exporting to `port` with `env` set, its stderr in `dir/worker.log`.
fn configured_worker(
    db: &common::TestDatabase,
    dir: &TempDir,
    config: &std::path::Path,
    port: u16,
    env: &[(&str, &str)],
    args: &[&str],
) -> WorkerProcess {
    let mut command = tokio::process::Command::new(common::BIN);
    command.env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{port}"),
    );
    for (k, v) in env {
        command.env(k, v);
    }
    let log = dir.path().join("worker.log");
    WorkerProcess::spawn(command, config, args, db.conninfo(), &log)
}

fn config(dir: &TempDir) -> std::path::PathBuf {
    config_with(dir, "")
}

/// The tests' config with `extra` added at its end.
fn config_with(dir: &TempDir, extra: &str) -> std::path::PathBuf {
    let text = format!("{CONFIG}{extra}");
    dir.write("remuda.toml", &text)
}

const CONFIG: &str = r#"
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

[tasks.noop]
builtin = "noop"
"#;

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

/// The spans of job `id`'s attempts, by attempt.
fn spans_of(received: &Received, id: i64) -> Vec<Span> {
    let mut spans: Vec<Span> = received
        .lock()
        .expect("lock")
        .iter()
        .filter(|(_, s)| s.kind == SpanKind::Consumer as i32 && int(s, "remuda.job.id") == id)
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
    let handed = handed_trace(&seen);
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

/// The value of a counter in a worker's `/metrics`, once it is there.
async fn counter(port: u16, name: &str) -> Option<u64> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let text = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// What an `env_trace` job's task was handed (its result).
fn handed_trace(seen: &serde_json::Value) -> String {
    seen["result"]["ok"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn log_of(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.path().join("worker.log")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_sent_gzipped_when_asked_and_plain_when_compression_is_none() {
    let db = migrated().await;
    for (compression, encoding) in [
        ("gzip", Some("gzip")),
        ("none", None),
        ("GZIP", Some("gzip")),
    ] {
        let r = receiver_with(|_| OK).await;
        let dir = TempDir::new();
        let worker = exporting_worker(
            &db,
            &dir,
            r.port,
            &[("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", compression)],
            &[],
        );
        let job = enqueue(&db, &["step"]).await;
        wait_for_state(&db, job, &["completed"], Duration::from_secs(30)).await;
        assert!(worker.stop().await.success());
        assert_eq!(
            spans_of(&r.received, job).len(),
            1,
            "{compression}: {}",
            log_of(&dir)
        );
        let requests = r.requests.lock().expect("lock").clone();
        assert!(!requests.is_empty());
        for request in requests {
            assert_eq!(request.encoding.as_deref(), encoding, "{compression}");
        }
        assert!(
            !log_of(&dir).contains("telemetry"),
            "{compression}: nothing to say: {}",
            log_of(&dir)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_answering_503_then_429_then_200_gets_the_span_and_the_counts_say_what_became_of_each(
) {
    let db = migrated().await;
    let r = receiver_with(|n| match n {
        0 => Reply { status: 503, ..OK },
        1 => Reply {
            status: 429,
            retry_after: Some(4),
            ..OK
        },
        _ => OK,
    })
    .await;
    let dir = TempDir::new();
    let metrics = free_port();
    let bind = format!("127.0.0.1:{metrics}");
    let worker = exporting_worker(&db, &dir, r.port, &[], &["--metrics-bind", &bind]);
    let job = enqueue(&db, &["step"]).await;
    common::until(
        "the span taken on the third try",
        Duration::from_secs(20),
        async || spans_of(&r.received, job).len() == 1,
    )
    .await;
    let requests = r.requests.lock().expect("lock").clone();
    let statuses: Vec<u16> = requests.iter().map(|q| q.status).collect();
    assert_eq!(statuses, [503, 429, 200]);
    // the 429's Retry-After (4 s) is waited, not the backoff's 1.5 s
    let waited = requests[2].at - requests[1].at;
    assert!(waited >= Duration::from_secs(4), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    common::until("the export counted", Duration::from_secs(10), async || {
        counter(metrics, "remuda_spans_exported_total").await == Some(1)
    })
    .await;
    assert_eq!(counter(metrics, "remuda_spans_failed_total").await, Some(0));
    assert_eq!(
        counter(metrics, "remuda_spans_dropped_total").await,
        Some(0)
    );
    assert!(worker.stop().await.success());

    // a collector that refuses the request (400) is not asked again: a failure, counted
    let r = receiver_with(|_| Reply { status: 400, ..OK }).await;
    let dir = TempDir::new();
    let metrics = free_port();
    let bind = format!("127.0.0.1:{metrics}");
    let worker = exporting_worker(&db, &dir, r.port, &[], &["--metrics-bind", &bind]);
    let job = enqueue(&db, &["step"]).await;
    wait_for_state(&db, job, &["completed"], Duration::from_secs(30)).await;
    common::until("the refusal counted", Duration::from_secs(10), async || {
        counter(metrics, "remuda_spans_failed_total").await == Some(1)
    })
    .await;
    assert_eq!(
        counter(metrics, "remuda_spans_exported_total").await,
        Some(0)
    );
    assert!(worker.stop().await.success());
    assert_eq!(r.requests.lock().expect("lock").len(), 1, "asked once");
    assert!(log_of(&dir).contains("answered 400"), "{}", log_of(&dir));
}

/// Enqueues `n` no-op jobs and waits for all to complete.
async fn run_noops(db: &common::TestDatabase, n: usize) {
    let client = db.client().await.expect("client");
    let jobs: Vec<remuda::NewJob> = (0..n)
        .map(|_| remuda::NewJob::from_json("noop", remuda::Jsonb("{}".into())))
        .collect();
    client.insert_many(&jobs).await.expect("enqueue");
    common::until("every job completed", Duration::from_secs(60), async || {
        common::count(
            &client,
            "SELECT count(*) FROM remuda.jobs WHERE state = 'completed' AND kind = 'noop'",
        )
        .await
            == n as i64
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_collector_gets_every_span_at_the_stop_and_one_that_never_answers_is_said_with_its_count(
) {
    let db = migrated().await;
    // each answer 2 s late, batches of 20: the 15 batches of 300 spans would take half a
    // minute one after another; a request in flight at the stop and the rest go out side by
    // side, within the stop's 5 s
    let r = receiver_with(|_| Reply {
        delay: Duration::from_secs(2),
        ..OK
    })
    .await;
    let dir = TempDir::new();
    let worker = exporting_worker(
        &db,
        &dir,
        r.port,
        &[("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "20")],
        &[],
    );
    run_noops(&db, 300).await;
    assert!(worker.stop().await.success());
    let ids: std::collections::HashSet<i64> = r
        .received
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, s)| int(s, "remuda.job.id"))
        .collect();
    assert_eq!(ids.len(), 300, "every span taken: {}", log_of(&dir));
    assert!(!log_of(&dir).contains("not exported"), "{}", log_of(&dir));

    // a collector that takes the requests and never answers: the stop waits for it until its
    // deadline, then says how many spans did not go
    let db = migrated().await;
    let r = receiver_with(|_| Reply {
        delay: Duration::from_secs(3600),
        ..OK
    })
    .await;
    let dir = TempDir::new();
    let worker = exporting_worker(&db, &dir, r.port, &[], &[]);
    run_noops(&db, 40).await;
    let stopping = std::time::Instant::now();
    assert!(worker.stop().await.success());
    assert!(
        stopping.elapsed() < Duration::from_secs(15),
        "{:?}",
        stopping.elapsed()
    );
    assert!(
        log_of(&dir).contains("40 spans not exported"),
        "{}",
        log_of(&dir)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untraced_jobs_attempts_share_one_trace_and_the_sampler_decides_what_is_exported() {
    let db = migrated().await;
    let (port, received) = receiver().await;
    let dir = TempDir::new();
    let worker = exporting_worker(&db, &dir, port, &[], &[]);
    let flaky = enqueue(&db, &["flaky"]).await;
    wait_for_state(&db, flaky, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());
    let spans = spans_of(&received, flaky);
    assert_eq!(spans.len(), 3, "{spans:?}");
    for span in &spans {
        assert_eq!(
            span.trace_id, spans[0].trace_id,
            "one trace for every attempt"
        );
        assert!(span.parent_span_id.is_empty(), "each attempt a root");
    }

    // the enqueuer's decision, and a ratio of 0 for the jobs outside any trace
    let sampled = format!("00-{TRACE}-{ENQUEUER}-01");
    let (port, received) = receiver().await;
    let dir = TempDir::new();
    let worker = exporting_worker(
        &db,
        &dir,
        port,
        &[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ],
        &[],
    );
    let parented = enqueue(&db, &["env_trace", "--traceparent", &sampled]).await;
    let root = enqueue(&db, &["env_trace"]).await;
    wait_for_state(&db, parented, &["completed"], Duration::from_secs(30)).await;
    let seen = wait_for_state(&db, root, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());
    assert_eq!(
        spans_of(&received, parented).len(),
        1,
        "the enqueuer sampled it"
    );
    assert!(
        spans_of(&received, root).is_empty(),
        "the ratio 0 took none"
    );
    let handed = handed_trace(&seen);
    assert!(
        handed.ends_with("-00"),
        "the task is told it is not sampled: {handed}"
    );

    // always_off: nothing, whatever the enqueuer decided; the task is told
    let (port, received) = receiver().await;
    let dir = TempDir::new();
    let worker = exporting_worker(
        &db,
        &dir,
        port,
        &[("OTEL_TRACES_SAMPLER", "always_off")],
        &[],
    );
    let parented = enqueue(&db, &["env_trace", "--traceparent", &sampled]).await;
    let seen = wait_for_state(&db, parented, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());
    assert!(received.lock().expect("lock").is_empty());
    let handed = handed_trace(&seen);
    assert!(
        handed.starts_with(&format!("00-{TRACE}-")) && handed.ends_with("-00"),
        "{handed}"
    );

    // a sampler nobody knows is said, and the default used
    let (port, received) = receiver().await;
    let dir = TempDir::new();
    let worker = exporting_worker(
        &db,
        &dir,
        port,
        &[("OTEL_TRACES_SAMPLER", "sometimes")],
        &[],
    );
    let job = enqueue(&db, &["step"]).await;
    wait_for_state(&db, job, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());
    assert_eq!(spans_of(&received, job).len(), 1);
    assert!(
        log_of(&dir).contains("\"sometimes\" is not a sampler"),
        "{}",
        log_of(&dir)
    );
}

/// The enqueue spans received.
fn sends(received: &Received) -> Vec<Span> {
    let all = received.lock().expect("lock");
    let sends = all
        .iter()
        .filter(|(_, s)| s.kind == SpanKind::Producer as i32);
    sends.map(|(_, s)| s.clone()).collect()
}

/// `remuda enqueue ARGS --json` with spans exported to `port`: the job's id.
async fn traced_enqueue(db: &common::TestDatabase, port: u16, args: &[&str]) -> i64 {
    let output = tokio::process::Command::new(common::BIN)
        .arg("--database-url")
        .arg(db.conninfo())
        .arg("enqueue")
        .args(args)
        .arg("--json")
        .env_remove("DATABASE_URL")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .output()
        .await
        .expect("run remuda");
    assert_eq!(common::code(&output), 0, "{}", common::stderr(&output));
    common::json(&output)["id"].as_i64().expect("id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_is_a_producer_span_under_its_caller_and_the_attempt_its_child_or_a_linked_root()
{
    let db = migrated().await;
    let (port, received) = receiver().await;
    let enqueuer = format!("00-{TRACE}-{ENQUEUER}-01");
    // the CLI's enqueue makes its span and sends it before it exits
    let sent = traced_enqueue(&db, port, &["step", "--traceparent", &enqueuer]).await;
    let send = sends(&received);
    assert_eq!(send.len(), 1, "{send:?}");
    let send = &send[0];
    assert_eq!(send.name, "send default");
    assert_eq!(hex(&send.trace_id), TRACE);
    assert_eq!(
        hex(&send.parent_span_id),
        ENQUEUER,
        "under the caller's span"
    );
    assert_eq!(text(send, "messaging.system"), "remuda");
    assert_eq!(text(send, "messaging.operation.type"), "send");
    assert_eq!(text(send, "messaging.destination.name"), "default");
    assert_eq!(text(send, "messaging.message.id"), sent.to_string());
    let job = remuda(&db, &["job", &sent.to_string(), "--json"]).await;
    let stored = common::json(&job)["trace"]["traceparent"].clone();
    assert_eq!(
        stored,
        format!("00-{TRACE}-{}-01", hex(&send.span_id)),
        "the job carries the send span's context"
    );
    // a job enqueued without a span of its own (the caller's context alone)
    let plain = enqueue(&db, &["step", "--traceparent", &enqueuer]).await;

    // by default the attempt descends from the send
    let dir = TempDir::new();
    let worker = exporting_worker(&db, &dir, port, &[], &[]);
    wait_for_state(&db, sent, &["completed"], Duration::from_secs(30)).await;
    wait_for_state(&db, plain, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());
    let attempt = spans_of(&received, sent);
    assert_eq!(attempt.len(), 1, "{attempt:?}");
    assert_eq!(hex(&attempt[0].trace_id), TRACE);
    assert_eq!(hex(&attempt[0].parent_span_id), hex(&send.span_id));
    assert!(attempt[0].links.is_empty());

    // linked: the attempt is the root of the job's own trace, linked to its enqueuer
    let linked = enqueue(&db, &["env_trace", "--traceparent", &enqueuer]).await;
    let dir = TempDir::new();
    let config = config_with(&dir, "\n[telemetry]\npropagation = \"link\"\n");
    let worker = configured_worker(&db, &dir, &config, port, &[], &[]);
    let seen = wait_for_state(&db, linked, &["completed"], Duration::from_secs(30)).await;
    assert!(worker.stop().await.success());
    let attempt = spans_of(&received, linked);
    assert_eq!(attempt.len(), 1, "{attempt:?}");
    let attempt = &attempt[0];
    assert!(attempt.parent_span_id.is_empty(), "a root");
    assert_ne!(hex(&attempt.trace_id), TRACE, "a trace of the job's own");
    assert_eq!(attempt.links.len(), 1);
    assert_eq!(hex(&attempt.links[0].trace_id), TRACE);
    assert_eq!(hex(&attempt.links[0].span_id), ENQUEUER);
    assert_eq!(
        handed_trace(&seen),
        format!("00-{}-{}-01", hex(&attempt.trace_id), hex(&attempt.span_id)),
        "the task is handed the attempt's own trace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_of_the_api_is_a_server_span_under_its_callers_and_its_job_continues_it() {
    use tokio::io::AsyncBufReadExt;
    let db = migrated().await;
    let (port, received) = receiver().await;
    let mut dashboard = tokio::process::Command::new(common::BIN)
        .args(["--database-url", db.conninfo()])
        .args(["dashboard", "--bind", "127.0.0.1:0", "--no-auth"])
        .env_remove("DATABASE_URL")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the dashboard");
    let stderr = dashboard.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let address = loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("it says where it listens")
            .expect("read")
            .expect("a line");
        if let Some(rest) = line.strip_prefix("remuda dashboard on ") {
            break rest
                .split_whitespace()
                .next()
                .expect("an address")
                .to_string();
        }
    };
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let made = http
        .post(format!("{address}api/v1/jobs"))
        .header("traceparent", format!("00-{TRACE}-{ENQUEUER}-01"))
        .json(&serde_json::json!({"kind": "step", "args": {}}))
        .send()
        .await
        .expect("request");
    assert_eq!(made.status().as_u16(), 201);
    let id = made.json::<serde_json::Value>().await.expect("json")["id"]
        .as_i64()
        .expect("an id");
    let missing = http
        .post(format!("{address}api/v1/jobs/{}/retry", id + 1000))
        .send()
        .await
        .expect("request");
    assert_eq!(missing.status().as_u16(), 404);
    let read = http.get(format!("{address}api/v1/jobs/{id}")).send().await;
    assert_eq!(read.expect("request").status().as_u16(), 200);
    common::terminate(&mut dashboard, Duration::from_secs(10)).await;

    let spans: Vec<Span> = received
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, s)| s.clone())
        .collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["POST /api/v1/jobs", "POST /api/v1/jobs/{id}/retry"],
        "a span per write, sent before the dashboard exits; none for a read"
    );
    let enqueue = &spans[0];
    assert_eq!(enqueue.kind, SpanKind::Server as i32);
    assert_eq!(hex(&enqueue.trace_id), TRACE);
    assert_eq!(
        hex(&enqueue.parent_span_id),
        ENQUEUER,
        "under the caller's span"
    );
    assert_eq!(text(enqueue, "http.request.method"), "POST");
    assert_eq!(text(enqueue, "http.route"), "/api/v1/jobs");
    assert_eq!(int(enqueue, "http.response.status_code"), 201);
    let job = remuda(&db, &["job", &id.to_string(), "--json"]).await;
    assert_eq!(
        common::json(&job)["trace"]["traceparent"],
        format!("00-{TRACE}-{}-01", hex(&enqueue.span_id)),
        "the job continues the request's span"
    );
    let retry = &spans[1];
    assert!(retry.parent_span_id.is_empty(), "no caller: a root");
    assert_eq!(int(retry, "http.response.status_code"), 404);
    assert!(
        retry.status.is_none(),
        "a client's error is not the server's"
    );
}
