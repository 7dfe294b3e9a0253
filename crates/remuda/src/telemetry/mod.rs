//! Spans of job attempts exported over OTLP (HTTP/protobuf), one per attempt: under the trace
//! the job continues ([`crate::trace`]) as a child of the enqueuer's span, with the span id
//! every part of remuda derives for the attempt, so the task's own spans nest under it.
//!
//! Off unless an endpoint is set (`[telemetry] endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the exporter's other
//! `OTEL_*` variables, the batch processor's and the sampler's apply: [`settings`]). Off, a
//! worker does nothing per attempt. On, each finished attempt hands its span to a task of
//! its own that sends them in batches ([`export`]); a full queue drops spans rather than slow
//! the jobs down, and a collector that is unreachable costs warnings and counts, never a job.

mod export;
mod record;
mod sampler;
mod sender;
mod settings;
mod span;
pub mod tracing_spans;

pub use record::{new_span_id, new_trace_id, send_attributes, Attr, SpanKind, SpanRecord};
pub use sender::SpanSender;

use crate::metrics::SpanCounts;
use crate::trace::TraceContext;
use chrono::{DateTime, Utc};
use export::{Closing, Exporter};
use opentelemetry_proto::tonic::trace::v1::Span;
use sampler::Sampler;
use settings::{env, Settings};
use tokio::sync::mpsc;

/// Where spans go (`[telemetry]` in the worker config). Unset fields fall back to the
/// standard `OTEL_*` environment variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The collector's base URL (`http://collector:4318`): spans are POSTed to
    /// `<endpoint>/v1/traces`.
    pub endpoint: Option<String>,
    /// `service.name` of the spans (default `OTEL_SERVICE_NAME`, else `remuda`).
    pub service_name: Option<String>,
    /// How an attempt's span relates to its enqueuer's.
    pub propagation: Propagation,
}

/// How an attempt's span relates to the span that enqueued its job (Sidekiq's and Oban's
/// choice): a child in the enqueuer's trace, or a root of the job's own trace linked to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Propagation {
    /// The attempt descends from the enqueue: one trace from the request through its jobs.
    #[default]
    Child,
    /// The attempts of a job are a trace of their own, each linked to the enqueue: a long
    /// request's trace does not grow by every job it caused, hours later.
    Link,
}

impl TelemetryConfig {
    /// Whether spans are exported: an endpoint is configured here or in the environment, and
    /// neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says otherwise.
    pub fn enabled(&self) -> bool {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
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
}

/// The trace id of the attempts of a job that continues no trace: the same for every
/// attempt of the job (its retries belong to one trace), different for every job of every
/// installation (`installation`: when its schema was first made, in microseconds).
fn root_trace_id(installation: i64, job_id: i64) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(b"remuda trace of job ");
    hash.update(installation.to_le_bytes());
    hash.update(job_id.to_le_bytes());
    let digest = hash.finalize();
    let id: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    if id.bytes().all(|b| b == b'0') {
        // (a trace id of zeros is invalid)
        return format!("{:032x}", 1);
    }
    id
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
    /// The enqueuer's context, when the attempt links to it instead.
    pub link: Option<TraceContext>,
    /// `completed`, `error`, `snoozed`, `stopped`.
    pub outcome: &'static str,
    /// The error's code and message, when it ended in one.
    pub error: Option<(String, String)>,
}

/// The sending side: cheap to clone, one per worker.
#[derive(Clone, Debug)]
pub(crate) struct Spans {
    tx: mpsc::Sender<Span>,
    sampler: Sampler,
    /// When this installation's schema was first made (microseconds), the seed of the trace
    /// ids of jobs outside any trace.
    installation: i64,
    counts: SpanCounts,
    propagation: Propagation,
}

/// The worker's side of the exporter's stop: the deadline of the last spans.
pub(crate) type Close = tokio::sync::watch::Sender<Option<tokio::time::Instant>>;

