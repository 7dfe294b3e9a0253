//! Spans besides the attempts' that remuda exports through the same sender: an enqueue's
//! (`PRODUCER`, made by the CLI) and an API write's (`SERVER`).

use crate::trace::TraceContext;
use std::time::SystemTime;

/// What a span is to its trace, as OpenTelemetry names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside a process.
    Internal,
    /// A request served (the HTTP API's).
    Server,
    /// A message sent: an enqueue.
    Producer,
    /// A message processed: an attempt.
    Consumer,
}

impl SpanKind {
    pub(super) fn proto(self) -> opentelemetry_proto::tonic::trace::v1::span::SpanKind {
        use opentelemetry_proto::tonic::trace::v1::span::SpanKind as Proto;
        match self {
            SpanKind::Internal => Proto::Internal,
            SpanKind::Server => Proto::Server,
            SpanKind::Producer => Proto::Producer,
            SpanKind::Consumer => Proto::Consumer,
        }
    }
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attr {
    /// A string.
    Text(String),
    /// A 64-bit integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl From<&str> for Attr {
    fn from(text: &str) -> Self {
        Attr::Text(text.to_string())
    }
}

impl From<String> for Attr {
    fn from(text: String) -> Self {
        Attr::Text(text)
    }
}

impl From<i64> for Attr {
    fn from(int: i64) -> Self {
        Attr::Int(int)
    }
}

impl From<bool> for Attr {
    fn from(flag: bool) -> Self {
        Attr::Bool(flag)
    }
}

/// One finished span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    /// Its name (`send media`, `POST /api/v1/jobs`).
    pub name: String,
    /// What it is to its trace.
    pub kind: SpanKind,
    /// Its own context: its trace, its id (the context's parent id, as the context handed on
    /// to what it causes has it), flags and state. Not sampled: not exported.
    pub context: TraceContext,
    /// The id of its parent span; `None` for a root.
    pub parent: Option<String>,
    /// Spans it follows without descending from them (each context's parent id).
    pub links: Vec<TraceContext>,
    /// When it started and ended.
    pub start: SystemTime,
    /// (an end before the start is taken as the start)
    pub end: SystemTime,
    /// Its attributes, in order.
    pub attributes: Vec<(String, Attr)>,
    /// The error code and message it ended in: the span's status is an error.
    pub error: Option<(String, String)>,
}

/// A new span's id: 16 hex digits, never all zeros.
pub fn new_span_id() -> String {
    format!("{:016x}", fastrand::u64(1..))
}

/// A new trace's id: 32 hex digits, never all zeros.
pub fn new_trace_id() -> String {
    format!("{:032x}", fastrand::u128(1..))
}

/// The messaging conventions' attributes of an enqueue of `count` jobs to `queue` (the
/// single job's id added as `messaging.message.id` when it is known).
pub fn send_attributes(queue: &str, count: usize, id: Option<i64>) -> Vec<(String, Attr)> {
    let mut attributes = vec![
        ("messaging.system".to_string(), Attr::from("remuda")),
        ("messaging.operation.type".into(), "send".into()),
        ("messaging.operation.name".into(), "send".into()),
        ("messaging.destination.name".into(), queue.into()),
    ];
    match id {
        Some(id) if count == 1 => {
            attributes.push(("messaging.message.id".into(), id.to_string().into()));
            attributes.push(("remuda.job.id".into(), id.into()));
        }
        _ if count == 1 => {}
        _ => attributes.push((
            "messaging.batch.message_count".into(),
            i64::try_from(count).unwrap_or(i64::MAX).into(),
        )),
    }
    attributes
}
