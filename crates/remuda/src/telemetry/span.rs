//! An attempt as the OTLP span that tells it, and a batch of them as one export request.

use super::Attempt;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::SpanKind, status::StatusCode, ResourceSpans, ScopeSpans, Span, Status,
};

/// Longest error message a span carries (the job keeps it whole).
pub(super) const MAX_MESSAGE: usize = 2048;

/// The W3C flags' sampled bit, and "the parent is remote is known" and "is remote".
const SAMPLED: u32 = 0x01;
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(value)),
        }),
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
    if !a.context.sampled() {
        return None;
    }
    let trace_id = bytes_of(a.context.trace_id()).filter(|b| b.len() == 16)?;
    let span_id = bytes_of(a.context.parent_id()).filter(|b| b.len() == 8)?;
    let parent = match &a.parent {
        Some(p) => bytes_of(p).filter(|b| b.len() == 8)?,
        None => Vec::new(),
    };
    let wait_ms = (a.started_at - a.run_at).num_milliseconds().max(0);
    let mut attributes = vec![
        // the OpenTelemetry messaging conventions, then remuda's own
        text("messaging.system", "remuda"),
        text("messaging.operation.type", "process"),
        text("messaging.operation.name", "process"),
        text("messaging.destination.name", a.queue.clone()),
        text("messaging.message.id", a.job_id.to_string()),
        int("remuda.job.id", a.job_id),
        text("remuda.job.kind", a.kind.clone()),
        text("remuda.queue", a.queue),
        int("remuda.attempt", i64::from(a.attempt)),
        text("remuda.worker", a.worker),
        int("remuda.queue_wait_ms", wait_ms),
        text("remuda.outcome", a.outcome),
    ];
    let status = match a.error {
        Some((code, message)) => {
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
            Some(Status {
                message,
                code: StatusCode::Error as i32,
            })
        }
        None => None,
    };
    let start_time: std::time::SystemTime = a.started_at.into();
    // the claim's time is the database's, the end this worker's: a worker clock behind the
    // database's must not end a span before it starts
    let end_time = std::time::SystemTime::now().max(start_time);
    let remote = if parent.is_empty() {
        HAS_IS_REMOTE
    } else {
        HAS_IS_REMOTE | IS_REMOTE
    };
    // the context's W3C flags (the sampled bit set: only sampled attempts get here), then
    // whether the parent is remote
    let flags = u32::from(a.context.flags()) | SAMPLED;
    Some(Span {
        trace_id,
        span_id,
        trace_state: a.context.tracestate.clone().unwrap_or_default(),
        parent_span_id: parent,
        flags: flags | remote,
        name: a.kind,
        kind: SpanKind::Consumer as i32,
        start_time_unix_nano: unix_nanos(start_time),
        end_time_unix_nano: unix_nanos(end_time),
        attributes,
        status,
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
    use crate::trace::TraceContext;
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
