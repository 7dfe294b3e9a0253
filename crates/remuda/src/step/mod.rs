//! Durable steps: a task records the output of each step of its work, and a later attempt of
//! the same job returns the recorded output instead of running the step again, so a retry
//! after a crash resumes after the last completed step (a card charged once, an email sent
//! once). Steps are kept in `remuda.steps` (migration 21), written only for the run that
//! holds the job (its worker, attempt and claim time): a stale worker's step is refused.
//!
//! ```no_run
//! # use remuda::{JobContext, TaskError};
//! # async fn run(ctx: JobContext) -> Result<String, TaskError> {
//! let charge: String = ctx.step("charge", || async { Ok("ch_123".to_string()) }).await?;
//! ctx.sleep(std::time::Duration::from_secs(3600)).await?; // the job is released meanwhile
//! ctx.step("receipt", || async { Ok(()) }).await?;
//! # Ok(charge) }
//! ```

mod options;
pub mod socket;
mod writer;
#[cfg(test)]
mod writer_tests;

use crate::db::Database;
use crate::task::{JobContext, TaskError};
use chrono::{DateTime, Utc};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest a step's name may be, in bytes.
pub const MAX_NAME: usize = 200;

/// Error code of a step whose stored output no longer fits the type the task asks for.
pub const STEP_OUTPUT: &str = "STEP_OUTPUT";
/// Error code of a step that could not be read or recorded (the database is unreachable).
pub const STEP_STORE: &str = "STEP_STORE";
/// Error code of a step recorded by a run that no longer holds its job.
pub const FENCED: &str = "FENCED";
/// The names of durable sleeps: `sleep-1`, `sleep-2`, … (a step may not take them).
pub const SLEEP_PREFIX: &str = "sleep-";
/// Error code of a step name that is empty, too long, has a control character or is a
/// durable sleep's.
pub const INVALID_STEP: &str = "INVALID_STEP";
/// Error code of a step whose output is over [`MAX_OUTPUT`].
pub const STEP_TOO_LARGE: &str = "STEP_TOO_LARGE";
/// Error code of a step past a job's [`MAX_STEPS`].
pub const STEP_LIMIT: &str = "STEP_LIMIT";
/// The largest output a step records, in bytes of JSON: a step keeps results, not data
/// (Inngest's cap is 4 MB).
pub const MAX_OUTPUT: usize = 8 << 20;
/// The most steps (durable sleeps included) one job records (Inngest's cap is 1 000).
pub const MAX_STEPS: usize = 1000;
pub use options::{StepOptions, STEP_TIMEOUT};

/// The environment variable in which `remuda step` hands its command the step's key.
pub const KEY_ENV: &str = "REMUDA_STEP_KEY";

/// The idempotency key of step `name` of job `job_id`: `"<job id>:<name>"`, the same on every
/// attempt of the job, and different for every step of every job of one database. A step
/// runs at least once (a crash between its side effect and its record runs it again on the
/// next attempt); handed to what it calls (a payment API's idempotency key, a unique
/// constraint), the key makes the side effect happen once.
pub fn key(job_id: i64, name: &str) -> String {
    format!("{job_id}:{name}")
}

/// The steps of one run of a job: what earlier attempts recorded (read once, at the first
/// step), and the link to the database to record new ones. Cloned with its [`JobContext`].
#[derive(Clone, Default)]
pub struct Steps(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// `None`: a context made outside a worker (a task's unit test): steps run and are kept
    /// in memory only.
    link: Option<Link>,
    /// Name → output (JSON text): `None` until read.
    recorded: tokio::sync::Mutex<Option<HashMap<String, String>>>,
    /// Durable sleeps taken so far in this attempt: the next one's name.
    sleeps: AtomicU32,
    /// The end of the last sleep this attempt was told had time left: what the attempt
    /// snoozes for when its task stops to sleep ([`Steps::sleeping`]).
    asleep_until: std::sync::Mutex<Option<DateTime<Utc>>>,
}

/// Where a worker's runs read and record their steps: one per worker, shared by its runs.
pub(crate) struct Store {
    /// Its step writer and reader (see `writer.rs`).
    writer: tokio::sync::mpsc::Sender<writer::Record>,
    reader: tokio::sync::mpsc::Sender<writer::Read>,
}

impl Store {
    /// The store of worker `worker`, with its writer and reader started.
    pub(crate) fn new(db: Database, worker: Arc<str>) -> Self {
        Store {
            writer: writer::spawn(db.clone(), worker),
            reader: writer::spawn_reader(db),
        }
    }
}

/// Which run records: the fencing token every write about a run carries.
struct Link {
    store: Arc<Store>,
    job: i64,
    attempt: i32,
    started_at: DateTime<Utc>,
}

