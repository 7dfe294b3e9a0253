//! remuda's spans in the `tracing` ecosystem: an enqueue runs in a span (`send <queue>`,
//! target [`SEND`]) and a task's attempt in another (named after the job's kind, target
//! [`ATTEMPT`]), so a subscriber's own spans and log lines nest under them.
//!
//! With the `opentelemetry` feature and a `tracing-opentelemetry` layer installed, they are
//! OpenTelemetry spans as well (`otel.kind` `producer` and `consumer`, the messaging
//! conventions' attributes): a job enqueued inside a `tracing` span carries the send's
//! context (so its attempts descend from it), and the attempt's span continues the job's
//! trace (or, with `propagation = "link"`, roots one linked to it); when the worker exports
//! the attempt's span itself, the `tracing` one is an internal span under it. Without the layer, or the feature, the W3C context of [`crate::trace`] is carried as
//! before; without a subscriber that wants them the spans cost a look at a cached interest.

use crate::trace::TraceContext;

/// The target of the spans of enqueues.
pub const SEND: &str = "remuda::send";
/// The target of the spans of attempts.
pub const ATTEMPT: &str = "remuda::attempt";

/// The span an enqueue of `count` jobs to `queue` runs in (its one job's id recorded by
/// [`sent`]), under the context the jobs continue when no `tracing` span gives one.
pub(crate) fn send_span(queue: &str, count: usize) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        target: SEND,
        "send",
        otel.name = %format_args!("send{}{queue}", if queue.is_empty() { "" } else { " " }),
        otel.kind = "producer",
        otel.status_code = Empty,
        otel.status_description = Empty,
        messaging.system = "remuda",
        messaging.operation.type = "send",
        messaging.destination.name = %queue,
        messaging.batch.message_count = Empty,
        messaging.message.id = Empty,
        remuda.job.id = Empty,
    );
    if !span.is_disabled() {
        if count != 1 {
            span.record("messaging.batch.message_count", count);
        }
        continue_remuda_context(&span);
    }
    span
}

/// Runs an enqueue's `work` in its `span`: the jobs continue the send's context, or, when
/// the send carries none (no OpenTelemetry layer takes it), the caller's as it was before
/// the send began; an error ends the span with an error status.
pub(crate) async fn sending<T>(
    span: &tracing::Span,
    work: impl std::future::Future<Output = crate::Result<T>>,
) -> crate::Result<T> {
    use tracing::Instrument;
    if span.is_disabled() {
        return work.await;
    }
    let caller = inherited();
    let result = crate::trace::scope(caller, work.instrument(span.clone())).await;
    if let Err(e) = &result {
        span.record("otel.status_code", "error");
        span.record("otel.status_description", e.to_string());
    }
    result
}

/// Tells an enqueue's span the id of the one job it wrote.
pub(crate) fn sent(span: &tracing::Span, id: i64) {
    span.record("messaging.message.id", tracing::field::display(id));
    span.record("remuda.job.id", id);
}

/// Where an attempt's `tracing` span stands in the trace.
pub(crate) enum AttemptSpan<'a> {
    /// remuda exports the attempt's span itself: this one is a child of it (the context the
    /// task is handed), an internal span, so no attempt counts twice.
    UnderExported(Option<&'a TraceContext>),
    /// It is the attempt's span, a child of the enqueuer's (the job's context).
    Child(Option<&'a TraceContext>),
    /// It is the attempt's span, a root linked to the enqueuer's.
    Linked(Option<&'a TraceContext>),
}

/// The span a task's attempt runs in.
pub(crate) fn attempt_span(
    kind: &str,
    queue: &str,
    job_id: i64,
    attempt: i32,
    place: AttemptSpan<'_>,
) -> tracing::Span {
    if let AttemptSpan::UnderExported(parent) = place {
        let span = tracing::info_span!(
            target: ATTEMPT,
            "attempt",
            otel.name = %kind,
            otel.kind = "internal",
            remuda.job.id = job_id,
            remuda.attempt = attempt,
        );
        if let Some(parent) = parent.filter(|_| !span.is_disabled()) {
            set_parent(&span, parent);
        }
        return span;
    }
    let span = tracing::info_span!(
        target: ATTEMPT,
        "attempt",
        otel.name = %kind,
        otel.kind = "consumer",
        messaging.system = "remuda",
        messaging.operation.type = "process",
        messaging.destination.name = %queue,
        messaging.message.id = %job_id,
        remuda.job.id = job_id,
        remuda.attempt = attempt,
    );
    if !span.is_disabled() {
        match place {
            AttemptSpan::Child(Some(parent)) => set_parent(&span, parent),
            AttemptSpan::Linked(enqueuer) => otel::root_linked(&span, enqueuer),
            _ => {}
        }
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

    /// The span a W3C context from elsewhere names (its parent id), as remote.
    fn remote(context: &TraceContext) -> Option<SpanContext> {
        let (Ok(trace_id), Ok(span_id)) = (
            TraceId::from_hex(context.trace_id()),
            SpanId::from_hex(context.parent_id()),
        ) else {
            return None;
        };
        let state = context
            .tracestate
            .as_deref()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        Some(SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::new(context.flags()),
            true,
            state,
        ))
    }

    /// Makes `parent` (a W3C context from elsewhere) the span's parent.
    pub(super) fn set_parent(span: &tracing::Span, parent: &TraceContext) {
        if let Some(remote) = remote(parent) {
            // (no layer, or a span already started: it keeps the parent it has)
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
        }
    }

    /// Makes the span a root, linked to `to` when there is one.
    pub(super) fn root_linked(span: &tracing::Span, to: Option<&TraceContext>) {
        let _ = span.set_parent(opentelemetry::Context::new());
        if let Some(remote) = to.and_then(remote) {
            span.add_link(remote);
        }
    }
}

#[cfg(not(feature = "opentelemetry"))]
mod otel {
    use crate::trace::TraceContext;

    pub(super) fn current() -> Option<TraceContext> {
        None
    }

    pub(super) fn set_parent(_span: &tracing::Span, _parent: &TraceContext) {}

    pub(super) fn root_linked(_span: &tracing::Span, _to: Option<&TraceContext>) {}
}
