//! Enqueueing: [`NewJob`] describes one job; the client inserts one, a batch (any size, one
//! statement), or inside the caller's own transaction.

use crate::db::Jsonb;
use crate::db::Sql;
use crate::names::check_name;
use crate::task::Task;
use crate::telemetry::tracing_spans;
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use futures_util::pin_mut;
use postgres_types::Type;
use serde::Serialize;
use std::time::Duration;
use tokio_postgres::binary_copy::BinaryCopyInWriter;

/// A job to enqueue.
#[derive(Clone, Debug)]
pub struct NewJob {
    /// Task kind that will run it.
    pub kind: String,
    /// Arguments as JSON.
    pub args: Jsonb,
    /// Queue (default `default`).
    pub queue: String,
    /// Priority, lower first (default 0).
    pub priority: i32,
    /// Attempts allowed; `None` lets the worker's default for the kind decide.
    pub max_attempts: Option<i32>,
    /// Earliest start; `None` for now.
    pub run_at: Option<DateTime<Utc>>,
    /// Deadline for starting: past it, the job expires instead of running.
    pub expires_at: Option<DateTime<Utc>>,
    /// Timeout of each attempt, overriding the task's.
    pub timeout: Option<Duration>,
    /// Concurrency key (e.g. `customer:42`): a queue with a `key_limit` runs at most that many
    /// jobs of one key at once, and keys take turns.
    pub concurrency_key: Option<String>,
    /// Group (a tenant, an account): a queue with fair share on (`fairness = group`) shares
    /// its starts between groups by their weights, whatever their number of jobs or keys.
    /// Without one, a job enqueued by a running task takes that task's group (see
    /// [`crate::group`]).
    pub group: Option<String>,
    /// Only the worker with this name may run it (`[worker] name`).
    pub target_worker: Option<String>,
    /// Only a worker with every one of these capabilities may run it.
    pub requires: Option<Vec<String>>,
    /// Uniqueness: enqueueing a job whose key another job holds (in one of the unique states)
    /// returns that job instead of inserting.
    pub unique: Option<Unique>,
    /// Who hears of its final state (a webhook, an email), instead of its kind's defaults.
    pub notify: Option<crate::notify::NotifyTarget>,
    /// Formed from many enqueues of one key: debounced, throttled or batched.
    pub formation: Option<super::Formation>,
    /// The formation its task declares for enqueues with a unique key
    /// ([`TaskOptions::debounce`](crate::TaskOptions::debounce), `throttle`): taken when
    /// the job is enqueued with a unique key and nothing a formation takes no part of (a
    /// formation of its own, unique states or a period, a start time, a deadline).
    pub keyed_formation: Option<super::Formation>,
    /// The W3C trace context it continues (`None`: the one current where it is enqueued, see
    /// [`crate::trace::current`], if any).
    pub trace: Option<crate::TraceContext>,
}

/// How a job is unique (River's and Oban's unique jobs): by a key of the caller's or by its
/// kind and args, among the jobs in some states, optionally within a period.
#[derive(Clone, Debug, PartialEq)]
pub struct Unique {
    /// The key; `None` with `by_args`.
    pub key: Option<String>,
    /// The key is the kind plus a digest of the args (and `key`, if also set).
    pub by_args: bool,
    /// States in which a job holds its key (default: scheduled, available, running, completed;
    /// failed, cancelled and expired jobs do not block a new one).
    pub states: Vec<crate::JobState>,
    /// The key holds only within this period (aligned to the Unix epoch): "at most one per
    /// hour" is a period of one hour.
    pub period: Option<Duration>,
    /// Keys are scoped by kind (a `ping` and a `report` job may share one); with `per_queue`
    /// also by queue, so the same kind may hold the key once in each queue.
    pub per_queue: bool,
}

impl Default for Unique {
    fn default() -> Self {
        use crate::JobState::*;
        Unique {
            key: None,
            by_args: false,
            states: vec![Scheduled, Available, Running, Completed],
            period: None,
            per_queue: false,
        }
    }
}

