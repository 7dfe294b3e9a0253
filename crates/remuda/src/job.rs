//! Jobs as stored in `remuda.jobs`: the state machine, the row as users see it, and the
//! tagged result.
//!
//! ```text
//!   insert ──► scheduled ──(promoter: run_at due)──► available ──(claim)──► running
//!                 ▲                                     ▲                      │
//!                 └──────(retry with backoff)───────────┼──────────────────────┤
//!                                                       └─(release, rescue)────┤
//!   completed ◄──(ok)──────────────────────────────────────────────────────────┤
//!   failed    ◄──(error not retried, last attempt, rescue of last attempt)─────┘
//!   cancelled ◄──(cancel: from scheduled, available or running)
//!   expired   ◄──(expirer: expires_at passed before the job started)
//! ```
//! Each arrow is one guarded SQL statement in `src/sql/` or one function in `src/schema/`:
//! `docs/architecture.md` names the file of each.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// Where a job is in its life. Stored as the PostgreSQL enum `remuda.job_state` with these
/// lowercase names. Later versions may add states (workflows will wait for their
/// dependencies): match with a wildcard arm, and iterate [`JobState::ALL`] rather than
/// assume its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for `run_at` (delayed, or backing off before a retry). In: insert with a future
    /// `run_at`, retry with backoff. Out: the promoter makes it `available`; cancel; expiry.
    Scheduled,
    /// Runnable now. In: insert, promotion, rescue, release, manual retry. Out: a claim makes
    /// it `running`; cancel; expiry.
    Available,
    /// Held by one worker. Out: completion, retry, failure (by that worker, guarded by worker
    /// and attempt), release at shutdown, rescue when the worker dies, cancel.
    Running,
    /// Final: the last attempt returned ok.
    Completed,
    /// Final: an error that is not retried, or the last attempt's error.
    Failed,
    /// Final: cancelled before it finished.
    Cancelled,
    /// Final: it did not start before its `expires_at` deadline.
    Expired,
    /// A state a newer schema added, which this build cannot name: a job read in it is
    /// shown rather than refused. Never written, and not in [`JobState::ALL`].
    Unknown,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 7] = [
        JobState::Scheduled,
        JobState::Available,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Expired,
    ];

    /// The lowercase name used in the database and the JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Available => "available",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Expired => "expired",
            JobState::Unknown => "unknown",
        }
    }

    /// True for states a job never leaves by itself (a manual retry can still revive it).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled | JobState::Expired
        )
    }

    /// The job state machine: whether a job in `self` may move to `to` (`None` for `self`: the
    /// job is inserted; `None` for `to`: it is deleted). The one definition of every path:
    /// the history checker (`remuda::verify`) holds the recorded transitions against it.
    ///
    /// - inserted `scheduled` or `available` (a workflow's node job may be inserted held, as
    ///   `scheduled`);
    /// - `scheduled` → `available` (promotion, a paused run's resume, a batch filled up),
    ///   `cancelled`, `expired`;
    /// - `available` → `running` (a claim), `scheduled` (held by its paused run, postponed by
    ///   a debounced enqueue), `cancelled`,
    ///   `expired`;
    /// - `running` → `completed`, `failed`, `scheduled` (a retry after a delay, a snooze),
    ///   `available` (a retry at once, a release, a rescue), `cancelled`;
    /// - a final state → `scheduled` or `available` (a manual retry, a run's retry);
    /// - deleted: only from a final state (retention, `remuda delete`), or while waiting
    ///   (`remuda delete` of a job that never ran).
    pub fn may_become(from: Option<JobState>, to: Option<JobState>) -> bool {
        use JobState::*;
        match (from, to) {
            (None, Some(to)) => matches!(to, Scheduled | Available),
            (Some(from), None) => from.is_final() || matches!(from, Scheduled | Available),
            (Some(Scheduled), Some(to)) => matches!(to, Available | Cancelled | Expired),
            (Some(Available), Some(to)) => {
                matches!(to, Running | Scheduled | Cancelled | Expired)
            }
            (Some(Running), Some(to)) => {
                matches!(to, Completed | Failed | Scheduled | Available | Cancelled)
            }
            (Some(from), Some(to)) if from.is_final() => matches!(to, Scheduled | Available),
            _ => false,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "unknown job state {s:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// The stored outcome of a finished job: `{"ok": value}` or `{"err": {code, message, data}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobResult {
    /// The task's output.
    Ok(Value),
    /// The error that ended the job.
    Err(ErrorInfo),
}

/// An error as stored in a result: a machine-readable code, a message for people, and
/// optional structured data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Stable code such as `TIMEOUT`, `PANIC`, `EXIT_2` or one of the task's own.
    pub code: String,
    /// What happened.
    pub message: String,
    /// Anything else the task attached.
    #[serde(default)]
    pub data: Option<Value>,
    /// What the task said of retrying, when it said anything (`false`: the error ended the
    /// job whatever its retry policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

/// One failed attempt in a job's history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptError {
    /// The attempt number (1 for the first run).
    pub attempt: i32,
    /// When the attempt started (absent from errors written by older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// When it failed.
    pub at: DateTime<Utc>,
    /// The error code.
    pub code: String,
    /// The error message.
    pub message: String,
    /// The worker that ran the attempt.
    pub worker: Option<String>,
    /// Data the task attached to the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A job as stored: what `remuda job ID --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Unique id, increasing in insert order.
    pub id: i64,
    /// The task kind that runs it.
    pub kind: String,
    /// The queue it waits in.
    pub queue: String,
    /// Where it is in its life.
    pub state: JobState,
    /// Attempts started so far.
    pub attempt: i32,
    /// Attempts allowed; `None` until a worker claims it with its default for the kind.
    pub max_attempts: Option<i32>,
    /// Lower runs first.
    pub priority: i32,
    /// When it may run (or next runs, when backing off).
    pub run_at: DateTime<Utc>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When the current or last attempt started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it reached a final state.
    pub finished_at: Option<DateTime<Utc>>,
    /// The deadline for starting, if any.
    pub expires_at: Option<DateTime<Utc>>,
    /// Per-job timeout in milliseconds, overriding the task's.
    pub timeout_ms: Option<i64>,
    /// The worker running it, or that ran it last.
    pub worker_id: Option<String>,
    /// The task's arguments.
    pub args: Value,
    /// The outcome, once final.
    pub result: Option<JobResult>,
    /// Every failed attempt, oldest first.
    pub errors: Vec<AttemptError>,
    /// The unique key it holds (with the period's number, or the args digest), if unique.
    pub unique_key: Option<String>,
    /// Its concurrency key, if any.
    pub concurrency_key: Option<String>,
    /// Its group (fair share), if any.
    pub group: Option<String>,
    /// The W3C trace context it continues, if any (as enqueued: each attempt runs as a child).
    pub trace: Option<crate::TraceContext>,
    /// The worker it is routed to by name, if any.
    pub target_worker: Option<String>,
    /// Capabilities a worker needs to run it, if any.
    pub requires: Option<Vec<String>>,
    /// The name of the worker that ran (or runs) its latest attempt.
    pub worker: Option<String>,
    /// The schedule that fired it, if one did.
    pub schedule: Option<String>,
    /// The fire time it was enqueued for (the scheduled instant, not when it was inserted).
    pub fire_at: Option<DateTime<Utc>>,
    /// The workflow run it is a node of, if any.
    #[serde(default)]
    pub workflow_id: Option<i64>,
    /// The node of that run it runs.
    #[serde(default)]
    pub workflow_node: Option<String>,
    /// Its element's index, when the node is a map.
    #[serde(default)]
    pub workflow_index: Option<i32>,
    /// How it was formed from many enqueues, if it was: `{"debounced": n}`,
    /// `{"throttled": n}` or `{"batched": n, "enqueued_at": […]}` (see
    /// [`crate::client::Formation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formed: Option<Value>,
    /// The steps it recorded, in the order they were recorded (see [`crate::step`]): read
    /// for one job (`remuda job ID`, [`Client::job`](crate::Client::job)), absent from
    /// listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Step>>,
}

