//! Running one claimed job: decode, run with its timeout, turn a panic into a `PANIC` error,
//! say how the attempt ended (completed, an error to retry or not, a snooze) and hand that to
//! the completer. Whether a retryable error is retried or fails the job (attempts left) is
//! the database's decision, made when the outcome is written (`remuda.retry_or_fail`).

use super::activity::Ended;
use super::completer::{Outcome, Run};
use super::outcome::{AttemptTally, End};
use super::{Running, Shared};
use crate::db::{Jsonb, Tid};
use crate::task::{JobContext, TaskError};
use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

/// The log target of the line each job's start and end writes (at info): a program that logs
/// at info but not each job filters it out (`remuda::job=warn`), as `remuda worker` does
/// without `-v`.
pub const JOB_LOG: &str = "remuda::job";

/// A row returned by `claim.sql`.
pub(crate) struct Claimed {
    pub id: i64,
    pub kind: String,
    /// Its queue, shared by the jobs of one claim.
    pub queue: Arc<str>,
    pub attempt: i32,
    pub max_attempts: i32,
    pub timeout_ms: Option<i64>,
    pub args: Jsonb,
    /// The claim's time: with the attempt, the token that guards writes about this run.
    pub started_at: DateTime<Utc>,
    /// Where the claim left the row: the completer's hint for finding it again.
    pub tid: Tid,
    /// The job's flags (see migration 8): 0 for a plain job.
    pub flags: i32,
    /// A workflow node's document ({"id", "node", "context", "index"}): NULL for a plain job.
    pub workflow: Option<Jsonb>,
    /// When it could run (its wait is from here to the claim).
    pub run_at: DateTime<Utc>,
    /// The trace context it continues, as enqueued.
    pub trace: Option<crate::TraceContext>,
    /// Its fair-share group (see [`crate::NewJob::group`]), if any.
    pub group: Option<String>,
}

impl Claimed {
    /// The trace context of this attempt: the job's, with the attempt's own span as parent.
    pub fn attempt_trace(&self) -> Option<crate::TraceContext> {
        self.trace.as_ref().map(|t| {
            t.child(&crate::trace::attempt_span_id(
                self.id,
                self.attempt,
                self.started_at,
            ))
        })
    }

    /// This run, as the completer's writes name it.
    pub fn run(&self) -> Run {
        Run {
            id: self.id,
            attempt: self.attempt,
            started_at: self.started_at,
            tid: self.tid,
            flags: self.flags,
            ended: std::time::Instant::now(),
        }
    }
}

/// Runs the job to its outcome; the permit (the concurrency slot) is held until the outcome
/// is queued for writing, and the job stays in `shared.running` until then too (so that every
/// job of this worker is either listed there or has its outcome queued: see the producer's
/// orphan check).
pub(crate) async fn execute(
    shared: Arc<Shared>,
    mut job: Claimed,
    stop: Running,
    permit: OwnedSemaphorePermit,
) {
    // What is made before the attempt and read after it is made and read in plain functions
    // (`start`, `conclude`), so that this future holds only what crosses an await: it is
    // allocated and copied for every job.
    let outcome = match shared.tasks.get(&job.kind) {
        // cannot happen: the claim only returns kinds we registered; give it back untouched
        None => Outcome::Release { run: job.run() },
        // stopped at once before it started (an early cancel without grace, a fenced
        // worker): the task is never called
        Some(registered) if stop.hard.is_cancelled() => {
            conclude(&shared, &job, &stop, registered, None).outcome
        }
        Some(registered) => {
            let began = std::time::Instant::now();
            let (attempt, attempt_context) = start(&shared, &mut job, &stop, registered);
            let mut attempt = std::pin::pin!(attempt);
            // stopped at once while the task was called: its attempt is not polled
            let result = match stop.hard.is_cancelled() {
                true => None,
                false => match futures_util::poll!(attempt.as_mut()) {
                    std::task::Poll::Ready(result) => Some(result),
                    std::task::Poll::Pending => {
                        let grace = shared.config.cancel_grace;
                        Box::pin(until_stopped(attempt, &stop, grace)).await
                    }
                },
            };
            let ended = conclude(&shared, &job, &stop, registered, result);
            let ran = began.elapsed();
            report(&shared, &job, &ended, ran, attempt_context);
            let mut outcome = ended.outcome;
            let counted = tally(&mut job, &outcome, ran);
            if let Outcome::Ended { tally, .. } = &mut outcome {
                *tally = counted;
            }
            outcome
        }
    };
    if hand_over(&shared, outcome).await.is_err() {
        // the worker stops and says so once; the job will be rescued
        tracing::debug!(
            "remuda worker: completer gone before job {} was written",
            job.id
        );
    }
    super::finish_run(&shared.running, job.id, (job.attempt, job.started_at));
    drop(permit);
    shared.slot_freed.notify_one();
}

