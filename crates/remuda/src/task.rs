//! Tasks: the code a job runs. A [`Task`] has a kind name, typed arguments and output, and
//! defaults for the jobs enqueued for it; it returns its output or a [`TaskError`].
//!
//! ```no_run
//! use remuda::{JobContext, Task, TaskError, TaskOptions};
//! use serde::{Deserialize, Serialize};
//!
//! struct SendEmail;
//!
//! #[derive(Serialize, Deserialize)]
//! struct Email { to: String }
//!
//! impl Task for SendEmail {
//!     const KIND: &'static str = "send_email";
//!     type Args = Email;
//!     type Output = String;
//!
//!     fn options() -> TaskOptions {
//!         TaskOptions::default().queue("mail").max_attempts(5)
//!     }
//!
//!     async fn run(&self, _ctx: JobContext, args: Email) -> Result<String, TaskError> {
//!         if args.to.is_empty() {
//!             return Err(TaskError::permanent("NO_RECIPIENT", "the email has no recipient"));
//!         }
//!         Ok(format!("sent to {}", args.to))
//!     }
//! }
//! ```

use crate::db::Jsonb;
use crate::retry::Backoff;
use futures_util::future::BoxFuture;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Code a job of one kind runs.
pub trait Task: Send + Sync + 'static {
    /// The kind name jobs are enqueued under.
    const KIND: &'static str;
    /// Arguments, stored as JSON in the job.
    type Args: Serialize + DeserializeOwned + Send + 'static;
    /// Output, stored as JSON in the job's `{"ok": …}` result.
    type Output: Serialize + Send + 'static;

    /// Defaults for this kind's jobs (queue, priority, attempts, backoff, timeout).
    fn options() -> TaskOptions
    where
        Self: Sized,
    {
        TaskOptions::default()
    }

    /// Runs one attempt.
    fn run(
        &self,
        ctx: JobContext,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Output, TaskError>> + Send;
}

/// What a job being run knows about itself.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The job's id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// The queue it was claimed from.
    pub queue: String,
    /// This attempt's number, from 1.
    pub attempt: i32,
    /// Attempts allowed in all.
    pub max_attempts: i32,
    /// The worker running it.
    pub worker_id: Arc<str>,
    /// This attempt's time limit (the job's own, else its kind's), if any: the worker stops
    /// the attempt with `TIMEOUT` when it runs out. Tasks that call out (HTTP) may pass it on.
    pub timeout: Option<std::time::Duration>,
    /// Fires when the attempt must stop: the job was cancelled, the worker is shutting down,
    /// or it lost contact with the database for too long. A task that ignores it is
    /// aborted after the worker's `cancel_grace`. Read it through [`JobContext::is_cancelled`],
    /// [`JobContext::cancelled`] or [`JobContext::stop_reason`]: those tell the worker that
    /// the task saw the stop (see [`StopSignal`]).
    pub cancel: CancellationToken,
    /// Why the attempt was asked to stop, and whether the task saw it.
    pub stop: StopSignal,
    /// For a workflow node's job: its run, its node, and the results it may read.
    pub workflow: Option<crate::workflow::WorkflowContext>,
    /// The steps this job recorded, read and written through [`JobContext::step`] and
    /// [`JobContext::sleep`]. [`Steps::default`](crate::step::Steps) (a context made outside
    /// a worker, as in a task's unit test) runs each step and keeps it in memory only.
    pub steps: crate::step::Steps,
    /// The W3C trace context of this attempt, when the job continues a trace: the job's trace,
    /// with the attempt's own span as parent. A task passes it on to what it calls (the
    /// `traceparent` header); jobs it enqueues carry it on by themselves.
    pub trace: Option<crate::TraceContext>,
    /// The job's fair-share group, if it has one (see [`crate::NewJob::group`]): the tenant
    /// it works for. Jobs the task enqueues and workflows it starts take it unless they name
    /// their own.
    pub group: Option<String>,
}

impl JobContext {
    /// Whether the attempt was asked to stop. A `true` answer counts as the task seeing the
    /// stop: whatever it returns afterwards, the job is given back unfinished (not for a
    /// cancel, which ends it) without spending the attempt.
    pub fn is_cancelled(&self) -> bool {
        let stopped = self.cancel.is_cancelled();
        if stopped {
            self.stop.mark_seen();
        }
        stopped
    }