impl Unique {
    /// The key as stored, before the by-args digest: the caller's key plus the period's
    /// number when there is a period.
    fn stored(&self, now: DateTime<Utc>) -> String {
        let mut key = self.key.clone().unwrap_or_default();
        if let Some(period) = self.period {
            let ms = u128::try_from(now.timestamp_millis()).unwrap_or(0);
            let bucket = ms / period.as_millis().max(1);
            key.push_str(&format!("@{bucket}"));
        }
        key
    }

    /// The states as a PostgreSQL array literal.
    fn states_literal(&self) -> String {
        let names: Vec<&str> = self.states.iter().map(|s| s.as_str()).collect();
        format!("{{{}}}", names.join(","))
    }
}

/// What an enqueue did with one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inserted {
    /// The job's id: the new one, or for a duplicate the existing job's.
    pub id: i64,
    /// Whether an existing job with the same unique key was returned instead of inserting.
    pub duplicate: bool,
    /// Whether the enqueue was folded into a job that was waiting (debounced, throttled or
    /// batched into it: see [`super::Formation`]).
    pub joined: bool,
}

impl NewJob {
    /// A job of `kind` with these arguments, all else default.
    pub fn new(kind: impl Into<String>, args: &impl Serialize) -> Result<Self> {
        Ok(NewJob::from_json(kind, Jsonb::encode(args)?))
    }

    /// A job with arguments that are already JSON text.
    pub fn from_json(kind: impl Into<String>, args: Jsonb) -> Self {
        NewJob {
            kind: kind.into(),
            args,
            queue: "default".into(),
            priority: 0,
            max_attempts: None,
            run_at: None,
            expires_at: None,
            timeout: None,
            concurrency_key: None,
            group: None,
            target_worker: None,
            requires: None,
            unique: None,
            notify: None,
            formation: None,
            keyed_formation: None,
            trace: None,
        }
    }

    /// A job for task `T`, with `T`'s defaults for queue, priority, attempts and timeout,
    /// and its debounce or throttle for when a unique key is given.
    pub fn for_task<T: Task>(args: &T::Args) -> Result<Self> {
        let options = T::options();
        let mut job = NewJob::new(T::KIND, args)?;
        job.keyed_formation = options.keyed_formation(T::KIND)?;
        job.queue = options.queue;
        job.priority = options.priority;
        job.max_attempts = Some(options.max_attempts);
        job.timeout = options.timeout;
        Ok(job)
    }

    /// The job as it is enqueued: with its task's formation for keyed enqueues when it has a
    /// unique key (or is unique by args) and none of what a formation takes no part of — a
    /// formation of its own, unique states or a period, a start time or a deadline (then it is
    /// a plain unique job, as asked).
    pub(crate) fn with_keyed_formation(&self) -> Option<NewJob> {
        if !self.takes_keyed_formation() {
            return None;
        }
        let mut job = self.clone();
        job.formation = self.keyed_formation.clone();
        Some(job)
    }

