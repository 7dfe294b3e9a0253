//! W3C trace context (<https://www.w3.org/TR/trace-context/>) carried from the enqueue to the
//! task: a job keeps the `traceparent` (and `tracestate`) of the request that enqueued it, and
//! each attempt runs as a child of it, under a span of its own whose id follows from the job,
//! the attempt and the claim (so the worker, the task and anything exporting the attempt's
//! span agree on it without storing it).
//!
//! Inside a running task the attempt's context is current ([`current`]): jobs it enqueues and
//! workflows it starts carry it on, so one trace runs through a chain of jobs. Outside a task,
//! [`scope`] makes a context current for a future (a request handler's, say), and
//! [`NewJob::trace`](crate::NewJob::trace) sets one explicitly.

use crate::{Error, Result};
use chrono::{DateTime, Utc};
use std::future::Future;

/// Longest `tracestate` accepted (the recommendation's 512 bytes).
pub const MAX_TRACESTATE: usize = 512;

/// A W3C trace context: a `traceparent` and, optionally, its `tracestate`, passed on as given.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceContext {
    /// `00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>`.
    pub traceparent: String,
    /// Vendor entries (`vendor=value,…`), passed on unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Checks a `traceparent` (version `00`, lowercase hex, ids not all zeros) and a
    /// `tracestate` (at most 512 bytes of printable ASCII), saying what is wrong.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Result<Self> {
        check_traceparent(traceparent)
            .map_err(|what| Error::InvalidInput(format!("traceparent {traceparent:?}: {what}; give 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, as the W3C trace context defines it")))?;
        if let Some(state) = tracestate {
            if state.len() > MAX_TRACESTATE || !state.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                return Err(Error::InvalidInput(format!(
                    "tracestate: at most {MAX_TRACESTATE} bytes of printable ASCII (vendor=value pairs, comma-separated)"
                )));
            }
        }
        Ok(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate: tracestate.filter(|s| !s.is_empty()).map(str::to_string),
        })
    }

    /// The context checked again (a struct literal is not checked), an empty `tracestate`
    /// dropped.
    pub fn checked(&self) -> Result<TraceContext> {
        TraceContext::parse(&self.traceparent, self.tracestate.as_deref())
    }

    /// The trace's id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        self.traceparent.get(3..35).unwrap_or_default()
    }

    /// The id of the parent span (16 hex digits): the enqueuer's span, or for an attempt's
    /// context the attempt's own.
    pub fn parent_id(&self) -> &str {
        self.traceparent.get(36..52).unwrap_or_default()
    }

    /// The W3C trace flags (0 when unreadable).
    pub fn flags(&self) -> u8 {
        self.traceparent
            .get(53..55)
            .and_then(|f| u8::from_str_radix(f, 16).ok())
            .unwrap_or(0)
    }

    /// Whether the trace is sampled (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags() & 1 == 1
    }

    /// The context with `span_id` as its parent: same trace, flags and state.
    pub fn child(&self, span_id: &str) -> TraceContext {
        TraceContext {
            traceparent: format!(
                "00-{}-{span_id}-{}",
                self.trace_id(),
                self.traceparent.get(53..55).unwrap_or("00")
            ),
            tracestate: self.tracestate.clone(),
        }
    }
}

fn check_traceparent(text: &str) -> std::result::Result<(), &'static str> {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    match parts.as_slice() {
        [version, trace, span, flags] => {
            if *version != "00" {
                Err("only version 00 is known")
            } else if !hex(trace, 32) || trace.bytes().all(|b| b == b'0') {
                Err("the trace id must be 32 lowercase hex digits, not all zeros")
            } else if !hex(span, 16) || span.bytes().all(|b| b == b'0') {
                Err("the parent span id must be 16 lowercase hex digits, not all zeros")
            } else if !hex(flags, 2) {
                Err("the flags must be 2 lowercase hex digits")
            } else {
                Ok(())
            }
        }
        _ => Err("it has not four parts separated by '-'"),
    }
}

/// The span id of one attempt (16 hex digits, never all zeros): a hash of the job's id, the
/// attempt and the claim's time, the same wherever it is computed.
pub fn attempt_span_id(job_id: i64, attempt: i32, started_at: DateTime<Utc>) -> String {
    // FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not)
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let micros = started_at.timestamp_micros();
    for byte in job_id
        .to_le_bytes()
        .into_iter()
        .chain(attempt.to_le_bytes())
        .chain(micros.to_le_bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:016x}", hash.max(1))
}

/// The context a row holds in its `traceparent` and `tracestate` columns (a job's, as
/// stored: checked when it was written).
pub(crate) fn from_row(row: &tokio_postgres::Row) -> Result<Option<TraceContext>> {
    let Some(traceparent) = row.try_get::<_, Option<String>>("traceparent")? else {
        return Ok(None);
    };
    Ok(Some(TraceContext {
        traceparent,
        tracestate: row.try_get("tracestate")?,
    }))
}

tokio::task_local! {
    static CURRENT: Option<TraceContext>;
}

/// The trace context current in this task: the attempt's inside a running job, or what
/// [`scope`] set (checked as [`TraceContext::parse`] checks it: one that is not a valid
/// context is no context).
pub fn current() -> Option<TraceContext> {
    CURRENT
        .try_with(Clone::clone)
        .ok()
        .flatten()
        .and_then(|t| t.checked().ok())
}

/// Runs `future` with `trace` as the current context: jobs it enqueues and workflows it starts
/// without a context of their own carry this one.
/// A plain function, not an `async fn`: an `async fn` would hold `future` twice (as its
/// argument and inside the scope it awaits), and a running job's future is copied whole.
pub fn scope<F: Future>(
    trace: Option<TraceContext>,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Option<TraceContext>, F> {
    CURRENT.scope(trace, future)
}

/// Calls `f` with `trace` as the current context (what [`scope`] does for a future).
pub(crate) fn sync_scope<R>(trace: Option<TraceContext>, f: impl FnOnce() -> R) -> R {
    CURRENT.sync_scope(trace, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_checked_part_by_part_and_a_child_keeps_the_trace() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = TraceContext::parse(tp, Some("congo=t61rcWkgMzE")).expect("valid");
        assert_eq!(ctx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.parent_id(), "00f067aa0ba902b7");
        assert!(ctx.sampled());
        let child = ctx.child("b7ad6b7169203331");
        assert_eq!(
            child.traceparent,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
        );
        assert_eq!(child.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            assert!(TraceContext::parse(bad, None).is_err(), "{bad:?}");
        }
        assert!(TraceContext::parse(tp, Some("a=\u{7}")).is_err());
    }

    #[test]
    fn an_attempts_span_id_is_stable_and_differs_by_attempt() {
        let at = "2026-12-05T10:00:00Z"
            .parse::<DateTime<Utc>>()
            .expect("time");
        let a = attempt_span_id(42, 1, at);
        assert_eq!(a, attempt_span_id(42, 1, at));
        assert_ne!(a, attempt_span_id(42, 2, at));
        assert_eq!(a.len(), 16);
    }
}
