//! remuda in the `tracing` ecosystem, under a real `tracing-opentelemetry` layer exporting to
//! the OpenTelemetry SDK's in-memory exporter: a job enqueued inside the caller's `tracing`
//! span is sent in a `send <queue>` span (PRODUCER) under it and carries the send's context;
//! its attempt runs in a `tracing` span (CONSUMER, named after the kind) under the send, the
//! task's own spans nest under the attempt's, and the job it enqueues continues that trace.

mod common;

use common::{fast_config, setup, start};
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use remuda::{Client, JobContext, NewJob, Task, TaskError, Worker};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// Does its work in a span of its own, then enqueues a `leaf` job.
#[derive(Clone, Default)]
struct Parent {
    client: Arc<Mutex<Option<Client>>>,
}

impl Task for Parent {
    const KIND: &'static str = "parent";
    type Args = Value;
    type Output = i64;

    async fn run(&self, _ctx: JobContext, _args: Value) -> Result<i64, TaskError> {
        async {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        .instrument(tracing::info_span!("the task's own work"))
        .await;
        let client = self.client.lock().ok().and_then(|c| c.clone());
        let client = client.ok_or_else(|| TaskError::new("NO_CLIENT", "no client"))?;
        let leaf =
            NewJob::new("leaf", &json!({})).map_err(|e| TaskError::new("BAD", e.to_string()))?;
        client
            .insert(leaf)
            .await
            .map_err(|e| TaskError::new("ENQUEUE", e.to_string()))
    }
}

/// Runs job `id` (a `parent`) on a worker of `config` until it completes.
async fn run_parent(client: &Client, config: remuda::WorkerConfig, id: i64) -> remuda::Job {
    let parent = Parent::default();
    *parent.client.lock().expect("lock") = Some(client.clone());
    let running = start(Worker::new(client.clone()).config(config).register(parent));
    let done = client
        .wait(id, Duration::from_secs(30))
        .await
        .expect("done");
    running.shutdown().await;
    assert_eq!(done.state, remuda::JobState::Completed, "{done:?}");
    done
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found: Vec<&SpanData> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "{name}: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

fn traceparent_of(span: &SpanData) -> String {
    format!(
        "00-{}-{}-{:02x}",
        span.span_context.trace_id(),
        span.span_context.span_id(),
        span.span_context.trace_flags().to_u8()
    )
}

/// Installs a `tracing-opentelemetry` layer exporting to memory, for the whole process (the
/// worker's tasks run on every thread of the runtime; each test is a process of its own).
fn install() -> (SdkTracerProvider, InMemorySpanExporter) {
    let exported = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exported.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("tests"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .expect("the only subscriber");
    (provider, exported)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_sent_in_a_tracing_span_carries_the_send_and_the_tasks_own_spans_nest_under_its_attempt(
) {
    let (provider, exported) = install();
    let (_db, client) = setup().await;
    let id = client
        .insert(NewJob::new("parent", &json!({})).expect("job"))
        .instrument(tracing::info_span!("request"))
        .await
        .expect("enqueue");
    let done = run_parent(&client, fast_config(), id).await;
    let leaf: i64 = match &done.result {
        Some(remuda::JobResult::Ok(v)) => serde_json::from_value(v.clone()).expect("an id"),
        other => panic!("no result: {other:?}"),
    };
    let _ = provider.force_flush();
    let spans = exported.get_finished_spans().expect("spans");

    let request = named(&spans, "request");
    let send = spans
        .iter()
        .find(|s| s.name == "send default" && s.parent_span_id == request.span_context.span_id())
        .expect("the send under the request");
    assert_eq!(send.span_kind, SpanKind::Producer);
    assert_eq!(
        send.parent_span_id,
        request.span_context.span_id(),
        "under the caller's span"
    );
    assert_eq!(
        send.span_context.trace_id(),
        request.span_context.trace_id()
    );
    let attribute = |span: &SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(
        attribute(send, "messaging.system").as_deref(),
        Some("remuda")
    );
    assert_eq!(
        attribute(send, "messaging.destination.name").as_deref(),
        Some("default")
    );
    assert_eq!(
        attribute(send, "messaging.message.id"),
        Some(id.to_string())
    );
    let stored = client.job(id).await.expect("job").expect("exists").trace;
    assert_eq!(
        stored.map(|t| t.traceparent),
        Some(traceparent_of(send)),
        "the job carries the send's context"
    );

    let attempt = named(&spans, "parent");
    assert_eq!(attempt.span_kind, SpanKind::Consumer);
    assert_eq!(
        attempt.parent_span_id,
        send.span_context.span_id(),
        "the attempt descends from the send"
    );
    assert_eq!(
        attempt.span_context.trace_id(),
        request.span_context.trace_id()
    );
    assert_eq!(attribute(attempt, "remuda.job.id"), Some(id.to_string()));
    let own = named(&spans, "the task's own work");
    assert_eq!(
        own.parent_span_id,
        attempt.span_context.span_id(),
        "the task's spans nest under the attempt"
    );

    // the leaf was sent from inside the attempt: its send is the attempt's child, and the
    // leaf carries that send's context
    let sends: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "send default" && s.parent_span_id == attempt.span_context.span_id())
        .collect();
    assert_eq!(sends.len(), 1, "{spans:?}");
    let stored = client.job(leaf).await.expect("job").expect("exists").trace;
    assert_eq!(
        stored.map(|t| t.traceparent),
        Some(traceparent_of(sends[0]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_send_is_an_error_and_a_linked_attempt_roots_its_own_trace() {
    let (provider, exported) = install();
    let (_db, client) = setup().await;
    let too_big = json!({"blob": "x".repeat(2 * 1024 * 1024)});
    let refused = client
        .insert(NewJob::new("parent", &too_big).expect("job"))
        .instrument(tracing::info_span!("request"))
        .await;
    assert!(refused.is_err(), "over the args limit");
    let id = client
        .insert(NewJob::new("parent", &json!({})).expect("job"))
        .instrument(tracing::info_span!("request"))
        .await
        .expect("enqueue");
    let mut config = fast_config();
    config.telemetry.propagation = remuda::telemetry::Propagation::Link;
    run_parent(&client, config, id).await;
    let _ = provider.force_flush();
    let spans = exported.get_finished_spans().expect("spans");

    let sends: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Producer)
        .collect();
    let failed = sends
        .iter()
        .filter(|s| matches!(s.status, opentelemetry::trace::Status::Error { .. }))
        .count();
    assert_eq!(failed, 1, "the refused send ends in an error: {sends:?}");
    let send = sends
        .iter()
        .find(|s| {
            s.attributes.iter().any(|kv| {
                kv.key.as_str() == "messaging.message.id" && kv.value.to_string() == id.to_string()
            })
        })
        .expect("the send of the job, its id a string");
    let attempt = named(&spans, "parent");
    assert_eq!(attempt.span_kind, SpanKind::Consumer);
    assert_eq!(
        attempt.parent_span_id,
        opentelemetry::trace::SpanId::INVALID,
        "a root"
    );
    assert_ne!(
        attempt.span_context.trace_id(),
        send.span_context.trace_id()
    );
    let links: Vec<_> = attempt
        .links
        .iter()
        .map(|l| l.span_context.span_id())
        .collect();
    assert_eq!(links, [send.span_context.span_id()], "linked to its send");
}