    /// Whether [`NewJob::with_keyed_formation`] forms this job.
    fn takes_keyed_formation(&self) -> bool {
        let (Some(_), Some(unique)) = (&self.keyed_formation, &self.unique) else {
            return false;
        };
        let plain_unique = unique.states != Unique::default().states || unique.period.is_some();
        self.formation.is_none()
            && !plain_unique
            && self.run_at.is_none()
            && self.expires_at.is_none()
            && (unique.key.is_some() || unique.by_args)
    }

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
    /// Sets the number of attempts allowed.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }
    /// Runs no earlier than `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self
    }
    /// Runs no earlier than `delay` from now.
    pub fn delay(mut self, delay: Duration) -> Self {
        let at = chrono::Duration::from_std(delay)
            .ok()
            .and_then(|d| Utc::now().checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        self.run_at = Some(at);
        self
    }
    /// Expires unless started before `at`.
    pub fn expires_at(mut self, at: DateTime<Utc>) -> Self {
        self.expires_at = Some(at);
        self
    }
    /// Sets the timeout of each attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the concurrency key (see [`NewJob::concurrency_key`]).
    pub fn concurrency_key(mut self, key: impl Into<String>) -> Self {
        self.concurrency_key = Some(key.into());
        self
    }
    /// Sets the group the job's queue shares its starts by (see [`NewJob::group`]).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }
    /// Routes the job to the worker named `name`.
    pub fn target_worker(mut self, name: impl Into<String>) -> Self {
        self.target_worker = Some(name.into());
        self
    }
    /// Routes the job to workers that have all of these capabilities.
    pub fn requires<I: IntoIterator<Item = S>, S: Into<String>>(mut self, capabilities: I) -> Self {
        self.requires = Some(capabilities.into_iter().map(Into::into).collect());
        self
    }
    /// `requires` as one PostgreSQL array literal (a batch passes one per job).
    /// The queue a unique key is scoped to (`None`: the kind alone).
    pub(crate) fn unique_queue(&self) -> Option<&str> {
        self.unique
            .as_ref()
            .filter(|u| u.per_queue)
            .map(|_| self.queue.as_str())
    }

    fn requires_literal(&self) -> Option<String> {
        self.requires.as_ref().map(|caps| array_literal(caps))
    }
    /// Makes the job unique by `key`: while a job with this key is in one of the unique states
    /// (see [`Unique`]), enqueueing another returns that job instead.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique.get_or_insert_with(Unique::default).key = Some(key.into());
        self
    }
    /// Makes the job unique by its kind and args (compared as JSON values: key order and
    /// spacing do not matter).
    pub fn unique_by_args(mut self) -> Self {
        self.unique.get_or_insert_with(Unique::default).by_args = true;
        self
    }
    /// Sets the states in which a unique job holds its key.
    pub fn unique_states<I: IntoIterator<Item = crate::JobState>>(mut self, states: I) -> Self {
        self.unique.get_or_insert_with(Unique::default).states = states.into_iter().collect();
        self
    }
    /// Limits uniqueness to a period (at most one such job per period).
    pub fn unique_period(mut self, period: Duration) -> Self {
        self.unique.get_or_insert_with(Unique::default).period = Some(period);
        self
    }

    /// Scopes the unique key by queue as well as by kind (by default, a key is unique among
    /// the jobs of one kind, whatever their queue).
    pub fn unique_per_queue(mut self) -> Self {
        self.unique.get_or_insert_with(Unique::default).per_queue = true;
        self
    }

    /// The timeout as stored (`timeout_ms`): whole milliseconds, at least 1.
    pub(crate) fn timeout_ms(&self) -> Option<i64> {
        self.timeout
            .map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX).max(1))
    }

    /// Debounces the job by its unique key: while a job of its kind and key waits, this
    /// enqueue replaces its args and moves its start to `delay` from now (see
    /// [`super::Formation::Debounce`]); give a key with [`NewJob::unique_key`].
    pub fn debounce(mut self, delay: Duration) -> Self {
        let max = match self.formation {
            Some(super::Formation::Debounce { max, .. }) => max,
            _ => None,
        };
        self.formation = Some(super::Formation::Debounce { delay, max });
        self
    }

    /// Caps how long a stream of debounced enqueues may postpone the job, from the first.
    pub fn debounce_max(mut self, max: Duration) -> Self {
        if let Some(super::Formation::Debounce { max: m, .. }) = &mut self.formation {
            *m = Some(max);
        } else {
            self.formation = Some(super::Formation::Debounce {
                delay: Duration::ZERO,
                max: Some(max),
            });
        }
        self
    }

    /// Throttles the job by its unique key: at most one job of its kind and key starts per
    /// `period` (see [`super::Formation::Throttle`]); `latest` makes a waiting job take the
    /// latest args.
    pub fn throttle(mut self, period: Duration, latest: bool) -> Self {
        self.formation = Some(super::Formation::Throttle { period, latest });
        self
    }

    /// Adds this enqueue's args to the batch of `key` (see [`super::Formation::Batch`]): a job
    /// whose args are the list of its batch's args, run when `size` have joined or `wait` has
    /// passed since the first.
    pub fn batch(mut self, key: impl Into<String>, size: i32, wait: Duration) -> Self {
        self.formation = Some(super::Formation::Batch {
            key: key.into(),
            size,
            wait,
        });
        self
    }

    /// Continues the trace `trace` (a request's `traceparent` and `tracestate`): the job's
    /// attempts run as its children.
    pub fn trace(mut self, trace: crate::TraceContext) -> Self {
        self.trace = Some(trace);
        self
    }

    /// The job's group, else `current` (the group of the task enqueueing it, see
    /// [`crate::group`]).
    pub(crate) fn group_or(&self, current: Option<&str>) -> Option<String> {
        self.group.as_deref().or(current).map(str::to_string)
    }

    /// The trace context it is enqueued with: its own (checked by [`NewJob::check`]), else the
    /// one current here; an empty `tracestate` is none.
    pub(crate) fn trace_or(
        &self,
        current: Option<&crate::TraceContext>,
    ) -> Option<crate::TraceContext> {
        let mut trace = self.trace.clone().or_else(|| current.cloned())?;
        trace.tracestate = trace.tracestate.filter(|s| !s.is_empty());
        Some(trace)
    }

    /// Notifies `target` when the job reaches a final state it names (instead of the kind's
    /// defaults): a signed webhook and/or an email, written in the transaction of that state.
    pub fn notify(mut self, target: crate::notify::NotifyTarget) -> Self {
        self.notify = Some(target);
        self
    }

    /// Checks the job as every enqueue does before writing anything: names, sizes (args over
    /// `max_payload` bytes are refused), limits, uniqueness, and a deadline it could meet.
    pub fn check(&self, max_payload: usize) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidInput(what));
        check_name("kind", &self.kind)?;
        check_name("queue", &self.queue)
            .map_err(|e| Error::InvalidInput(format!("job {}: {e}", self.kind)))?;
        if let Some(name) = &self.target_worker {
            check_name("target worker", name)
                .map_err(|e| Error::InvalidInput(format!("job {}: {e}", self.kind)))?;
        }
        if self.args.len() > max_payload {
            return bad(format!(
                "job {}: args are {} bytes, over the limit of {} bytes; store large data elsewhere and pass a reference, or raise the limit",
                self.kind,
                self.args.len(),
                max_payload
            ));
        }
        if self.args.0.contains("\\u0000") {
            return bad(format!(
                "job {}: args contain a NUL character (\\u0000), which PostgreSQL's jsonb cannot store; encode binary data (base64)",
                self.kind
            ));
        }
        if let Some(target) = &self.notify {
            target
                .validate()
                .map_err(|e| Error::InvalidInput(format!("job {}: notify: {e}", self.kind)))?;
        }
        if matches!(self.max_attempts, Some(n) if n < 1) {
            return bad(format!(
                "job {}: max_attempts must be at least 1",
                self.kind
            ));
        }
        if matches!(self.timeout, Some(t) if t.is_zero()) {
            return bad(format!("job {}: timeout must be more than zero", self.kind));
        }
        if let Some(deadline) = self.expires_at {
            let now = Utc::now();
            if deadline <= now {
                return bad(format!(
                    "job {}: its deadline {} has passed: it would expire without running; give a later deadline",
                    self.kind,
                    deadline.to_rfc3339()
                ));
            }
            if self.run_at.is_some_and(|start| start >= deadline) {
                return bad(format!(
                    "job {}: it may not start before {} but must start before its deadline {}: it would expire without running",
                    self.kind,
                    self.run_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                    deadline.to_rfc3339()
                ));
            }
        }
        if let Some(group) = &self.group {
            crate::names::check_group(group, MAX_UNIQUE_KEY)
                .map_err(|e| Error::InvalidInput(format!("job {}: {e}", self.kind)))?;
        }
        for (what, value) in [
            ("concurrency key", &self.concurrency_key),
            ("target worker", &self.target_worker),
        ] {
            if let Some(v) = value {
                if v.is_empty() || v.len() > MAX_UNIQUE_KEY {
                    return bad(format!(
                        "job {}: the {what} must be 1 to {MAX_UNIQUE_KEY} bytes",
                        self.kind
                    ));
                }
            }
        }
        if let Some(t) = &self.trace {
            t.checked()
                .map_err(|e| Error::InvalidInput(format!("job {}: {e}", self.kind)))?;
        }
        if let Some(caps) = &self.requires {
            if caps.iter().any(|c| c.trim().is_empty()) {
                return bad(format!("job {}: a required capability is empty", self.kind));
            }
        }
        if let Some(unique) = &self.unique {
            if !unique.by_args && unique.key.as_deref().is_none_or(|k| k.is_empty()) {
                return bad(format!(
                    "job {}: a unique job needs a non-empty key, or uniqueness by args",
                    self.kind
                ));
            }
            if unique
                .key
                .as_ref()
                .is_some_and(|k| k.len() > MAX_UNIQUE_KEY)
            {
                return bad(format!(
                    "job {}: the unique key is over {MAX_UNIQUE_KEY} bytes; use a digest of it",
                    self.kind
                ));
            }
            // a job must hold its key in every state a worker moves it between (scheduled,
            // available, running): otherwise a promotion, claim or retry could run into
            // another job's key and fail (River requires the same)
            use crate::JobState::{Available, Running, Scheduled};
            if ![Scheduled, Available, Running]
                .iter()
                .all(|s| unique.states.contains(s))
            {
                return bad(format!(
                    "job {}: unique states must include scheduled, available and running (add completed, failed, cancelled or expired to keep the key longer)",
                    self.kind
                ));
            }
            if matches!(unique.period, Some(p) if p.as_millis() == 0) {
                return bad(format!(
                    "job {}: the unique period must be at least 1 ms",
                    self.kind
                ));
            }
        }
        Ok(())
    }
}