impl std::fmt::Debug for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steps")
            .field("job", &self.0.link.as_ref().map(|l| l.job))
            .finish()
    }
}

impl Steps {
    /// The steps of attempt `attempt` of job `job`, claimed at `started_at` by the worker
    /// of `store`.
    pub(crate) fn attached(
        store: Arc<Store>,
        job: i64,
        attempt: i32,
        started_at: DateTime<Utc>,
    ) -> Self {
        Steps(Arc::new(Inner {
            link: Some(Link {
                store,
                job,
                attempt,
                started_at,
            }),
            ..Default::default()
        }))
    }

    /// The output recorded under step `name` (JSON text), if an attempt recorded it; a step
    /// not recorded yet past the job's [`MAX_STEPS`] is refused here, before it runs.
    pub async fn recorded(&self, name: &str) -> Result<Option<String>, TaskError> {
        check_name(name)?;
        let known = self.recorded_as(name).await?;
        if known.is_none() {
            self.check_count(name).await?;
        }
        Ok(known)
    }

    /// The output recorded under `name`, a step's or a durable sleep's.
    async fn recorded_as(&self, name: &str) -> Result<Option<String>, TaskError> {
        let mut recorded = self.0.recorded.lock().await;
        if recorded.is_none() {
            *recorded = Some(self.read().await?);
        }
        Ok(recorded.as_ref().and_then(|r| r.get(name).cloned()))
    }

    /// Records `output` (JSON text) under `name` for this run and returns the output now
    /// recorded under it: `output`, or the first one when the name was recorded already.
    /// Refused with [`FENCED`] when the run no longer holds its job.
    pub async fn record(&self, name: &str, output: String) -> Result<String, TaskError> {
        check_name(name)?;
        self.record_as(name, output).await
    }

    /// Records `output` under `name`, a step's or a durable sleep's.
    async fn record_as(&self, name: &str, output: String) -> Result<String, TaskError> {
        if let Some(stored) = self.recorded_as(name).await? {
            return Ok(stored);
        }
        if output.len() > MAX_OUTPUT {
            return Err(TaskError::permanent(
                STEP_TOO_LARGE,
                format!(
                    "the output of step {name:?} is {} bytes of JSON: a step records at most {} MiB; keep large data elsewhere (a file, object storage) and record where it is",
                    output.len(),
                    MAX_OUTPUT >> 20
                ),
            ));
        }
        // parsed whole, as PostgreSQL's json input will (a lone surrogate escape is refused)
        if serde_json::from_str::<serde_json::Value>(&output).is_err() {
            return Err(TaskError::permanent(
                crate::task::TaskError::INVALID_OUTPUT,
                format!("the output of step {name:?} is not JSON"),
            ));
        }
        self.check_count(name).await?;
        let stored = match &self.0.link {
            None => output,
            Some(link) => link.record(name, &output).await?,
        };
        // remembered only once what earlier attempts recorded has been read: a record made
        // first must not stand for all of them
        let mut recorded = self.0.recorded.lock().await;
        Ok(match recorded.as_mut() {
            Some(known) => known.entry(name.to_string()).or_insert(stored).clone(),
            None => stored,
        })
    }

    /// Refuses new step `name` when the job has recorded [`MAX_STEPS`] (read first).
    async fn check_count(&self, name: &str) -> Result<(), TaskError> {
        let count = self
            .0
            .recorded
            .lock()
            .await
            .as_ref()
            .map_or(0, HashMap::len);
        if count < MAX_STEPS {
            return Ok(());
        }
        Err(TaskError::permanent(
            STEP_LIMIT,
            format!(
                "step {name:?} would be the job's step number {}: a job records at most {MAX_STEPS} steps (durable sleeps included); split the work into jobs (a workflow, a map)",
                MAX_STEPS + 1
            ),
        ))
    }