/// The attempt's result, or `None` when it was stopped first: aborted at once by a hard stop,
/// or `grace` after a soft one. Most attempts end at their first poll (`execute` makes it),
/// which waits on no stop signal (a wait registers with each token, under its lock, and
/// leaves it again); this wait, beside an attempt that goes on, is a future of its own
/// (boxed), so that its state (the tokens' waits, the grace's timer) is not in every job's.
async fn until_stopped(
    attempt: std::pin::Pin<&mut impl std::future::Future<Output = Ran>>,
    stop: &Running,
    grace: Duration,
) -> Option<Ran> {
    tokio::select! {
        biased;
        _ = stop.hard.cancelled() => None,
        _ = async { stop.soft.cancelled().await; tokio::time::sleep(grace).await } => None,
        result = attempt => Some(result),
    }
}

/// The job's context, and the attempt built on it (with the trace the attempt continues).
fn start(
    shared: &Shared,
    job: &mut Claimed,
    stop: &Running,
    registered: &super::Registered,
) -> (
    impl std::future::Future<Output = Ran>,
    Option<crate::TraceContext>,
) {
    let timeout = job
        .timeout_ms
        .and_then(|ms| u64::try_from(ms).ok())
        .map(Duration::from_millis)
        .or(registered.options.timeout);
    let workflow = job.workflow.as_ref().and_then(|doc| {
        doc.decode()
            .map_err(|e| tracing::warn!(job = job.id, error = %e, "the job's workflow document is not readable; the task runs without it"))
            .ok()
    });
    // the job's trace under the attempt's span; with spans exported, a job outside any
    // trace gets one of its own (one for all its attempts), and the sampler sets the flag
    let trace = match &shared.spans {
        None => job.attempt_trace(),
        Some(spans) => Some(spans.attempt_context(
            job.id,
            job.trace.as_ref(),
            &crate::trace::attempt_span_id(job.id, job.attempt, job.started_at),
        )),
    };
    let ctx = JobContext {
        id: job.id,
        kind: job.kind.clone(),
        queue: job.queue.to_string(),
        attempt: job.attempt,
        max_attempts: job.max_attempts,
        worker_id: shared.worker_id.clone(),
        cancel: stop.soft.clone(),
        stop: stop.signal.clone(),
        timeout,
        workflow,
        steps: crate::step::Steps::attached(
            shared.steps.clone(),
            job.id,
            job.attempt,
            job.started_at,
        ),
        trace: trace.clone(),
        group: job.group.clone(),
    };
    let args = std::mem::replace(&mut job.args, Jsonb(String::new()));
    tracing::info!(target: JOB_LOG, job = job.id, kind = %job.kind, queue = %job.queue, attempt = job.attempt, worker = %shared.worker_id, "job started");
    // the attempt's trace is current in the task: what it enqueues continues it
    // the attempt's `tracing` span: under remuda's own span of the attempt when that is
    // exported, else it is the attempt's span, under the job's enqueuer or linked to it
    use crate::telemetry::{tracing_spans, Propagation};
    let place = match (&shared.spans, shared.config.telemetry.propagation) {
        (Some(_), _) => tracing_spans::AttemptSpan::UnderExported(trace.as_ref()),
        (None, Propagation::Child) => tracing_spans::AttemptSpan::Child(job.trace.as_ref()),
        (None, Propagation::Link) => tracing_spans::AttemptSpan::Linked(job.trace.as_ref()),
    };
    let span = tracing_spans::attempt_span(&job.kind, &job.queue, job.id, job.attempt, place);
    let attempt = attempt(
        registered.task.clone(),
        ctx,
        args,
        trace.clone(),
        timeout,
        span,
    );
    (attempt, trace)
}

