//! Spans of job attempts exported over OTLP (HTTP/protobuf), one per attempt: under the trace
//! the job continues ([`crate::trace`]) as a child of the enqueuer's span, with the span id
//! every part of remuda derives for the attempt, so the task's own spans nest under it.
//!
//! Off unless an endpoint is set (`[telemetry] endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS` and the other `OTEL_*` variables
//! of the exporter apply). Off, a worker does nothing per attempt. On, each finished attempt
//! hands its span to a background task that sends them in batches; a full queue drops spans
//! rather than slow the jobs down, and an unreachable collector costs a warning, never a job.

use crate::trace::TraceContext;
use chrono::{DateTime, Utc};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use std::time::Duration;
use tokio::sync::mpsc;

/// Spans waiting to be sent; beyond it new ones are dropped.
const QUEUE: usize = 8192;
/// Most spans per request.
const BATCH: usize = 512;
/// Longest a span waits for its batch to fill.
const LINGER: Duration = Duration::from_millis(500);
/// Longest error message a span carries (the job keeps it whole).
const MAX_MESSAGE: usize = 2048;

/// Where spans go (`[telemetry]` in the worker config). Unset fields fall back to the
/// standard `OTEL_*` environment variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The collector's base URL (`http://collector:4318`): spans are POSTed to
    /// `<endpoint>/v1/traces`.
    pub endpoint: Option<String>,
    /// `service.name` of the spans (default `OTEL_SERVICE_NAME`, else `remuda`).
    pub service_name: Option<String>,
}

/// An `OTEL_*` variable that is set and not blank.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl TelemetryConfig {
    /// Whether spans are exported: an endpoint is configured here or in the environment, and
    /// neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says otherwise.
    pub fn enabled(&self) -> bool {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none")
        {
            return false;
        }
        self.endpoint().is_some()
            || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
    }

    fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref().filter(|e| !e.trim().is_empty())
    }

    /// Why spans cannot be exported as configured, if they cannot: an endpoint that is not
    /// an http(s) URL, or a protocol other than HTTP/protobuf.
    fn problem(&self) -> Option<String> {
        let endpoints = [
            ("[telemetry] endpoint", self.endpoint().map(str::to_string)),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            ),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                env("OTEL_EXPORTER_OTLP_ENDPOINT"),
            ),
        ];
        // the first one set is the one used
        if let Some((what, Some(url))) = endpoints.into_iter().find(|(_, v)| v.is_some()) {
            let ok = url::Url::parse(url.trim())
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                return Some(format!(
                    "{what} {url:?} is not an http:// or https:// URL (such as http://collector:4318)"
                ));
            }
        }
        let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
        match protocol.as_deref().map(str::trim) {
            None | Some("http/protobuf") => None,
            Some(other) => Some(format!(
                "the OTLP protocol {other:?} is not supported: remuda exports over http/protobuf (port 4318)"
            )),
        }
    }
}

/// The context of an attempt of a job that continues no trace, when spans are exported: a
/// trace of its own (random), with the attempt's span as its root, so that the task's spans
/// and what it enqueues join it.
pub(crate) fn root_trace(span_id: &str) -> TraceContext {
    TraceContext {
        traceparent: format!("00-{:032x}-{span_id}-01", fastrand::u128(1..)),
        tracestate: None,
    }
}

/// One finished attempt, as its span tells it.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub job_id: i64,
    pub kind: String,
    pub queue: String,
    pub attempt: i32,
    pub worker: String,
    /// When it could run, and when it was claimed (the span starts here).
    pub run_at: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
    /// The attempt's own context, as the task was handed it (its span id as parent id).
    pub context: TraceContext,
    /// The enqueuer's span, the attempt's parent (`None`: the attempt is a root span).
    pub parent: Option<String>,
    /// `completed`, `error`, `snoozed`, `stopped`.
    pub outcome: &'static str,
    /// The error's code and message, when it ended in one.
    pub error: Option<(String, String)>,
}

