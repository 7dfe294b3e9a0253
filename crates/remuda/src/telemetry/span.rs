//! An attempt as the OTLP span that tells it, and a batch of them as one export request.

use super::record::{Attr, SpanKind, SpanRecord};
use super::Attempt;
use crate::trace::TraceContext;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::Link, status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};
use std::time::SystemTime;

/// Longest error message a span carries (the job keeps it whole).
pub(super) const MAX_MESSAGE: usize = 2048;

/// The W3C flags' sampled bit, and "whether the parent is remote is known" and "is remote".
const SAMPLED: u32 = 0x01;
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    key_value(key.into(), Attr::Text(value.into()))
}

fn key_value(key: String, value: Attr) -> KeyValue {
    let value = match value {
        Attr::Text(text) => Value::StringValue(text),
        Attr::Int(int) => Value::IntValue(int),
        Attr::Bool(flag) => Value::BoolValue(flag),
    };
    KeyValue {
        key,
        value: Some(AnyValue { value: Some(value) }),
    }
}

fn bytes_of(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn unix_nanos(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The span of an attempt, ending now; `None` for an attempt not sampled (its context's
/// flag) or whose ids are not readable.
pub(super) fn span_of(a: Attempt) -> Option<Span> {
    let wait_ms = (a.started_at - a.run_at).num_milliseconds().max(0);
    let attributes = vec![
        // the OpenTelemetry messaging conventions, then remuda's own
        ("messaging.system".into(), Attr::from("remuda")),
        ("messaging.operation.type".into(), "process".into()),
        ("messaging.operation.name".into(), "process".into()),
        ("messaging.destination.name".into(), a.queue.clone().into()),
        ("messaging.message.id".into(), a.job_id.to_string().into()),
        ("remuda.job.id".into(), a.job_id.into()),
        ("remuda.job.kind".into(), a.kind.clone().into()),
        ("remuda.queue".into(), a.queue.into()),
        ("remuda.attempt".into(), i64::from(a.attempt).into()),
        ("remuda.worker".into(), a.worker.into()),
        ("remuda.queue_wait_ms".into(), wait_ms.into()),
        ("remuda.outcome".into(), a.outcome.into()),
    ];
    let start: SystemTime = a.started_at.into();
    // the claim's time is the database's, the end this worker's: a worker clock behind the
    // database's must not end a span before it starts
    let end = SystemTime::now().max(start);
    proto(SpanRecord {
        name: a.kind,
        kind: SpanKind::Consumer,
        context: a.context,
        parent: a.parent,
        links: a.link.into_iter().collect(),
        start,
        end,
        attributes,
        error: a.error,
    })
}

/// A span as the protocol has it; `None` when not sampled or its ids are not readable.
pub(super) fn proto(r: SpanRecord) -> Option<Span> {
    if !r.context.sampled() {
        return None;
    }
    let trace_id = bytes_of(r.context.trace_id()).filter(|b| b.len() == 16)?;
    let span_id = bytes_of(r.context.parent_id()).filter(|b| b.len() == 8)?;
    let parent = match &r.parent {
        Some(p) => bytes_of(p).filter(|b| b.len() == 8)?,
        None => Vec::new(),
    };
    let mut attributes: Vec<KeyValue> = r
        .attributes
        .into_iter()
        .map(|(key, value)| key_value(key, value))
        .collect();
    let status = r.error.map(|(code, message)| {
        attributes.push(text("remuda.error.code", code.clone()));
        let mut message = format!("{code}: {message}");
        if message.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        Status {
            message,
            code: StatusCode::Error as i32,
        }
    });
    let links = r.links.iter().filter_map(link_of).collect();
    // a parent passed in a context came from elsewhere: remote
    let remote = if parent.is_empty() {
        HAS_IS_REMOTE
    } else {
        HAS_IS_REMOTE | IS_REMOTE
    };
    // the context's W3C flags (the sampled bit set: only sampled spans get here), then
    // whether the parent is remote
    let flags = u32::from(r.context.flags()) | SAMPLED;
    Some(Span {
        trace_id,
        span_id,
        trace_state: r.context.tracestate.clone().unwrap_or_default(),
        parent_span_id: parent,
        flags: flags | remote,
        name: r.name,
        kind: r.kind.proto() as i32,
        start_time_unix_nano: unix_nanos(r.start),
        end_time_unix_nano: unix_nanos(r.end.max(r.start)),
        attributes,
        links,
        status,
        ..Default::default()
    })
}

/// A link to the span a context names (its parent id), remote.
fn link_of(to: &TraceContext) -> Option<Link> {
    Some(Link {
        trace_id: bytes_of(to.trace_id()).filter(|b| b.len() == 16)?,
        span_id: bytes_of(to.parent_id()).filter(|b| b.len() == 8)?,
        trace_state: to.tracestate.clone().unwrap_or_default(),
        flags: u32::from(to.flags()) | HAS_IS_REMOTE | IS_REMOTE,
        ..Default::default()
    })
}

/// One export request of `spans`, under the worker's resource and remuda's scope.
pub(super) fn request(
    resource: &[(String, String)],
    spans: Vec<Span>,
) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource.iter().map(|(k, v)| text(k, v.clone())).collect(),
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "remuda".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

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
            link: None,
            outcome: "error",
            error,
        }
    }

    #[test]
    fn a_span_carries_the_attempts_ids_a_bounded_error_and_never_ends_before_it_starts() {
        let context = TraceContext::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01",
            Some("congo=t61rcWkgMzE"),
        )
        .expect("valid");
        let long = "x".repeat(10 * MAX_MESSAGE);
        let span = span_of(attempt(context.clone(), Some(("BIG".into(), long)))).expect("sampled");
        assert_eq!(
            span.trace_id,
            bytes_of("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex")
        );
        assert_eq!(span.span_id, bytes_of("b7ad6b7169203331").expect("hex"));
        assert_eq!(
            span.parent_span_id,
            bytes_of("00f067aa0ba902b7").expect("hex")
        );
        assert_eq!(span.trace_state, "congo=t61rcWkgMzE");
        assert_eq!(span.flags, 0x301, "sampled, the parent remote");
        let status = span.status.expect("an error status");
        assert_eq!(status.code, StatusCode::Error as i32);
        assert!(
            status.message.len() <= MAX_MESSAGE + '…'.len_utf8(),
            "{}",
            status.message.len()
        );
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
        let random = TraceContext::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-03",
            None,
        )
        .expect("valid");
        let span = span_of(attempt(random, None)).expect("sampled");
        assert_eq!(
            span.flags & 0xff,
            0x03,
            "the W3C flags as the context has them"
        );
        let unsampled = context.traceparent.replace("-01", "-00");
        let unsampled = TraceContext::parse(&unsampled, None).expect("valid");
        assert!(span_of(attempt(unsampled, None)).is_none());
    }
}
