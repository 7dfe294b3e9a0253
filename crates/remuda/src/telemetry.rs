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

impl TelemetryConfig {
    /// Whether spans are exported: an endpoint is configured here or in the environment.
    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
            || [
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            ]
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|e| !e.trim().is_empty()))
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
    /// The trace the job continues, as enqueued.
    pub trace: Option<TraceContext>,
    /// `completed`, `failed`, `retrying`, `snoozed`, `stopped`.
    pub outcome: &'static str,
    /// The error's code and message, when it ended in one.
    pub error: Option<(String, String)>,
}

/// The sending side: cheap to clone, one per worker.
#[derive(Clone, Debug)]
pub(crate) struct Spans {
    tx: mpsc::Sender<SpanData>,
}

impl Spans {
    /// Starts the exporter when telemetry is on: the handle, and the task that sends (it ends
    /// once `closing` is cancelled, after sending what is queued).
    pub(crate) fn start(
        config: &TelemetryConfig,
        closing: tokio_util::sync::CancellationToken,
    ) -> Option<(Spans, tokio::task::JoinHandle<()>)> {
        if !config.enabled() {
            return None;
        }
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
        if let Some(endpoint) = &config.endpoint {
            use opentelemetry_otlp::WithExportConfig;
            builder =
                builder.with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
        }
        let mut exporter = match builder.build() {
            Ok(exporter) => exporter,
            Err(e) => {
                tracing::warn!("remuda telemetry: cannot export spans ({e}); running without");
                return None;
            }
        };
        // the configured name, else OTEL_SERVICE_NAME (which the builder reads), else remuda
        let mut resource = opentelemetry_sdk::Resource::builder();
        let from_env = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|n| !n.trim().is_empty());
        match &config.service_name {
            Some(name) => resource = resource.with_service_name(name.clone()),
            None if !from_env => resource = resource.with_service_name("remuda"),
            None => {}
        }
        exporter.set_resource(&resource.build());
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(send(exporter, rx, closing));
        Some((Spans { tx }, task))
    }

    /// Queues the span of a finished attempt (dropped when the queue is full or the trace is
    /// not sampled).
    pub(crate) fn record(&self, attempt: Attempt) {
        if let Some(span) = span_of(attempt) {
            let _ = self.tx.try_send(span);
        }
    }
}

/// Sends the spans of `rx` in batches until `closing`, then what is left.
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
            if !batch.is_empty() {
                let _ = exporter.export(batch).await;
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
    let span_id = crate::trace::attempt_span_id(a.job_id, a.attempt, a.started_at);
    let (trace_id, parent, flags, state) = match &a.trace {
        Some(t) => {
            if !t.sampled() {
                return None;
            }
            (
                TraceId::from_hex(t.trace_id()).ok()?,
                SpanId::from_hex(t.parent_id()).ok()?,
                TraceFlags::SAMPLED,
                t.tracestate
                    .as_deref()
                    .and_then(|s| s.parse::<TraceState>().ok())
                    .unwrap_or_default(),
            )
        }
        // a job enqueued outside any trace: its attempts share a trace of their own
        None => (
            TraceId::from_hex(&job_trace_id(a.job_id)).ok()?,
            SpanId::INVALID,
            TraceFlags::SAMPLED,
            TraceState::default(),
        ),
    };
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
            Status::error(format!("{code}: {message}"))
        }
        None => Status::Unset,
    };
    Some(SpanData {
        span_context: SpanContext::new(
            trace_id,
            SpanId::from_hex(&span_id).ok()?,
            flags,
            false,
            state,
        ),
        parent_span_id: parent,
        parent_span_is_remote: parent != SpanId::INVALID,
        span_kind: SpanKind::Consumer,
        name: a.kind.into(),
        start_time: a.started_at.into(),
        end_time: std::time::SystemTime::now(),
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

/// The trace id of a job that continues no trace (32 hex digits): its id, hashed.
fn job_trace_id(job_id: i64) -> String {
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    format!(
        "{}{}",
        crate::trace::attempt_span_id(job_id, 0, epoch),
        crate::trace::attempt_span_id(job_id, -1, epoch)
    )
}
