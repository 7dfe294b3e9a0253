//! Tasks that are not Rust code: a program run per job, an HTTP endpoint per job, and the
//! built-ins. Each receives the job as one JSON object:
//! `{"id", "kind", "queue", "attempt", "max_attempts", "args"}`, and `"workflow"` for a
//! workflow node's job.

mod command;
pub mod http;
pub mod supervise;

pub use command::CommandTask;
pub use http::HttpTask;

use futures_util::future::BoxFuture;
use remuda::{DynTask, JobContext, Jsonb, TaskError};
use std::sync::Arc;

/// The JSON document a command reads on stdin and an endpoint receives as its body; a
/// workflow node's job adds `"workflow": {"id", "node", "context", "index"}`.
pub fn job_document(ctx: &JobContext, args: &Jsonb) -> String {
    let text = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let workflow = ctx
        .workflow
        .as_ref()
        .and_then(|w| serde_json::to_string(w).ok())
        .map(|w| format!(",\"workflow\":{w}"))
        .unwrap_or_default();
    format!(
        "{{\"id\":{},\"kind\":{},\"queue\":{},\"attempt\":{},\"max_attempts\":{},\"args\":{}{workflow}}}",
        ctx.id,
        text(&ctx.kind),
        text(&ctx.queue),
        ctx.attempt,
        ctx.max_attempts,
        args.0
    )
}

/// Output text as a result: itself when it is JSON, else a JSON string of it (trailing
/// newline dropped), `null` when empty.
pub fn output_to_json(text: &str) -> Jsonb {
    let trimmed = text.trim_end_matches(['\n', '\r']);
    if trimmed.trim().is_empty() {
        return Jsonb("null".into());
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok() {
        return Jsonb(trimmed.to_string());
    }
    Jsonb(serde_json::Value::String(trimmed.to_string()).to_string())
}

/// `builtin = "noop"`: returns its args, no process and no I/O (for benchmarks and smoke tests).
pub struct Noop;

impl DynTask for Noop {
    fn run(
        self: Arc<Self>,
        _ctx: JobContext,
        args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>> {
        Box::pin(async move { Ok(args) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_json_when_it_parses_else_text() {
        assert_eq!(output_to_json("{\"a\": 1}\n").0, "{\"a\": 1}");
        assert_eq!(output_to_json("42").0, "42");
        assert_eq!(output_to_json("hello world\n").0, "\"hello world\"");
        assert_eq!(output_to_json("").0, "null");
    }

    #[test]
    fn the_job_document_is_valid_json() {
        let ctx = JobContext {
            id: 7,
            kind: "re\"size".into(),
            queue: "media".into(),
            attempt: 2,
            max_attempts: 5,
            worker_id: "w".into(),
            timeout: None,
            cancel: Default::default(),
            stop: Default::default(),
            workflow: None,
            steps: Default::default(),
            trace: None,
            group: None,
        };
        let doc = job_document(&ctx, &Jsonb("{\"w\":640}".into()));
        let value: serde_json::Value = serde_json::from_str(&doc).expect("valid JSON");
        assert_eq!(value["kind"], "re\"size");
        assert_eq!(value["args"]["w"], 640);
        assert_eq!(value["attempt"], 2);
    }
}