/// Longest unique key accepted (btree entries must fit a third of a page).
pub const MAX_UNIQUE_KEY: usize = 1000;

/// A batch as parallel arrays, one per column both insert statements take ($1 … $15, one
/// element per job; `requires` as array literals, since arrays of arrays do not unnest).
struct Columns<'a> {
    queues: Vec<&'a str>,
    kinds: Vec<&'a str>,
    priorities: Vec<i32>,
    max_attempts: Vec<Option<i32>>,
    run_ats: Vec<Option<DateTime<Utc>>>,
    expires: Vec<Option<DateTime<Utc>>>,
    timeouts: Vec<Option<i64>>,
    args: Vec<&'a Jsonb>,
    concurrency_keys: Vec<Option<&'a str>>,
    targets: Vec<Option<&'a str>>,
    requires: Vec<Option<String>>,
    notify: Vec<Option<serde_json::Value>>,
    groups: Vec<Option<String>>,
    traceparents: Vec<Option<String>>,
    tracestates: Vec<Option<String>>,
}

impl<'a> Columns<'a> {
    fn of(jobs: impl ExactSizeIterator<Item = &'a NewJob>) -> Self {
        let n = jobs.len();
        let mut c = Columns {
            queues: Vec::with_capacity(n),
            kinds: Vec::with_capacity(n),
            priorities: Vec::with_capacity(n),
            max_attempts: Vec::with_capacity(n),
            run_ats: Vec::with_capacity(n),
            expires: Vec::with_capacity(n),
            timeouts: Vec::with_capacity(n),
            args: Vec::with_capacity(n),
            concurrency_keys: Vec::with_capacity(n),
            targets: Vec::with_capacity(n),
            requires: Vec::with_capacity(n),
            notify: Vec::with_capacity(n),
            groups: Vec::with_capacity(n),
            traceparents: Vec::with_capacity(n),
            tracestates: Vec::with_capacity(n),
        };
        let current = tracing_spans::inherited();
        let current_group = crate::group::current();
        for job in jobs {
            c.queues.push(job.queue.as_str());
            c.kinds.push(job.kind.as_str());
            c.priorities.push(job.priority);
            c.max_attempts.push(job.max_attempts);
            c.run_ats.push(job.run_at);
            c.expires.push(job.expires_at);
            c.timeouts.push(job.timeout_ms());
            c.args.push(&job.args);
            c.concurrency_keys.push(job.concurrency_key.as_deref());
            c.targets.push(job.target_worker.as_deref());
            c.requires.push(job.requires_literal());
            c.notify
                .push(job.notify.as_ref().map(crate::notify::NotifyTarget::stored));
            c.groups.push(job.group_or(current_group.as_deref()));
            let trace = job.trace_or(current.as_ref());
            c.tracestates
                .push(trace.as_ref().and_then(|t| t.tracestate.clone()));
            c.traceparents.push(trace.map(|t| t.traceparent));
        }
        c
    }

    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        vec![
            &self.queues,
            &self.kinds,
            &self.priorities,
            &self.max_attempts,
            &self.run_ats,
            &self.expires,
            &self.timeouts,
            &self.args,
            &self.concurrency_keys,
            &self.targets,
            &self.requires,
            &self.notify,
            &self.groups,
            &self.traceparents,
            &self.tracestates,
        ]
    }
}

