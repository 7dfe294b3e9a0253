//! Jobs formed from many enqueues of one key (graphile-worker's job keys, Inngest's debounce
//! and batches): debounced, throttled or batched. The rules are the database's
//! (`schema/enqueue/enqueue_job.sql`), so SQL, the CLI and every client form jobs alike; the
//! client enqueues such a job through `enqueue_formed.sql`.

use super::insert::{Inserted, NewJob, Unique};
use crate::db::Sql;
use crate::{sql, Result};
use std::time::Duration;

/// How a job is formed from many enqueues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Formation {
    /// With a unique key: while a job of the kind and key waits, an enqueue replaces its args
    /// and moves its start to now + `delay` (never past its first enqueue + `max`), and
    /// returns it: one run once the enqueues stop ("re-index once the edits stop"). Once it
    /// runs, the next enqueue makes a new job.
    Debounce {
        /// How long after the last enqueue it runs.
        delay: Duration,
        /// How long a stream of enqueues may postpone it, from the first.
        max: Option<Duration>,
    },
    /// With a unique key: at most one job of the kind and key starts per `period`; an enqueue
    /// within the window joins the job waiting for the window's end, which keeps its args
    /// (with `latest`, takes the latest).
    Throttle {
        /// The window.
        period: Duration,
        /// The waiting job takes the args of the latest enqueue instead of keeping its own.
        latest: bool,
    },
    /// Enqueues with `key` accumulate into one job whose args are the list of their args (in
    /// enqueue order), which runs when `size` have joined or `wait` has passed since the
    /// first; each enqueue returns the batch's id. Its task takes a list (`type Args = Vec<…>`).
    Batch {
        /// The batch key (enqueues with one key share a batch, per kind).
        key: String,
        /// It runs when this many have joined.
        size: i32,
        /// Or when this long has passed since the first.
        wait: Duration,
    },
}

impl Formation {
    /// What `remuda job` and the CLI's JSON call a job formed so: `debounced`, `throttled`,
    /// `batched`.
    pub fn name(&self) -> &'static str {
        match self {
            Formation::Debounce { .. } => "debounced",
            Formation::Throttle { .. } => "throttled",
            Formation::Batch { .. } => "batched",
        }
    }
}

/// A formation as flags and keyword arguments name it (`remuda enqueue --debounce …`,
/// Python's `options(debounce=…)`), each part possibly given: [`FormationParts::formation`]
/// refuses the parts that do not go together, which a [`Formation`] cannot even hold (a
/// debounce with `throttle_latest` would drop the latter without a word), with the messages
/// the database's own check gives (`schema/enqueue/check_formation.sql`, which SQL callers
/// meet).
#[derive(Clone, Debug, Default)]
pub struct FormationParts {
    /// `debounce`.
    pub debounce: Option<Duration>,
    /// `debounce_max`.
    pub debounce_max: Option<Duration>,
    /// `throttle`.
    pub throttle: Option<Duration>,
    /// `throttle_latest`.
    pub throttle_latest: bool,
    /// `batch_key`.
    pub batch_key: Option<String>,
    /// `batch_size` (a batch without it is refused when enqueued).
    pub batch_size: Option<i32>,
    /// `batch_wait` (a batch without it is refused when enqueued).
    pub batch_wait: Option<Duration>,
}

impl FormationParts {
    /// The formation the parts make for a job of `kind`, if any, or why they make none.
    pub fn formation(self, kind: &str) -> Result<Option<Formation>> {
        let bad = |why: String| Err(crate::Error::InvalidInput(format!("job {kind}: {why}")));
        let ways = [
            self.debounce.is_some(),
            self.throttle.is_some(),
            self.batch_key.is_some(),
        ];
        if ways.iter().filter(|&&w| w).count() > 1 {
            return bad("debounce, throttle and batch_key are ways to form one job from many enqueues: give one of them".into());
        }
        if self.debounce_max.is_some() && self.debounce.is_none() {
            return bad("debounce_max caps a debounce: give debounce too".into());
        }
        if self.throttle_latest && self.throttle.is_none() {
            return bad("throttle_latest is for a throttle: give throttle too".into());
        }
        if (self.batch_size.is_some() || self.batch_wait.is_some()) && self.batch_key.is_none() {
            return bad("batch_size and batch_wait are for a batch: give batch_key too".into());
        }
        if let (Some(delay), Some(max)) = (self.debounce, self.debounce_max) {
            if max < delay {
                return bad(format!(
                    "debounce_max ({max:?}) is shorter than the debounce ({delay:?}): every job would run debounce_max after its first enqueue, never debounced; give a debounce_max of at least the debounce"
                ));
            }
        }
        Ok(if let Some(delay) = self.debounce {
            Some(Formation::Debounce {
                delay,
                max: self.debounce_max,
            })
        } else if let Some(period) = self.throttle {
            Some(Formation::Throttle {
                period,
                latest: self.throttle_latest,
            })
        } else {
            self.batch_key.map(|key| Formation::Batch {
                key,
                size: self.batch_size.unwrap_or(0),
                wait: self.batch_wait.unwrap_or_default(),
            })
        })
    }
}