    /// Every step recorded for the job, read once per run.
    async fn read(&self) -> Result<HashMap<String, String>, TaskError> {
        let Some(link) = &self.0.link else {
            return Ok(HashMap::new());
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let gone = || TaskError::new(STEP_STORE, "the worker's step reader has stopped");
        let read = writer::Read {
            job: link.job,
            reply,
        };
        link.store.reader.send(read).await.map_err(|_| gone())?;
        answer
            .await
            .map_err(|_| gone())?
            .map_err(|e| store_error("read the job's steps", e))
    }

    /// The next durable sleep's name in this attempt.
    fn next_sleep(&self) -> String {
        format!(
            "sleep-{}",
            self.0.sleeps.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    /// The next durable sleep of this attempt (`sleep-1`, `sleep-2`, … in the order the
    /// attempt takes them), until `until` as its first call asked (recorded then, so later
    /// attempts keep that time): how long is left of it, `None` once it has passed. A task
    /// in another process (a command's `remuda sleep`, a Python pool's body) sleeps through
    /// this; the attempt then ends in a snooze of what is left.
    pub async fn sleep_until(&self, until: DateTime<Utc>) -> Result<Option<Duration>, TaskError> {
        let name = self.next_sleep();
        let until = match self.recorded_as(&name).await? {
            Some(stored) => decode::<Sleep>(&name, &stored)?.until,
            None => {
                let text = serde_json::json!({ "until": until }).to_string();
                let stored = self.record_as(&name, text).await?;
                decode::<Sleep>(&name, &stored)?.until
            }
        };
        // (under a millisecond is none: the socket counts whole milliseconds)
        let left = (until - Utc::now())
            .to_std()
            .ok()
            .filter(|left| left.as_millis() > 0);
        if left.is_some() {
            *self
                .0
                .asleep_until
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(until);
        }
        Ok(left)
    }

    /// When this attempt was told a durable sleep had time left: what is left of it now (at
    /// least a millisecond, however long the task took to stop), the snooze of a task that
    /// stopped to sleep (a command that exited as `remuda sleep` told it to); `None` when no
    /// sleep of this attempt said so.
    pub fn sleeping(&self) -> Option<Duration> {
        let until = (*self
            .0
            .asleep_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))?;
        Some(
            (until - Utc::now())
                .to_std()
                .unwrap_or_default()
                .max(Duration::from_millis(1)),
        )
    }
}

impl Link {
    async fn record(&self, name: &str, output: &str) -> Result<String, TaskError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let record = writer::Record {
            job: self.job,
            name: name.to_string(),
            output: output.to_string(),
            attempt: self.attempt,
            started_at: self.started_at,
            reply,
        };
        let gone = || TaskError::new(STEP_STORE, "the worker's step writer has stopped");
        self.store.writer.send(record).await.map_err(|_| gone())?;
        match answer.await.map_err(|_| gone())? {
            Ok(Some(stored)) => Ok(stored),
            Ok(None) => Err(TaskError::new(
                FENCED,
                format!(
                    "step {name:?} of job {} was not recorded: this run (attempt {}) no longer holds the job (it was cancelled, rescued or released)",
                    self.job, self.attempt
                ),
            )),
            Err(e) => Err(store_error(&format!("record step {name:?}"), e)),
        }
    }
}

fn store_error(what: &str, e: impl std::fmt::Display) -> TaskError {
    TaskError::new(STEP_STORE, format!("cannot {what}: {e}"))
}

/// A step's name: 1 to [`MAX_NAME`] bytes, no control characters (a tab or newline would
/// break `remuda job`'s list of steps, as they would a queue's name), and not a durable
/// sleep's (`sleep-…`). Every door checks it here: Rust's `step`, the step socket of command
/// tasks (`remuda step`) and Python's.
fn check_name(name: &str) -> Result<(), TaskError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(TaskError::permanent(
            INVALID_STEP,
            format!(
                "a step's name must be 1 to {MAX_NAME} bytes, not {} ({name:?})",
                name.len()
            ),
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(TaskError::permanent(
            INVALID_STEP,
            format!("the step name {name:?} contains the control character {c:?}: step names may not contain tabs, newlines or other control characters"),
        ));
    }
    if name.starts_with(SLEEP_PREFIX) {
        return Err(TaskError::permanent(
            INVALID_STEP,
            format!("step names starting with {SLEEP_PREFIX:?} are the durable sleeps': rename step {name:?}"),
        ));
    }
    Ok(())
}

impl JobContext {
    /// Runs step `name` of this job until it is recorded: the first time, `run` runs and its
    /// output is recorded with the job (fenced by this attempt: a stale worker's step is
    /// refused with [`FENCED`]); on a later attempt of the same job, the recorded output is
    /// returned without running `run`. A step that returns an error is not recorded, and the
    /// error follows the job's retry policy. Names are unique within a job: a name used twice
    /// returns the first step's output (run one after the other: two calls of one name at
    /// the same time both run). `retry --fresh` drops a job's steps.
    ///
    /// At least once: a crash (or a lost database) between `run`'s side effect and its record
    /// runs it again on the next attempt. Give what it calls [`JobContext::step_key`] as an
    /// idempotency key to make the side effect happen once.
    pub async fn step<T, F, Fut>(&self, name: &str, run: F) -> Result<T, TaskError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, TaskError>>,
    {
        if let Some(stored) = self.steps.recorded(name).await? {
            return decode(name, &stored);
        }
        let output = run().await?;
        let text = serde_json::to_string(&output).map_err(|e| {
            TaskError::permanent(
                TaskError::INVALID_OUTPUT,
                format!("the output of step {name:?} is not JSON: {e}"),
            )
        })?;
        let stored = self.steps.record(name, text.clone()).await?;
        if stored == text {
            return Ok(output);
        }
        decode(name, &stored)
    }

