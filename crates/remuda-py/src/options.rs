//! The options the Python package passes as JSON: a send's, a task's. Unknown keys are
//! refused, durations are seconds (floats), times RFC 3339.

use crate::convert::error;
use chrono::{DateTime, Utc};
use pyo3::PyResult;
use remuda::notify::NotifyTarget;
use remuda::{Backoff, JobState, Jsonb, NewJob, TaskOptions};
use serde::Deserialize;
use std::time::Duration;

/// Seconds as a duration, or an error naming the option.
pub fn seconds(what: &str, secs: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|_| {
        error(
            "BAD_INPUT",
            &format!("{what} is {secs}: give a number of seconds, 0 or more"),
        )
    })
}

/// How one job is sent (`task.send(…, delay=…)`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendOptions {
    queue: Option<String>,
    priority: Option<i32>,
    max_attempts: Option<i32>,
    run_at: Option<DateTime<Utc>>,
    delay: Option<f64>,
    deadline: Option<DateTime<Utc>>,
    timeout: Option<f64>,
    unique_key: Option<String>,
    #[serde(default)]
    unique_by_args: bool,
    unique_states: Option<Vec<JobState>>,
    unique_period: Option<f64>,
    #[serde(default)]
    unique_per_queue: bool,
    concurrency_key: Option<String>,
    group: Option<String>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    target_worker: Option<String>,
    requires: Option<Vec<String>>,
    notify: Option<NotifyTarget>,
    debounce: Option<f64>,
    debounce_max: Option<f64>,
    throttle: Option<f64>,
    #[serde(default)]
    throttle_latest: bool,
    /// A batch's key, size and wait (seconds): `task.add_to_batch`.
    batch_key: Option<String>,
    batch_size: Option<i32>,
    batch_wait: Option<f64>,
}

impl SendOptions {
    /// The job of `kind` with JSON `args` these options describe (checked on insert).
    pub fn job(self, kind: &str, args: String) -> PyResult<NewJob> {
        let mut job = NewJob::from_json(kind, Jsonb(args));
        if let Some(queue) = self.queue {
            job = job.queue(queue);
        }
        job.priority = self.priority.unwrap_or(0);
        job.max_attempts = self.max_attempts;
        job.run_at = self.run_at;
        if let Some(delay) = self.delay {
            if self.run_at.is_some() {
                return Err(error("BAD_INPUT", "give run_at or delay, not both"));
            }
            job = job.delay(seconds("delay", delay)?);
        }
        job.expires_at = self.deadline;
        job.timeout = self.timeout.map(|t| seconds("timeout", t)).transpose()?;
        if let Some(key) = self.unique_key {
            job = job.unique_key(key);
        }
        if self.unique_by_args {
            job = job.unique_by_args();
        }
        if let Some(states) = self.unique_states {
            job = job.unique_states(states);
        }
        if let Some(period) = self.unique_period {
            job = job.unique_period(seconds("unique_period", period)?);
        }
        if self.unique_per_queue {
            job = job.unique_per_queue();
        }
        job.concurrency_key = self.concurrency_key;
        job.group = self.group;
        if let Some(traceparent) = &self.traceparent {
            let trace = remuda::TraceContext::parse(traceparent, self.tracestate.as_deref())
                .map_err(|e| error("BAD_INPUT", &e.to_string()))?;
            job = job.trace(trace);
        } else if self.tracestate.is_some() {
            return Err(error("BAD_INPUT", "tracestate needs a traceparent"));
        }
        job.target_worker = self.target_worker;
        job.requires = self.requires;
        job.notify = self.notify;
        let duration = |what: &str, s: Option<f64>| s.map(|s| seconds(what, s)).transpose();
        let parts = remuda::FormationParts {
            debounce: duration("debounce", self.debounce)?,
            debounce_max: duration("debounce_max", self.debounce_max)?,
            throttle: duration("throttle", self.throttle)?,
            throttle_latest: self.throttle_latest,
            batch_key: self.batch_key,
            batch_size: self.batch_size,
            batch_wait: duration("batch_wait", self.batch_wait)?,
        };
        job.formation = parts.formation(kind).map_err(crate::convert::from_remuda)?;
        Ok(job)
    }
}

/// A task's retry policy and defaults (`@app.task(…, retry=RetryPolicy…)`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    queue: Option<String>,
    priority: Option<i32>,
    max_attempts: Option<i32>,
    timeout: Option<f64>,
    retry_on: Option<Vec<String>>,
    backoff: Option<BackoffSpec>,
}

/// A backoff in seconds: `fixed` (`delay`) or `exponential` (`base`, `max`). A plain struct,
/// not a tagged enum: serde buffers a tagged enum's content, which turns numbers into maps
/// under serde_json's arbitrary precision.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackoffSpec {
    kind: String,
    delay: Option<f64>,
    base: Option<f64>,
    max: Option<f64>,
    jitter: bool,
}

impl TaskSpec {
    /// The worker's options for the kind.
    pub fn options(self) -> PyResult<TaskOptions> {
        let mut options = TaskOptions::default();
        if let Some(queue) = self.queue {
            options.queue = queue;
        }
        options.priority = self.priority.unwrap_or(0);
        if let Some(n) = self.max_attempts {
            options.max_attempts = n;
        }
        options.timeout = self.timeout.map(|t| seconds("timeout", t)).transpose()?;
        options.retry_on = self.retry_on;
        if let Some(backoff) = self.backoff {
            options.backoff = backoff.backoff()?;
        }
        Ok(options)
    }
}

impl BackoffSpec {
    fn backoff(self) -> PyResult<Backoff> {
        let secs = |what: &str, v: Option<f64>| seconds(what, v.unwrap_or(1.0));
        match self.kind.as_str() {
            "fixed" => Ok(Backoff::Fixed {
                delay: secs("the retry delay", self.delay)?,
                jitter: self.jitter,
            }),
            "exponential" => Ok(Backoff::Exponential {
                base: secs("the retry base", self.base)?,
                max: seconds("the retry max", self.max.unwrap_or(3600.0))?,
                jitter: self.jitter,
            }),
            other => Err(error(
                "BAD_INPUT",
                &format!("unknown backoff {other:?}: fixed or exponential"),
            )),
        }
    }
}

/// Checks a send as the client checks it before writing (its options, and the job's own
/// checks: names, limits, size, a deadline it could meet), without a database: the sends
/// `remuda.testing` keeps instead of writing go through it, so a test refuses what
/// production would.
#[pyo3::pyfunction]
pub fn check_send(kind: &str, args: String, options: &str) -> PyResult<()> {
    let job = crate::convert::parse::<SendOptions>("send options", options)?.job(kind, args)?;
    job.check(remuda::client::DEFAULT_MAX_PAYLOAD)
        .map_err(crate::convert::from_remuda)
}