    /// Resolves when the attempt is asked to stop (for `tokio::select!` beside the work);
    /// the task has then seen the stop (see [`JobContext::is_cancelled`]).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
        self.stop.mark_seen();
    }

    /// Why the attempt was asked to stop, or `None` while it runs on; an answer counts as
    /// the task seeing the stop. A task tells a shutdown (its job runs again elsewhere)
    /// from a cancel (its job ends) by it.
    pub fn stop_reason(&self) -> Option<StopReason> {
        if !self.cancel.is_cancelled() {
            return None;
        }
        self.stop.mark_seen();
        Some(self.stop.reason().unwrap_or(StopReason::Shutdown))
    }
}

/// Why a running attempt is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The job was cancelled: it ends cancelled, whatever the task returns.
    Cancel,
    /// The worker is shutting down: the job is given back for another worker.
    Shutdown,
    /// The attempt ran past its timeout.
    Timeout,
    /// The worker lost contact with the database for too long and may have been declared
    /// dead: its jobs may already run elsewhere.
    Fenced,
}

impl StopReason {
    /// `cancel`, `shutdown`, `timeout` or `fenced`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Cancel => "cancel",
            StopReason::Shutdown => "shutdown",
            StopReason::Timeout => "timeout",
            StopReason::Fenced => "fenced",
        }
    }
}

/// The stop of one attempt: the reason it was asked for (the first one given) and whether
/// the task saw it. A task that saw the stop and then returned was cut short, so the worker
/// gives its job back without spending an attempt instead of storing a partial result; a
/// task that finished without looking completes as usual.
#[derive(Clone, Debug, Default)]
pub struct StopSignal(Arc<StopState>);

/// What a [`StopSignal`] shares between the worker and the task (one allocation a job).
#[derive(Debug, Default)]
struct StopState {
    reason: OnceLock<StopReason>,
    seen: AtomicBool,
}

impl StopSignal {
    /// Records why the attempt is stopped (a later reason does not replace the first).
    pub fn set_reason(&self, reason: StopReason) {
        let _ = self.0.reason.set(reason);
    }

    /// The reason given, if any (without counting as seen). A stop with none given is the
    /// worker's shutdown.
    pub fn reason(&self) -> Option<StopReason> {
        self.0.reason.get().copied()
    }

    /// Records that the task saw the stop (a bridge to another runtime says it for its task).
    pub fn mark_seen(&self) {
        self.0.seen.store(true, Ordering::Relaxed);
    }

    /// Whether the task saw the stop.
    pub fn was_seen(&self) -> bool {
        self.0.seen.load(Ordering::Relaxed)
    }
}

/// An error returned by a task: a stable code, a message, optional data, and whether it may
/// be retried at all.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskError {
    /// Stable, machine-readable code (`TIMEOUT`, `PANIC`, `EXIT_2`, or the task's own).
    pub code: String,
    /// What happened, for people.
    pub message: String,
    /// Structured details, stored with the error.
    pub data: Option<Value>,
    /// `Some(false)`: never retry. Otherwise the kind's retry policy decides.
    pub retryable: Option<bool>,
    /// Not an error but "try again in this long" ([`TaskError::snooze`]): the job waits
    /// without using up an attempt and without an entry in its error history.
    pub snooze: Option<Duration>,
}

impl TaskError {
    /// An error the kind's retry policy decides about.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        TaskError {
            code: code.into(),
            message: message.into(),
            data: None,
            retryable: None,
            snooze: None,
        }
    }

    /// Runs the job again after `delay` without counting this attempt (River's `JobSnooze`):
    /// for work that is not ready yet, such as polling for an external result.
    pub fn snooze(delay: Duration) -> Self {
        TaskError {
            snooze: Some(delay),
            ..TaskError::new(
                TaskError::SNOOZE,
                format!("snoozed for {}", crate::duration::format(delay)),
            )
        }
    }

    /// An error that must not be retried (bad input, a 4xx answer).
    pub fn permanent(code: impl Into<String>, message: impl Into<String>) -> Self {
        TaskError {
            retryable: Some(false),
            ..TaskError::new(code, message)
        }
    }

    /// Attaches structured data.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Error code for a panic in the task.
    pub const PANIC: &'static str = "PANIC";
    /// Error code for an attempt that ran past its timeout.
    pub const TIMEOUT: &'static str = "TIMEOUT";
    /// Error code for an output that is not JSON.
    pub const INVALID_OUTPUT: &'static str = "INVALID_OUTPUT";
    /// Code of [`TaskError::snooze`] (never stored: a snooze is not a failure).
    pub const SNOOZE: &'static str = "SNOOZE";
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for TaskError {}