/// Whether any job of the batch asks for uniqueness.
pub(crate) fn any_unique(jobs: &[NewJob]) -> bool {
    jobs.iter().any(|j| j.unique.is_some())
}

/// Inserts jobs with one statement and returns, in the same order, each one's id and whether
/// it was a duplicate of an existing unique job; inside the send's `tracing` span.
pub(crate) async fn insert_many(
    conn: &impl Sql,
    jobs: &[NewJob],
    max_payload: usize,
) -> Result<Vec<Inserted>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let span = tracing_spans::send_span(destination(jobs), jobs.len());
    let inserted = tracing_spans::sending(&span, write_many(conn, jobs, max_payload)).await;
    if let Ok([one]) = inserted.as_deref() {
        tracing_spans::sent(&span, one.id);
    }
    inserted
}

/// The queue jobs are sent to, as their send's span names it ("" for several).
fn destination(jobs: &[NewJob]) -> &str {
    match jobs.split_first() {
        Some((first, rest)) if rest.iter().all(|j| j.queue == first.queue) => &first.queue,
        _ => "",
    }
}

/// [`insert_many`]'s work.
async fn write_many(conn: &impl Sql, jobs: &[NewJob], max_payload: usize) -> Result<Vec<Inserted>> {
    // a task's declared debounce or throttle, on the keyed jobs that take it
    let formed: Vec<NewJob>;
    let jobs = if jobs.iter().any(NewJob::takes_keyed_formation) {
        formed = jobs
            .iter()
            .map(|j| j.with_keyed_formation().unwrap_or_else(|| j.clone()))
            .collect();
        &formed[..]
    } else {
        jobs
    };
    for job in jobs {
        job.check(max_payload)?;
    }
    crate::group::check_current()?;
    if jobs.iter().any(|j| j.formation.is_some()) {
        return super::formation::insert_formed(conn, jobs).await;
    }
    if any_unique(jobs) {
        return insert_unique(conn, jobs).await;
    }
    let columns = Columns::of(jobs.iter());
    let rows = conn.query(sql::INSERT_JOBS, &columns.params()).await?;
    rows.iter()
        .map(|row| {
            Ok(Inserted {
                id: row.try_get(0)?,
                duplicate: false,
                joined: false,
            })
        })
        .collect()
}