impl Spans {
    /// Starts the exporter when telemetry is on: the handle, the task that sends, and what
    /// stops it (set a deadline: the task sends what is left by then, and ends). A
    /// configuration that cannot work is said once, and the worker runs without.
    pub(crate) fn start(
        config: &TelemetryConfig,
        installation: i64,
        counts: SpanCounts,
    ) -> Option<(Spans, tokio::task::JoinHandle<()>, Close)> {
        if !config.enabled() {
            return None;
        }
        let (settings, warnings) = match Settings::resolve(config) {
            Ok(resolved) => resolved,
            Err(problem) => {
                tracing::warn!("remuda telemetry: {problem}; spans are not exported");
                return None;
            }
        };
        for warning in warnings {
            tracing::warn!("remuda telemetry: {warning}");
        }
        let (queue, sampler) = (settings.queue, settings.sampler);
        let exporter = match Exporter::new(settings, counts.clone()) {
            Ok(exporter) => exporter,
            Err(problem) => {
                tracing::warn!("remuda telemetry: {problem}; spans are not exported");
                return None;
            }
        };
        let (tx, rx) = mpsc::channel(queue);
        let (close, closing): (Close, Closing) = tokio::sync::watch::channel(None);
        let task = tokio::spawn(exporter.run(rx, closing));
        let spans = Spans {
            tx,
            sampler,
            installation,
            counts,
            propagation: config.propagation,
        };
        Some((spans, task, close))
    }

    /// The context an attempt runs under (`span_id`: its own): the job's trace, or one of
    /// the job's own when it continues none or only links to its enqueuer's, flagged
    /// sampled as the sampler decides.
    pub(crate) fn attempt_context(
        &self,
        job_id: i64,
        trace: Option<&TraceContext>,
        span_id: &str,
    ) -> TraceContext {
        let trace = trace.filter(|_| self.propagation == Propagation::Child);
        self.span_context(trace, span_id, || root_trace_id(self.installation, job_id))
    }

    /// The context of span `span_id`: a child of `parent` in its trace, or the root of trace
    /// `root()`; flagged sampled as the sampler decides.
    pub(crate) fn span_context(
        &self,
        parent: Option<&TraceContext>,
        span_id: &str,
        root: impl FnOnce() -> String,
    ) -> TraceContext {
        let (trace_id, flags, tracestate) = match parent {
            Some(t) => (t.trace_id().to_string(), t.flags(), t.tracestate.clone()),
            None => (root(), 0, None),
        };
        let sampled = self
            .sampler
            .decide(parent.map(TraceContext::sampled), &trace_id);
        let flags = if sampled { flags | 1 } else { flags & !1 };
        TraceContext {
            traceparent: format!("00-{trace_id}-{span_id}-{flags:02x}"),
            tracestate,
        }
    }

    /// The enqueuer's span as an attempt's parent, or as its link: by the propagation.
    pub(crate) fn enqueuer(
        &self,
        trace: Option<&TraceContext>,
    ) -> (Option<String>, Option<TraceContext>) {
        match (self.propagation, trace) {
            (_, None) => (None, None),
            (Propagation::Child, Some(t)) => (Some(t.parent_id().to_string()), None),
            (Propagation::Link, Some(t)) => (None, Some(t.clone())),
        }
    }

    /// Queues the span of a finished attempt (none for one not sampled; dropped, and
    /// counted, when the queue is full: the collector does not keep up).
    pub(crate) fn record(&self, attempt: Attempt) {
        if let Some(span) = span::span_of(attempt) {
            self.queue(span);
        }
    }

    /// Queues a finished span of another kind (an enqueue's, a request's).
    pub(crate) fn record_span(&self, record: SpanRecord) {
        if let Some(span) = span::proto(record) {
            self.queue(span);
        }
    }

    fn queue(&self, span: Span) {
        if let Err(e) = self.tx.try_send(span) {
            if matches!(e, mpsc::error::TrySendError::Closed(_)) {
                // (the exporter has ended: the worker is stopping)
                self.counts.failed.inc();
                return;
            }
            self.counts.dropped.inc();
            let dropped = self.counts.dropped.get();
            if dropped.is_power_of_two() {
                tracing::warn!("remuda telemetry: {dropped} spans dropped so far: the collector does not keep up with the attempts");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_outside_any_trace_has_one_trace_for_all_its_attempts_and_its_own_per_installation() {
        let a = root_trace_id(1_700_000_000_000_000, 42);
        assert_eq!(a, root_trace_id(1_700_000_000_000_000, 42));
        assert_ne!(a, root_trace_id(1_700_000_000_000_000, 43));
        assert_ne!(a, root_trace_id(1_700_000_000_000_001, 42));
        assert!(TraceContext::parse(&format!("00-{a}-00f067aa0ba902b7-01"), None).is_ok());
    }
}
