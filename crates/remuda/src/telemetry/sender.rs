//! The exporter as a process that is not a worker uses it (the CLI's enqueues, the HTTP
//! API's requests): spans of its own, under the contexts it was handed, sent in the
//! background and flushed before the process ends.

use super::record::{new_span_id, new_trace_id, SpanRecord};
use super::{Spans, TelemetryConfig};
use crate::metrics::SpanCounts;
use crate::trace::TraceContext;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Spans sent over OTLP by a process that makes them one by one; cheap to clone (the clones
/// share one sender).
#[derive(Clone, Debug)]
pub struct SpanSender {
    spans: Spans,
    /// The sending task and what stops it, until [`SpanSender::finish`] takes them.
    end: Arc<Mutex<Option<Ending>>>,
}

/// The task that sends, and what tells it to stop.
type Ending = (tokio::task::JoinHandle<()>, super::Close);

impl SpanSender {
    /// Starts sending when telemetry is on ([`TelemetryConfig::enabled`]: an endpoint here
    /// or in the `OTEL_*` environment); `None` otherwise, or when the settings cannot work
    /// (said once as a warning). Needs a Tokio runtime.
    pub fn start(config: &TelemetryConfig) -> Option<SpanSender> {
        let (spans, task, close) = Spans::start(config, 0, SpanCounts::default())?;
        Some(SpanSender {
            spans,
            end: Arc::new(Mutex::new(Some((task, close)))),
        })
    }

    /// The context of a new span: a child of `parent` in its trace, or the root of a new
    /// trace; sampled as the configured sampler decides (by default, as the parent is).
    pub fn new_context(&self, parent: Option<&TraceContext>) -> TraceContext {
        self.spans
            .span_context(parent, &new_span_id(), new_trace_id)
    }

    /// Queues a finished span (nothing for one not sampled).
    pub fn record(&self, span: SpanRecord) {
        self.spans.record_span(span);
    }

    /// Sends what is queued, waiting at most `within` (what the collector has not taken by
    /// then is said as a warning), and stops: spans recorded after are not sent. A second
    /// call does nothing.
    pub async fn finish(&self, within: Duration) {
        let taken = self.end.lock().ok().and_then(|mut end| end.take());
        let Some((mut task, close)) = taken else {
            return;
        };
        close.send_replace(Some(tokio::time::Instant::now() + within));
        if tokio::time::timeout(within + Duration::from_millis(500), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}