/// How an attempt ended: the outcome to write, and what its span and log line say.
struct Conclusion {
    outcome: Outcome,
    /// "completed", "snoozed", "stopped" or "error CODE".
    said: String,
    /// The error's code and message, for the span (only with spans exported).
    error: Option<(String, String)>,
}

/// The outcome of an attempt that ended in `result` (`None`: stopped before it returned).
fn conclude(
    shared: &Shared,
    job: &Claimed,
    stop: &Running,
    registered: &super::Registered,
    result: Option<Ran>,
) -> Conclusion {
    let release = || Outcome::Release { run: job.run() };
    // a task that saw the stop and returned was cut short, whatever it returned
    let cut_short = stop.soft.is_cancelled() && stop.signal.was_seen();
    let stopped = || Conclusion {
        outcome: release(),
        said: "stopped".to_string(),
        error: None,
    };
    let failed = |error: TaskError| {
        let said = format!("error {}", error.code);
        let spoken = shared
            .spans
            .is_some()
            .then(|| (error.code.clone(), error.message.clone()));
        Conclusion {
            outcome: failure(shared, job, &registered.options, error),
            said,
            error: spoken,
        }
    };
    let ended = match result {
        // aborted after a stop (shutdown, cancel, fencing): give the job back. The release is
        // guarded by state, worker and attempt, so a job really cancelled (or rescued) is
        // left as it is, and one stopped by a stale cancel runs again.
        None => stopped(),
        Some(Ok(_)) if cut_short => stopped(),
        Some(Ok(Ok(output))) => Conclusion {
            outcome: success(shared, job, output),
            said: "completed".to_string(),
            error: None,
        },
        // an error after being asked to stop is most likely the stop itself: not counted
        Some(Ok(Err(_))) if stop.soft.is_cancelled() => stopped(),
        Some(Ok(Err(error))) if error.snooze.is_some() => Conclusion {
            outcome: snooze(job, &error),
            said: "snoozed".to_string(),
            error: None,
        },
        Some(Ok(Err(error))) => failed(error),
        Some(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the task panicked".into());
            failed(TaskError::new(
                TaskError::PANIC,
                format!("the task panicked: {message}"),
            ))
        }
    };
    // a cancelled job is not given back: its release finds it cancelled and leaves it
    if matches!(ended.outcome, Outcome::Release { .. })
        && stop.signal.reason() != Some(crate::task::StopReason::Cancel)
    {
        shared
            .stats
            .released
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    ended
}

/// Tells of an ended attempt: its span, its log line.
fn report(
    shared: &Shared,
    job: &Claimed,
    ended: &Conclusion,
    ran: Duration,
    context: Option<crate::TraceContext>,
) {
    if let (Some(spans), Some(context)) = (&shared.spans, context) {
        let (parent, link) = spans.enqueuer(job.trace.as_ref());
        spans.record(crate::telemetry::Attempt {
            job_id: job.id,
            kind: job.kind.clone(),
            queue: job.queue.to_string(),
            attempt: job.attempt,
            worker: shared.worker_id.to_string(),
            run_at: job.run_at,
            started_at: job.started_at,
            context,
            parent,
            link,
            outcome: match ended.said.split(' ').next() {
                Some("completed") => "completed",
                Some("snoozed") => "snoozed",
                Some("stopped") => "stopped",
                _ => "error",
            },
            error: ended.error.clone(),
        });
    }
    tracing::info!(
        target: JOB_LOG,
        job = job.id,
        kind = %job.kind,
        attempt = job.attempt,
        worker = %shared.worker_id,
        outcome = %ended.said,
        ms = ran.as_millis() as u64,
        "job ended"
    );
}

/// Queues an outcome for the completer: at once, as there is room for every running job's
/// outcome, or in a future of its own when there is not. Sending with `send().await` kept that
/// future (a quarter of the attempt's state) in every job's.
async fn hand_over(shared: &Shared, outcome: Outcome) -> Result<(), ()> {
    use tokio::sync::mpsc::error::TrySendError;
    match shared.completer.try_send(outcome) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(outcome)) => Box::pin(shared.completer.send(outcome))
            .await
            .map_err(|_| ()),
        Err(TrySendError::Closed(_)) => Err(()),
    }
}