/// Defaults for the jobs of one kind, and how the worker treats their errors.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskOptions {
    /// Queue new jobs go to.
    pub queue: String,
    /// Priority of new jobs; lower runs first.
    pub priority: i32,
    /// Attempts allowed, the first included.
    pub max_attempts: i32,
    /// Wait between attempts.
    pub backoff: Backoff,
    /// Error codes that are retried; `None` retries every error not marked permanent.
    pub retry_on: Option<Vec<String>>,
    /// Longest an attempt may run; `None` for no limit.
    pub timeout: Option<Duration>,
    /// Who hears of the final states of this kind's jobs that have no target of their own:
    /// the worker registers it when it starts (the last worker started wins).
    pub notify: Option<crate::notify::NotifyTarget>,
    /// For a task that takes a batch (`type Args = Vec<…>`): its batch runs when this many
    /// enqueues have joined it ([`Client::enqueue_to_batch`](crate::Client::enqueue_to_batch)).
    pub batch_size: Option<i32>,
    /// … or when this long has passed since the first.
    pub batch_wait: Option<Duration>,
    /// A debounce for this kind's jobs enqueued with a unique key and no formation of their
    /// own ([`NewJob::for_task`](crate::NewJob::for_task) then `unique_key`): declared once,
    /// the same for every enqueue.
    pub debounce: Option<Duration>,
    /// … capped at this long from the first enqueue.
    pub debounce_max: Option<Duration>,
    /// A throttle for them instead (one start per period).
    pub throttle: Option<Duration>,
    /// … whose waiting job takes the latest enqueue's args.
    pub throttle_latest: bool,
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            queue: "default".into(),
            priority: 0,
            max_attempts: 25,
            backoff: Backoff::default(),
            retry_on: None,
            timeout: None,
            notify: None,
            batch_size: None,
            batch_wait: None,
            debounce: None,
            debounce_max: None,
            throttle: None,
            throttle_latest: false,
        }
    }
}