/// The sending side: cheap to clone, one per worker.
#[derive(Clone, Debug)]
pub(crate) struct Spans {
    tx: mpsc::Sender<SpanData>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Spans {
    /// Starts the exporter when telemetry is on: the handle, and the task that sends (it ends
    /// once `closing` is cancelled, after sending what is queued). A configuration that
    /// cannot work is said once, and the worker runs without.
    pub(crate) fn start(
        config: &TelemetryConfig,
        closing: tokio_util::sync::CancellationToken,
    ) -> Option<(Spans, tokio::task::JoinHandle<()>)> {
        if !config.enabled() {
            return None;
        }
        if let Some(problem) = config.problem() {
            tracing::warn!("remuda telemetry: {problem}; spans are not exported");
            return None;
        }
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
        if let Some(endpoint) = config.endpoint() {
            use opentelemetry_otlp::WithExportConfig;
            builder = builder.with_endpoint(format!(
                "{}/v1/traces",
                endpoint.trim().trim_end_matches('/')
            ));
        }
        let mut exporter = match builder.build() {
            Ok(exporter) => exporter,
            Err(e) => {
                tracing::warn!("remuda telemetry: cannot export spans ({e}); running without");
                return None;
            }
        };
        // the configured name, else OTEL_SERVICE_NAME or service.name in
        // OTEL_RESOURCE_ATTRIBUTES (which the builder reads), else remuda
        let mut resource = opentelemetry_sdk::Resource::builder();
        let from_env = env("OTEL_SERVICE_NAME").is_some()
            || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| {
                a.split(',')
                    .any(|kv| kv.trim().starts_with("service.name="))
            });
        match &config.service_name {
            Some(name) => resource = resource.with_service_name(name.clone()),
            None if !from_env => resource = resource.with_service_name("remuda"),
            None => {}
        }
        exporter.set_resource(&resource.build());
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(send(exporter, rx, closing));
        let spans = Spans {
            tx,
            dropped: Default::default(),
        };
        Some((spans, task))
    }

    /// Queues the span of a finished attempt (none for a trace its enqueuer did not sample;
    /// dropped, and counted, when the queue is full: the collector does not keep up).
    pub(crate) fn record(&self, attempt: Attempt) {
        let Some(span) = span_of(attempt) else {
            return;
        };
        if self.tx.try_send(span).is_err() {
            use std::sync::atomic::Ordering;
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!("remuda telemetry: {dropped} spans dropped so far: the collector does not keep up with the attempts");
            }
        }
    }
}

/// Sends the spans of `rx` in batches until `closing`, then what is left (in batches too).
async fn send(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<SpanData>,
    closing: tokio_util::sync::CancellationToken,
) {
    let mut warned = false;
    loop {
        let first = tokio::select! {
            span = rx.recv() => span,
            _ = closing.cancelled() => None,
        };
        let mut batch: Vec<SpanData> = first.into_iter().collect();
        if closing.is_cancelled() {
            while let Ok(span) = rx.try_recv() {
                batch.push(span);
            }
            while !batch.is_empty() {
                let rest = batch.split_off(batch.len().min(BATCH));
                let _ = exporter.export(batch).await;
                batch = rest;
            }
            return;
        }
        if batch.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) | Err(_) => break,
            }
        }
        let n = batch.len();
        match exporter.export(batch).await {
            Ok(()) => warned = false,
            Err(e) if !warned => {
                tracing::warn!("remuda telemetry: {n} spans not exported: {e}");
                warned = true;
            }
            Err(e) => tracing::debug!("remuda telemetry: {n} spans not exported: {e}"),
        }
    }
}