/// A step a job recorded: what `remuda job ID --json` lists under `steps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its name, unique within the job.
    pub name: String,
    /// What it returned (a command task's step: its stdout as a string).
    pub output: Value,
    /// The attempt that recorded it.
    pub attempt: i32,
    /// When it was recorded.
    pub at: DateTime<Utc>,
}

impl Job {
    /// Builds a job from a row of `job_get.sql` / `job_list.sql`.
    pub(crate) fn from_row(row: &tokio_postgres::Row) -> crate::Result<Job> {
        let state: String = row.try_get("state")?;
        let result: Option<Value> = row.try_get("result")?;
        let errors: Value = row.try_get("errors")?;
        Ok(Job {
            id: row.try_get("id")?,
            kind: row.try_get("kind")?,
            queue: row.try_get("queue")?,
            // a newer schema's state: the job is still shown
            state: state.parse().unwrap_or(JobState::Unknown),
            attempt: row.try_get("attempt")?,
            max_attempts: row.try_get("max_attempts")?,
            priority: row.try_get("priority")?,
            run_at: row.try_get("run_at")?,
            created_at: row.try_get("created_at")?,
            started_at: row.try_get("started_at")?,
            finished_at: row.try_get("finished_at")?,
            expires_at: row.try_get("expires_at")?,
            timeout_ms: row.try_get("timeout_ms")?,
            worker_id: row.try_get("worker_id")?,
            args: row.try_get("args")?,
            result: result.map(serde_json::from_value).transpose()?,
            errors: serde_json::from_value(errors)?,
            unique_key: row.try_get("unique_key")?,
            concurrency_key: row.try_get("concurrency_key")?,
            group: row.try_get("group_key")?,
            trace: crate::trace::from_row(row)?,
            target_worker: row.try_get("target_worker")?,
            requires: row.try_get("requires")?,
            worker: row
                .try_get::<_, Option<String>>("worker_id")?
                .as_deref()
                .map(worker_name),
            schedule: row.try_get("schedule")?,
            fire_at: row.try_get("fire_at")?,
            workflow_id: row.try_get("workflow_id")?,
            workflow_node: row.try_get("workflow_node")?,
            workflow_index: row.try_get("workflow_index")?,
            formed: match row.columns().iter().any(|c| c.name() == "formed") {
                true => row.try_get("formed")?,
                false => None,
            },
            steps: match row.columns().iter().any(|c| c.name() == "steps") {
                true => Some(serde_json::from_str(row.try_get("steps")?)?),
                false => None,
            },
        })
    }
}

/// The name part of a worker id (`<name>-<pid>-<random>`, see `Worker::run`).
fn worker_name(id: &str) -> String {
    let mut parts = id.rsplitn(3, '-');
    let (_, _, name) = (parts.next(), parts.next(), parts.next());
    name.unwrap_or(id).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_name_is_read_from_its_id() {
        assert_eq!(worker_name("gpu-1-4242-0a1b2c3d"), "gpu-1");
        assert_eq!(worker_name("odd"), "odd");
    }

    #[test]
    fn result_is_a_tagged_union() {
        let ok =
            serde_json::to_value(JobResult::Ok(serde_json::json!({"n": 1}))).unwrap_or_default();
        assert_eq!(ok, serde_json::json!({"ok": {"n": 1}}));
        let err = JobResult::Err(ErrorInfo {
            code: "TIMEOUT".into(),
            message: "took too long".into(),
            data: None,
            retryable: None,
        });
        let value = serde_json::to_value(&err).unwrap_or_default();
        assert_eq!(
            value,
            serde_json::json!({"err": {"code": "TIMEOUT", "message": "took too long", "data": null}})
        );
    }

    #[test]
    fn states_parse_from_their_names() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        assert!("done".parse::<JobState>().is_err());
    }
}