impl TaskOptions {
    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Sets the number of attempts.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }
    /// Sets the backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }
    /// Retries only errors with these codes.
    pub fn retry_on<I: IntoIterator<Item = S>, S: Into<String>>(mut self, codes: I) -> Self {
        self.retry_on = Some(codes.into_iter().map(Into::into).collect());
        self
    }
    /// Sets the timeout of one attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Makes this a task that takes batches: enqueues to one batch key accumulate into one
    /// job, run when `size` have joined or `wait` has passed since the first.
    pub fn batch(mut self, size: i32, wait: Duration) -> Self {
        self.batch_size = Some(size);
        self.batch_wait = Some(wait);
        self
    }
    /// Debounces this kind's jobs enqueued with a unique key (and no formation of their
    /// own) by `delay`, a stream of enqueues postponing one at most `max` from the first.
    pub fn debounce(mut self, delay: Duration, max: Option<Duration>) -> Self {
        self.debounce = Some(delay);
        self.debounce_max = max;
        self
    }
    /// Throttles this kind's jobs enqueued with a unique key (and no formation of their own)
    /// to one start per `period`; with `latest`, the waiting job takes the latest args.
    pub fn throttle(mut self, period: Duration, latest: bool) -> Self {
        self.throttle = Some(period);
        self.throttle_latest = latest;
        self
    }
    /// The formation of this kind's keyed enqueues (its debounce or throttle), checked as an
    /// enqueue's own is.
    pub fn keyed_formation(&self, kind: &str) -> crate::Result<Option<crate::client::Formation>> {
        if [self.debounce, self.throttle]
            .iter()
            .any(|d| d.is_some_and(|d| d.is_zero()))
        {
            return Err(crate::Error::InvalidInput(format!(
                "task {kind}: a debounce or throttle must be more than zero"
            )));
        }
        crate::client::FormationParts {
            debounce: self.debounce,
            debounce_max: self.debounce_max,
            throttle: self.throttle,
            throttle_latest: self.throttle_latest,
            ..Default::default()
        }
        .formation(kind)
    }

    /// Notifies `target` of the final states of this kind's jobs without a target of their
    /// own.
    pub fn notify(mut self, target: crate::notify::NotifyTarget) -> Self {
        self.notify = Some(target);
        self
    }

    /// Checks the options of task `kind` as [`Worker::run`](crate::Worker::run) does when it
    /// starts: a kind with `max_attempts` below 1 could never be claimed (every claim of it
    /// would violate a constraint) and would stall its queue.
    pub fn validate(&self, kind: &str) -> crate::Result<()> {
        let bad = |what: String| Err(crate::Error::InvalidInput(format!("task {kind}: {what}")));
        crate::names::check_name("kind", kind)?;
        if let Err(e) = crate::names::check_name("queue", &self.queue) {
            return bad(e.to_string());
        }
        if self.max_attempts < 1 {
            return bad(format!(
                "max_attempts is {}: it must be at least 1",
                self.max_attempts
            ));
        }
        if matches!(self.timeout, Some(t) if t.is_zero()) {
            return bad("timeout must be more than zero".into());
        }
        if let Err(e) = self.backoff.validate() {
            return bad(e);
        }
        if matches!(self.batch_size, Some(n) if n < 1) {
            return bad("batch_size must be at least 1".into());
        }
        if matches!(self.batch_wait, Some(w) if w.is_zero()) {
            return bad("batch_wait must be more than zero".into());
        }
        if self.batch_size.is_some() != self.batch_wait.is_some() {
            return bad("a task that takes batches needs both batch_size and batch_wait".into());
        }
        if let Some(Err(e)) = self.notify.as_ref().map(|n| n.validate()) {
            return bad(format!("notify: {e}"));
        }
        if let Err(e) = self.keyed_formation(kind) {
            return bad(e.to_string());
        }
        Ok(())
    }

    /// Whether this policy retries `error`: an error the task did not mark permanent, and
    /// one of the codes in [`TaskOptions::retry_on`] if set. The job then gets another attempt
    /// if it has any left, which the database decides as it writes the outcome (one rule for
    /// every error, a lost worker's included).
    pub fn retries(&self, error: &TaskError) -> bool {
        error.retryable != Some(false)
            && self
                .retry_on
                .as_ref()
                .is_none_or(|codes| codes.contains(&error.code))
    }
}

/// A task behind a uniform interface: JSON in, JSON out. The worker runs these; [`Task`]s are
/// wrapped into one, and the CLI's command and HTTP tasks implement it directly.
pub trait DynTask: Send + Sync + 'static {
    /// Runs one attempt with the job's raw JSON arguments.
    fn run(
        self: Arc<Self>,
        ctx: JobContext,
        args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>>;
}

/// Adapts a typed [`Task`] to [`DynTask`].
pub(crate) struct Typed<T>(pub T);

impl<T: Task> DynTask for Typed<T> {
    fn run(
        self: Arc<Self>,
        ctx: JobContext,
        args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>> {
        Box::pin(async move {
            let args: T::Args = args.decode().map_err(|e| {
                TaskError::permanent(
                    "INVALID_ARGS",
                    format!("arguments do not fit task {}: {e}", T::KIND),
                )
            })?;
            let output = self.0.run(ctx, args).await?;
            Jsonb::encode(&output).map_err(|e| {
                TaskError::permanent(
                    TaskError::INVALID_OUTPUT,
                    format!("output of {} is not JSON: {e}", T::KIND),
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_decision_follows_policy() {
        let all = TaskOptions::default();
        let err = TaskError::new("BOOM", "x");
        assert!(all.retries(&err));
        assert!(!all.retries(&TaskError::permanent("BAD", "x")));
        let only_timeout = TaskOptions::default().retry_on(["TIMEOUT"]);
        assert!(!only_timeout.retries(&err));
        assert!(only_timeout.retries(&TaskError::new("TIMEOUT", "x")));
    }
}
