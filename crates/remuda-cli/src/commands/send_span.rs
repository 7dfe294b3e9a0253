//! The span of an enqueue (kind `PRODUCER`, named `send <queue>`), exported when spans are
//! (an OTLP endpoint in `[telemetry]` of `--config`, or the standard `OTEL_*` variables): the
//! jobs carry its context, so their attempts descend from it (or link to it), and it descends
//! from the context the enqueue was given (`--traceparent`, `TRACEPARENT`).

use remuda::telemetry::{send_attributes, SpanKind, SpanRecord, SpanSender, TelemetryConfig};
use remuda::TraceContext;
use std::time::{Duration, SystemTime};

/// How long the CLI waits, at most, for the collector to take the span before it exits.
const FLUSH: Duration = Duration::from_secs(2);

/// An enqueue's span, begun.
pub struct SendSpan {
    sender: SpanSender,
    /// The span's own context: what the jobs carry.
    pub context: TraceContext,
    parent: Option<String>,
    start: SystemTime,
}

impl SendSpan {
    /// Begins the span under `parent` when spans are exported; `None` otherwise.
    pub fn begin(config: &TelemetryConfig, parent: Option<&TraceContext>) -> Option<SendSpan> {
        let sender = SpanSender::start(config)?;
        Some(SendSpan {
            context: sender.new_context(parent),
            parent: parent.map(|p| p.parent_id().to_string()),
            start: SystemTime::now(),
            sender,
        })
    }

    /// Ends the span: `count` jobs sent to `queue` (the one job's `id`), or the error the
    /// enqueue ended in; sends it before the process exits.
    pub async fn end(
        self,
        queue: &str,
        count: usize,
        id: Option<i64>,
        error: Option<&remuda::Error>,
    ) {
        let error = error.map(|e| ("ENQUEUE_FAILED".to_string(), e.to_string()));
        self.sender.record(SpanRecord {
            name: format!("send {queue}"),
            kind: SpanKind::Producer,
            context: self.context,
            parent: self.parent,
            links: Vec::new(),
            start: self.start,
            end: SystemTime::now(),
            attributes: send_attributes(queue, count, id),
            error,
        });
        self.sender.finish(FLUSH).await;
    }
}
