//! remuda's spans in the `tracing` ecosystem: an enqueue runs in a span (`send <queue>`,
//! target [`SEND`]) and a task's attempt in another (named after the job's kind, target
//! [`ATTEMPT`]), so a subscriber's own spans and log lines nest under them.
//!
//! With the `opentelemetry` feature and a `tracing-opentelemetry` layer installed, they are
//! OpenTelemetry spans as well (`otel.kind` `producer` and `consumer`, the messaging
//! conventions' attributes): a job enqueued inside a `tracing` span carries the send's
//! context (so its attempts descend from it), and the attempt's span continues the job's
//! trace. Without the layer, or the feature, the W3C context of [`crate::trace`] is carried as
//! before; without a subscriber that wants them the spans cost a look at a cached interest.

use crate::trace::TraceContext;

/// The target of the spans of enqueues.
pub const SEND: &str = "remuda::send";
/// The target of the spans of attempts.
pub const ATTEMPT: &str = "remuda::attempt";

/// The span an enqueue of `count` jobs to `queue` runs in (its one job's id recorded by
/// [`sent`]), under the context the jobs continue when no `tracing` span gives one.
pub(crate) fn send_span(queue: &str, count: usize) -> tracing::Span {
    let span = tracing::info_span!(
        target: SEND,
        "send",
        otel.name = %format_args!("send{}{queue}", if queue.is_empty() { "" } else { " " }),
        otel.kind = "producer",
        messaging.system = "remuda",
        messaging.operation.type = "send",
        messaging.operation.name = "send",
        messaging.destination.name = %queue,
        messaging.batch.message_count = count,
        messaging.message.id = tracing::field::Empty,
    );
    if !span.is_disabled() {
        continue_remuda_context(&span);
    }
    span
}

/// Tells an enqueue's span the id of the one job it wrote.
pub(crate) fn sent(span: &tracing::Span, id: i64) {
    span.record("messaging.message.id", id);
}

/// The span a task's attempt runs in: under `parent` (the context the job continues, or
/// the attempt's own when remuda exports the attempt's span itself).
pub(crate) fn attempt_span(
    kind: &str,
    queue: &str,
    job_id: i64,
    attempt: i32,
    parent: Option<&TraceContext>,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: ATTEMPT,
        "attempt",
        otel.name = %kind,
        otel.kind = "consumer",
        messaging.system = "remuda",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = %queue,
        messaging.message.id = job_id,
        remuda.job.id = job_id,
        remuda.job.kind = %kind,
        remuda.attempt = attempt,
    );
    if let Some(parent) = parent.filter(|_| !span.is_disabled()) {
        set_parent(&span, parent);
    }
    span
}

/// The context a job enqueued here continues when it has none of its own: the current
/// `tracing` span's OpenTelemetry context (with the feature and its layer), else the one
/// [`crate::trace::current`] holds.
pub(crate) fn inherited() -> Option<TraceContext> {
    otel::current().or_else(crate::trace::current)
}

/// A span made outside any `tracing` span that carries an OpenTelemetry context, under
/// remuda's current context (a task's, or one set with [`crate::trace::scope`]).
fn continue_remuda_context(span: &tracing::Span) {
    if otel::current().is_none() {
        if let Some(context) = crate::trace::current() {
            set_parent(span, &context);
        }
    }
}

fn set_parent(span: &tracing::Span, parent: &TraceContext) {
    otel::set_parent(span, parent);
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use crate::trace::TraceContext;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// The current `tracing` span's OpenTelemetry context, when a layer made a valid one.
    pub(super) fn current() -> Option<TraceContext> {
        let context = tracing::Span::current().context();
        let span = context.span();
        let found = span.span_context();
        if !found.is_valid() {
            return None;
        }
        let state = found.trace_state().header();
        TraceContext::parse(
            &format!(
                "00-{}-{}-{:02x}",
                found.trace_id(),
                found.span_id(),
                found.trace_flags().to_u8()
            ),
            Some(state.as_str()),
        )
        .ok()
    }

    /// Makes `parent` (a W3C context from elsewhere) the span's parent.
    pub(super) fn set_parent(span: &tracing::Span, parent: &TraceContext) {
        let (Ok(trace_id), Ok(span_id)) = (
            TraceId::from_hex(parent.trace_id()),
            SpanId::from_hex(parent.parent_id()),
        ) else {
            return;
        };
        let state = parent
            .tracestate
            .as_deref()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        let remote = SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::new(parent.flags()),
            true,
            state,
        );
        // (no layer, or a span already started: it keeps the parent it has)
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

#[cfg(not(feature = "opentelemetry"))]
mod otel {
    use crate::trace::TraceContext;

    pub(super) fn current() -> Option<TraceContext> {
        None
    }

    pub(super) fn set_parent(_span: &tracing::Span, _parent: &TraceContext) {}
}