/// The unique path: keys computed (by-args digests by the database), one `INSERT … ON
/// CONFLICT DO NOTHING`, then the ids of the duplicates looked up. A duplicate whose holder
/// left its unique states between the two statements is inserted on the next round.
async fn insert_unique(conn: &impl Sql, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
    let now = Utc::now();
    let mut keys: Vec<Option<String>> = jobs
        .iter()
        .map(|j| j.unique.as_ref().map(|u| u.stored(now)))
        .collect();
    let by_args: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].unique.as_ref().is_some_and(|u| u.by_args))
        .collect();
    if !by_args.is_empty() {
        let kinds: Vec<&str> = by_args.iter().map(|&i| jobs[i].kind.as_str()).collect();
        let args: Vec<&Jsonb> = by_args.iter().map(|&i| &jobs[i].args).collect();
        let rows = conn.query(sql::UNIQUE_ARGS_KEYS, &[&kinds, &args]).await?;
        for (&i, row) in by_args.iter().zip(&rows) {
            let digest: String = row.try_get(0)?;
            let suffix = keys[i].take().unwrap_or_default();
            keys[i] = Some(if suffix.is_empty() {
                digest
            } else {
                format!("{digest}|{suffix}")
            });
        }
    }
    let mut done: Vec<Option<Inserted>> = vec![None; jobs.len()];
    for _round in 0..5 {
        let pending: Vec<usize> = (0..jobs.len()).filter(|&i| done[i].is_none()).collect();
        if pending.is_empty() {
            break;
        }
        let columns = Columns::of(pending.iter().map(|&i| &jobs[i]));
        let unique_keys: Vec<Option<&str>> = pending.iter().map(|&i| keys[i].as_deref()).collect();
        let states: Vec<Option<String>> = pending
            .iter()
            .map(|&i| jobs[i].unique.as_ref().map(Unique::states_literal))
            .collect();
        let scopes: Vec<Option<&str>> = pending.iter().map(|&i| jobs[i].unique_queue()).collect();
        let mut params = columns.params();
        params.push(&unique_keys);
        params.push(&states);
        params.push(&scopes);
        let rows = conn.query(sql::INSERT_UNIQUE_JOBS, &params).await?;
        // inserted rows come back in input order: match them, the rest are duplicates
        let mut returned = rows.iter().peekable();
        let mut duplicates: Vec<(usize, String)> = Vec::new();
        for &i in &pending {
            // the same key may be held in another scope (kind, queue): compare all of it
            let matches = match returned.peek() {
                Some(row) => {
                    row.try_get::<_, Option<String>>(1)? == keys[i]
                        && row.try_get::<_, String>(2)? == jobs[i].kind
                        && row.try_get::<_, String>(3)? == jobs[i].unique_queue().unwrap_or("")
                }
                None => false,
            };
            match (matches, &keys[i]) {
                (true, _) | (false, None) => {
                    let row = returned.next().ok_or_else(|| {
                        Error::InvalidInput("the insert returned fewer rows than expected".into())
                    })?;
                    done[i] = Some(Inserted {
                        id: row.try_get(0)?,
                        duplicate: false,
                        joined: false,
                    });
                }
                (false, Some(key)) => duplicates.push((i, key.clone())),
            }
        }
        if duplicates.is_empty() {
            break;
        }
        let kinds: Vec<&str> = duplicates
            .iter()
            .map(|(i, _)| jobs[*i].kind.as_str())
            .collect();
        let scopes: Vec<&str> = duplicates
            .iter()
            .map(|(i, _)| jobs[*i].unique_queue().unwrap_or(""))
            .collect();
        let wanted: Vec<&str> = duplicates.iter().map(|(_, k)| k.as_str()).collect();
        for row in conn
            .query(sql::UNIQUE_LOOKUP, &[&kinds, &scopes, &wanted])
            .await?
        {
            let n: i64 = row.try_get(0)?;
            let id: i64 = row.try_get(1)?;
            let asking = usize::try_from(n - 1).ok().and_then(|n| duplicates.get(n));
            if let Some(&(i, _)) = asking {
                done[i] = Some(Inserted {
                    id,
                    duplicate: true,
                    joined: false,
                });
            }
        }
    }
    done.into_iter()
        .map(|d| {
            d.ok_or_else(|| {
                Error::InvalidInput(
                    "a unique job's key kept changing hands while it was enqueued; try again"
                        .into(),
                )
            })
        })
        .collect()
}