/// The span of an attempt; `None` for a trace its enqueuer did not sample.
fn span_of(a: Attempt) -> Option<SpanData> {
    if !a.context.sampled() {
        return None;
    }
    let trace_id = TraceId::from_hex(a.context.trace_id()).ok()?;
    let span_id = SpanId::from_hex(a.context.parent_id()).ok()?;
    let parent = match &a.parent {
        Some(p) => SpanId::from_hex(p).ok()?,
        None => SpanId::INVALID,
    };
    let state = a
        .context
        .tracestate
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let wait_ms = (a.started_at - a.run_at).num_milliseconds().max(0);
    let mut attributes = vec![
        KeyValue::new("remuda.job.id", a.job_id),
        KeyValue::new("remuda.job.kind", a.kind.clone()),
        KeyValue::new("remuda.queue", a.queue),
        KeyValue::new("remuda.attempt", i64::from(a.attempt)),
        KeyValue::new("remuda.worker", a.worker),
        KeyValue::new("remuda.queue_wait_ms", wait_ms),
        KeyValue::new("remuda.outcome", a.outcome),
    ];
    let status = match a.error {
        Some((code, message)) => {
            attributes.push(KeyValue::new("remuda.error.code", code.clone()));
            let mut message = format!("{code}: {message}");
            if message.len() > MAX_MESSAGE {
                let mut end = MAX_MESSAGE;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message.truncate(end);
                message.push('…');
            }
            Status::error(message)
        }
        None => Status::Unset,
    };
    let start_time: std::time::SystemTime = a.started_at.into();
    // the claim's time is the database's, the end this worker's: a worker clock behind the
    // database's must not end a span before it starts
    let end_time = std::time::SystemTime::now().max(start_time);
    Some(SpanData {
        span_context: SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, false, state),
        parent_span_id: parent,
        parent_span_is_remote: parent != SpanId::INVALID,
        span_kind: SpanKind::Consumer,
        name: a.kind.into(),
        start_time,
        end_time,
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("remuda")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(context: TraceContext, error: Option<(String, String)>) -> Attempt {
        let now = Utc::now();
        Attempt {
            job_id: 7,
            kind: "resize".into(),
            queue: "media".into(),
            attempt: 2,
            worker: "w".into(),
            run_at: now,
            // a claim time ahead of this clock (the database's runs ahead)
            started_at: now + chrono::Duration::seconds(5),
            context,
            parent: Some("00f067aa0ba902b7".into()),
            outcome: "error",
            error,
        }
    }

    #[test]
    fn an_endpoint_that_is_not_an_http_url_is_a_problem_said_before_anything_is_sent() {
        let bad = TelemetryConfig {
            endpoint: Some("collector:4318".into()),
            service_name: None,
        };
        let problem = bad.problem().expect("a problem");
        assert!(
            problem.contains("not an http:// or https:// URL"),
            "{problem}"
        );
        let good = TelemetryConfig {
            endpoint: Some("http://127.0.0.1:4318".into()),
            service_name: None,
        };
        assert_eq!(good.problem(), None);
        let blank = TelemetryConfig {
            endpoint: Some("  ".into()),
            service_name: None,
        };
        assert_eq!(blank.endpoint(), None, "a blank endpoint is none");
    }

    #[test]
    fn a_span_carries_the_attempts_ids_a_bounded_error_and_never_ends_before_it_starts() {
        let context = TraceContext::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01",
            None,
        )
        .expect("valid");
        let long = "x".repeat(10 * MAX_MESSAGE);
        let span = span_of(attempt(context.clone(), Some(("BIG".into(), long)))).expect("sampled");
        assert_eq!(
            span.span_context.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex")
        );
        assert_eq!(
            span.span_context.span_id(),
            SpanId::from_hex("b7ad6b7169203331").expect("hex")
        );
        assert_eq!(
            span.parent_span_id,
            SpanId::from_hex("00f067aa0ba902b7").expect("hex")
        );
        match &span.status {
            Status::Error { description } => {
                assert!(
                    description.len() <= MAX_MESSAGE + '…'.len_utf8(),
                    "{}",
                    description.len()
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(span.end_time >= span.start_time);
        let unsampled = context.traceparent.replace("-01", "-00");
        let unsampled = TraceContext::parse(&unsampled, None).expect("valid");
        assert!(span_of(attempt(unsampled, None)).is_none());
    }
}