/// What a task's call and its future end in: its result, or the panic it raised.
type Ran = std::thread::Result<Result<Jsonb, TaskError>>;

/// The task's attempt under its trace and timeout, a panic in the call itself or in its
/// future caught. Built of plain futures, with no `async` block holding the job's context
/// beside the future made from it: every layer of those copied the context again, and the
/// attempt's future (allocated and copied for every job) was 3 kB.
fn attempt(
    task: Arc<dyn crate::task::DynTask>,
    ctx: JobContext,
    args: Jsonb,
    trace: Option<crate::TraceContext>,
    timeout: Option<Duration>,
    span: tracing::Span,
) -> impl std::future::Future<Output = Ran> {
    use futures_util::future::{ready, Either};
    // A job outside any trace (or group) runs with no context set, which reads as none: this
    // task (the executor's own) has no outer context to hide, and the scope cost every job a
    // task-local swap at each poll.
    let group = ctx.group.clone();
    let call = || std::panic::catch_unwind(AssertUnwindSafe(|| task.run(ctx, args)));
    let grouped_call = || match &group {
        Some(_) => crate::group::sync_scope(group.clone(), call),
        None => call(),
    };
    let traced_call = || match &trace {
        Some(_) => crate::trace::sync_scope(trace.clone(), grouped_call),
        None => grouped_call(),
    };
    let called = match span.is_disabled() {
        true => traced_call(),
        false => span.in_scope(traced_call),
    };
    let run = match called {
        Ok(future) => {
            let grouped = match group {
                Some(group) => Either::Left(crate::group::scope(Some(group), future)),
                None => Either::Right(future),
            };
            let traced = match trace {
                Some(trace) => Either::Left(crate::trace::scope(Some(trace), grouped)),
                None => Either::Right(grouped),
            };
            let spanned = match span.is_disabled() {
                true => Either::Right(traced),
                false => Either::Left(traced.instrument(span)),
            };
            Either::Left(AssertUnwindSafe(spanned).catch_unwind())
        }
        Err(panic) => Either::Right(ready(Err(panic))),
    };
    match timeout {
        Some(limit) => Either::Left(tokio::time::timeout(limit, run).map(move |ended| {
            ended.unwrap_or_else(|_| {
                Ok(Err(TaskError::new(
                    TaskError::TIMEOUT,
                    format!(
                        "the attempt ran longer than its timeout of {}",
                        crate::duration::format(limit)
                    ),
                )))
            })
        })),
        None => Either::Right(run),
    }
}

/// What the attempt adds to the worker's metrics and activity tally, counted by the completer
/// with the rest of its batch (see `AttemptTally`). Takes the job's kind, which it no longer needs.
fn tally(job: &mut Claimed, outcome: &Outcome, ran: Duration) -> Option<AttemptTally> {
    let Outcome::Ended { end, .. } = outcome else {
        return None;
    };
    let ended = match end {
        End::Completed { .. } => Ended::Completed,
        End::Failed { .. } => Ended::Failed,
        End::Retry { .. } if job.attempt >= job.max_attempts => Ended::Failed,
        End::Retry { .. } => Ended::Retried,
        End::Snooze { .. } => return None,
    };
    let waited = (job.started_at - job.run_at)
        .num_microseconds()
        .unwrap_or(0)
        .max(0) as f64
        / 1e6;
    Some(AttemptTally {
        queue: job.queue.clone(),
        kind: std::mem::take(&mut job.kind),
        ended,
        waited,
        ran: ran.as_secs_f64(),
    })
}