    /// The idempotency key of step `name` of this job (`"<job id>:<name>"`, see [`key`]): the
    /// same on every attempt.
    pub fn step_key(&self, name: &str) -> String {
        key(self.id, name)
    }

    /// Sleeps for `duration` as a durable step: the job is given back (without using an
    /// attempt or holding a slot) and runs again once the time has passed, when this call
    /// returns at once. The sleep is timed from its first call, whatever happens between.
    /// Return its error from the task (`ctx.sleep(d).await?`): that is how the job is
    /// given back. Sleeps are named in the order an attempt takes them (`sleep-1`, …), so
    /// the task must take them in the same order each time.
    pub async fn sleep(&self, duration: Duration) -> Result<(), TaskError> {
        let until =
            Utc::now() + chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX / 2);
        self.sleep_step(until).await
    }

    /// Like [`JobContext::sleep`], until `until`.
    pub async fn sleep_until(&self, until: DateTime<Utc>) -> Result<(), TaskError> {
        self.sleep_step(until).await
    }

    async fn sleep_step(&self, until: DateTime<Utc>) -> Result<(), TaskError> {
        match self.steps.sleep_until(until).await? {
            Some(left) => Err(TaskError::snooze(left)),
            None => Ok(()),
        }
    }
}

/// A durable sleep's record.
#[derive(serde::Deserialize)]
struct Sleep {
    until: DateTime<Utc>,
}

fn decode<T: DeserializeOwned>(name: &str, stored: &str) -> Result<T, TaskError> {
    serde_json::from_str(stored).map_err(|e| {
        TaskError::permanent(
            STEP_OUTPUT,
            format!(
                "the recorded output of step {name:?} does not fit what the task asks for now: {e} (`remuda retry ID --fresh` runs the job again from its first step)"
            ),
        )
    })
}

#[cfg(test)]
mod name_tests {
    use super::{Steps, INVALID_STEP};

    #[tokio::test]
    async fn a_step_name_with_a_control_character_or_a_sleeps_prefix_is_refused_at_every_door() {
        let steps = Steps::default();
        let long = "x".repeat(201);
        for bad in [
            "",
            "a\tb",
            "a\nb",
            "nul\0",
            "bell\u{7}",
            "c1\u{85}",
            "sleep-1",
            &long,
        ] {
            let read = steps.recorded(bad).await.expect_err(bad);
            assert_eq!(read.code, INVALID_STEP, "{bad:?}: {read:?}");
            let written = steps.record(bad, "1".into()).await.expect_err(bad);
            assert_eq!(written.code, INVALID_STEP, "{bad:?}: {written:?}");
        }
        for good in ["charge", "sleepy", "é", &"x".repeat(200)] {
            assert_eq!(steps.record(good, "1".into()).await.expect(good), "1");
        }
    }

    #[test]
    fn a_steps_key_names_its_job_and_step_the_same_on_every_attempt() {
        assert_eq!(super::key(42, "charge"), "42:charge");
        assert_eq!(super::key(42, "a:b"), "42:a:b");
        assert_ne!(super::key(42, "charge"), super::key(43, "charge"));
    }

    #[tokio::test]
    async fn a_job_records_at_most_its_steps_each_at_most_its_size_and_says_which_limit() {
        let steps = Steps::default();
        for n in 0..super::MAX_STEPS {
            steps
                .record(&format!("s{n}"), n.to_string())
                .await
                .expect("within the limit");
        }
        let over = steps
            .record("one more", "1".into())
            .await
            .expect_err("over the count");
        assert_eq!(over.code, super::STEP_LIMIT, "{over:?}");
        assert_eq!(over.retryable, Some(false));
        // refused when looked up, before the step runs
        let early = steps
            .recorded("one more")
            .await
            .expect_err("before it runs");
        assert_eq!(early.code, super::STEP_LIMIT);
        // a step recorded before still answers
        assert_eq!(
            steps.record("s7", "99".into()).await.expect("replayed"),
            "7"
        );
        let big = format!("\"{}\"", "x".repeat(super::MAX_OUTPUT));
        let too_large = Steps::default()
            .record("big", big)
            .await
            .expect_err("over the size");
        assert_eq!(too_large.code, super::STEP_TOO_LARGE, "{too_large:?}");
        assert!(too_large.message.contains("8 MiB"), "{}", too_large.message);
    }
}