/// Inserts jobs inside `tx` the fastest way: jobs due now with binary COPY, jobs with a
/// `run_at` with `insert_jobs.sql`. Returns how many were inserted (COPY returns no ids).
/// Inside the send's `tracing` span.
pub(crate) async fn insert_bulk(
    tx: &tokio_postgres::Transaction<'_>,
    statements: &impl Sql,
    jobs: &[NewJob],
    max_payload: usize,
) -> Result<u64> {
    let span = tracing_spans::send_span(destination(jobs), jobs.len());
    tracing_spans::sending(&span, write_bulk(tx, statements, jobs, max_payload)).await
}

/// [`insert_bulk`]'s work.
async fn write_bulk(
    tx: &tokio_postgres::Transaction<'_>,
    statements: &impl Sql,
    jobs: &[NewJob],
    max_payload: usize,
) -> Result<u64> {
    for job in jobs {
        job.check(max_payload)?;
    }
    crate::group::check_current()?;
    // COPY cannot skip duplicates: unique jobs, jobs due later, jobs with notification
    // targets and jobs formed from many enqueues (the COPY's columns are the plain job's) go
    // through INSERT
    let (now, later): (Vec<&NewJob>, Vec<&NewJob>) = jobs.iter().partition(|j| {
        j.run_at.is_none() && j.unique.is_none() && j.notify.is_none() && j.formation.is_none()
    });
    let mut inserted = 0;
    if !later.is_empty() {
        let later: Vec<NewJob> = later.into_iter().cloned().collect();
        inserted += write_many(statements, &later, max_payload)
            .await?
            .iter()
            .filter(|i| !i.duplicate && !i.joined)
            .count() as u64;
    }
    if !now.is_empty() {
        let sink = tx.copy_in(sql::COPY_JOBS).await?;
        let writer = BinaryCopyInWriter::new(
            sink,
            &[
                Type::TEXT,
                Type::TEXT,
                Type::INT4,
                Type::INT4,
                Type::TIMESTAMPTZ,
                Type::INT8,
                Type::JSONB,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT_ARRAY,
                Type::TEXT,
                Type::TEXT,
                Type::TEXT,
            ],
        );
        pin_mut!(writer);
        let current = tracing_spans::inherited();
        let current_group = crate::group::current();
        for job in now {
            let timeout = job.timeout_ms();
            let group = job.group_or(current_group.as_deref());
            let trace = job.trace_or(current.as_ref());
            let tracestate = trace.as_ref().and_then(|t| t.tracestate.as_deref());
            let traceparent = trace.as_ref().map(|t| t.traceparent.as_str());
            writer
                .as_mut()
                .write(&[
                    &job.queue,
                    &job.kind,
                    &job.priority,
                    &job.max_attempts,
                    &job.expires_at,
                    &timeout,
                    &job.args,
                    &job.concurrency_key,
                    &job.target_worker,
                    &job.requires,
                    &group,
                    &traceparent,
                    &tracestate,
                ])
                .await?;
        }
        inserted += writer.finish().await?;
    }
    Ok(inserted)
}

/// A PostgreSQL array literal of text elements, each quoted.
fn array_literal(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|i| format!("\"{}\"", i.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{{{}}}", quoted.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_numbers_the_key_by_its_window() {
        let unique = Unique {
            key: Some("report".into()),
            period: Some(Duration::from_secs(3600)),
            ..Unique::default()
        };
        let at = |s: &str| s.parse::<DateTime<Utc>>().expect("time");
        let a = unique.stored(at("2026-11-30T10:05:00Z"));
        let b = unique.stored(at("2026-11-30T10:55:00Z"));
        let c = unique.stored(at("2026-11-30T11:00:00Z"));
        assert_eq!(a, b, "same hour");
        assert_ne!(b, c, "next hour");
        assert!(a.starts_with("report@"));
        assert_eq!(
            Unique::default().states_literal(),
            "{scheduled,available,running,completed}"
        );
        assert_eq!(
            array_literal(&["gpu".into(), "a\"b,c\\".into()]),
            r#"{"gpu","a\"b,c\\"}"#
        );
    }
}