fn success(shared: &Shared, job: &Claimed, output: Jsonb) -> Outcome {
    if output.len() > shared.max_payload {
        let error = TaskError::permanent(
            "RESULT_TOO_LARGE",
            format!(
                "the task returned {} bytes, over the limit of {} bytes; store large results elsewhere and return a reference",
                output.len(),
                shared.max_payload
            ),
        );
        return final_failure(shared, job, error);
    }
    if output.0.contains("\\u0000") {
        let error = TaskError::permanent(
            "RESULT_INVALID",
            "the result contains a NUL character (\\u0000), which PostgreSQL's jsonb cannot store",
        );
        return final_failure(shared, job, error);
    }
    let mut text = String::with_capacity(output.0.len() + 7);
    text.push_str("{\"ok\":");
    text.push_str(&output.0);
    text.push('}');
    Outcome::Ended {
        tally: None,
        run: job.run(),
        end: End::Completed {
            result: Jsonb(text),
        },
    }
}

/// Makes an error storable: NUL characters (which `jsonb` refuses) become U+FFFD, and an
/// error over the payload limit is replaced (not truncated) by one that says so.
fn bounded(shared: &Shared, error: TaskError) -> TaskError {
    let clean = |text: String| {
        if text.contains('\0') {
            text.replace('\0', "\u{FFFD}")
        } else {
            text
        }
    };
    let data = error.data.map(|d| {
        let text = d.to_string();
        if text.contains("\\u0000") {
            serde_json::from_str(&text.replace("\\u0000", "\\ufffd"))
                .unwrap_or(serde_json::Value::Null)
        } else {
            d
        }
    });
    let error = TaskError {
        code: clean(error.code),
        message: clean(error.message),
        data,
        ..error
    };
    let size = error.code.len()
        + error.message.len()
        + error.data.as_ref().map_or(0, |d| d.to_string().len());
    if size <= shared.max_payload {
        return error;
    }
    let code: String = error.code.chars().take(64).collect();
    TaskError {
        code: "ERROR_TOO_LARGE".into(),
        message: format!(
            "the task failed with error {code} whose code, message and data are {size} bytes, over the limit of {} bytes",
            shared.max_payload
        ),
        data: None,
        retryable: error.retryable,
        snooze: None,
    }
}

fn error_entry(shared: &Shared, job: &Claimed, error: &TaskError) -> Jsonb {
    let mut entry = serde_json::json!({
        "attempt": job.attempt,
        "started_at": job.started_at,
        "at": Utc::now(),
        "code": error.code,
        "message": error.message,
        "worker": &*shared.worker_id,
    });
    if let (Some(data), Some(map)) = (&error.data, entry.as_object_mut()) {
        map.insert("data".into(), data.clone());
    }
    Jsonb(entry.to_string())
}

/// The job's result should this error end it: `{"err": {code, message, data}}`, with
/// `retryable` when the task said it.
fn error_result(error: &TaskError) -> Jsonb {
    let mut err =
        serde_json::json!({"code": error.code, "message": error.message, "data": error.data});
    if let (Some(retryable), Some(map)) = (error.retryable, err.as_object_mut()) {
        map.insert("retryable".into(), retryable.into());
    }
    Jsonb(serde_json::json!({ "err": err }).to_string())
}

fn final_failure(shared: &Shared, job: &Claimed, error: TaskError) -> Outcome {
    Outcome::Ended {
        tally: None,
        run: job.run(),
        end: End::Failed {
            result: error_result(&error),
            error: Some(error_entry(shared, job, &error)),
        },
    }
}

fn snooze(job: &Claimed, error: &TaskError) -> Outcome {
    Outcome::Ended {
        tally: None,
        run: job.run(),
        end: End::Snooze {
            delay: error.snooze.unwrap_or_default(),
        },
    }
}

/// An error: retried after the task's backoff when its policy retries this error (and the
/// job has attempts left, which the database decides), failing the job otherwise.
fn failure(
    shared: &Shared,
    job: &Claimed,
    options: &crate::TaskOptions,
    error: TaskError,
) -> Outcome {
    let error = bounded(shared, error);
    if !options.retries(&error) {
        return final_failure(shared, job, error);
    }
    Outcome::Ended {
        tally: None,
        run: job.run(),
        end: End::Retry {
            result: error_result(&error),
            error: error_entry(shared, job, &error),
            delay: options.backoff.delay(job.attempt),
        },
    }
}