/// A refusal of the job by the database's checks (SQLSTATE 22023: what was wrong, and its
/// hint) as the client's own bad input, without the PL/pgSQL call stack; any other error as
/// it is.
fn refusal(e: tokio_postgres::Error) -> crate::Error {
    match e.as_db_error() {
        Some(d) if d.code().code() == "22023" => crate::Error::InvalidInput(match d.hint() {
            Some(hint) => format!("{} ({hint})", d.message()),
            None => d.message().to_string(),
        }),
        _ => crate::Error::from(e),
    }
}

fn ms(d: Option<Duration>) -> Option<i64> {
    d.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Enqueues the jobs one statement each, in order, through the database's rules.
pub(crate) async fn insert_formed(conn: &impl Sql, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
    // each key is locked as its job is enqueued, until the transaction ends: in one order
    // for every caller (kind, queue, key), two transactions enqueueing the same keys wait for
    // each other in turn, where in their callers' orders they could deadlock
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| lock_order(&jobs[i]));
    let mut out: Vec<Option<Inserted>> = vec![None; jobs.len()];
    for i in order {
        out[i] = Some(insert_one(conn, &jobs[i]).await?);
    }
    Ok(out.into_iter().flatten().collect())
}

/// Where a job's key comes in the order keys are locked.
fn lock_order(job: &NewJob) -> (&str, &str, Option<&str>, Option<&str>, &str) {
    let batch_key = match &job.formation {
        Some(Formation::Batch { key, .. }) => Some(key.as_str()),
        _ => None,
    };
    let unique_key = job.unique.as_ref().and_then(|u| u.key.as_deref());
    (&job.kind, &job.queue, batch_key, unique_key, &job.args.0)
}

async fn insert_one(conn: &impl Sql, job: &NewJob) -> Result<Inserted> {
    let unique = job.unique.as_ref();
    let default_states = Unique::default().states;
    // the states and period are the formation's own: passed only when the caller set them,
    // so that the database says they do not mix
    let states: Option<Vec<&str>> = unique
        .filter(|u| u.states != default_states)
        .map(|u| u.states.iter().map(|s| s.as_str()).collect());
    let (mut debounce, mut debounce_max, mut throttle, mut latest) = (None, None, None, false);
    let (mut batch_key, mut batch_size, mut batch_wait) = (None, None, None);
    match &job.formation {
        Some(Formation::Debounce { delay, max }) => {
            debounce = Some(*delay);
            debounce_max = *max;
        }
        Some(Formation::Throttle { period, latest: l }) => {
            throttle = Some(*period);
            latest = *l;
        }
        Some(Formation::Batch { key, size, wait }) => {
            batch_key = Some(key.as_str());
            batch_size = Some(*size);
            batch_wait = Some(*wait);
        }
        None => {}
    }
    let notify = job.notify.as_ref().map(crate::notify::NotifyTarget::stored);
    let trace = job.trace_or(crate::telemetry::tracing_spans::inherited().as_ref());
    let group = job.group_or(crate::group::current().as_deref());
    let row = conn
        .query_one(
            sql::ENQUEUE_FORMED,
            &[
                &job.kind,
                &job.args,
                &job.queue,
                &job.priority,
                &job.run_at,
                &job.max_attempts,
                &job.timeout_ms(),
                &job.expires_at,
                &unique.and_then(|u| u.key.as_deref()),
                &unique.is_some_and(|u| u.by_args),
                &states,
                &ms(unique.and_then(|u| u.period)),
                &unique.is_some_and(|u| u.per_queue),
                &job.concurrency_key,
                &job.target_worker,
                &job.requires,
                &notify,
                &ms(debounce),
                &ms(debounce_max),
                &ms(throttle),
                &latest,
                &batch_key,
                &batch_size,
                &ms(batch_wait),
                &group,
                &trace.as_ref().map(|t| t.traceparent.as_str()),
                &trace.as_ref().and_then(|t| t.tracestate.as_deref()),
            ],
        )
        .await
        .map_err(refusal)?;
    Ok(Inserted {
        id: row.try_get("id")?,
        duplicate: row.try_get("duplicate")?,
        joined: row.try_get("joined")?,
    })
}
