//! The client: enqueue jobs (one, a batch, or inside your transaction), look them up, cancel
//! or retry them, wait for their results, and read queue and worker statistics.
//!
//! ```no_run
//! # async fn demo() -> remuda::Result<()> {
//! use remuda::{Client, NewJob};
//! let client = Client::connect("postgres://localhost/app").await?;
//! let id = client.insert(NewJob::new("resize", &serde_json::json!({"w": 640}))?).await?;
//! let job = client.wait(id, std::time::Duration::from_secs(30)).await?;
//! println!("{:?}", job.result);
//! # Ok(()) }
//! ```

mod activity;
mod bulk;
mod formation;
mod groups;
mod insert;
mod list;
mod maintenance;
mod queues;
mod throughput;
pub(crate) mod wait;

pub use crate::names::{check_name, MAX_NAME};
pub use activity::{MinuteActivity, QueueActivity, MAX_ACTIVITY_MINUTES};
pub use bulk::{BulkAction, BulkOutcome};
pub use formation::{Formation, FormationParts};
pub use groups::{GroupShare, MAX_WEIGHT, MIN_WEIGHT};
pub use insert::{Inserted, NewJob, Unique, MAX_UNIQUE_KEY};
pub use list::{cursor_after, is_held, listed_at, JobPage, DEFAULT_PAGE, MAX_PAGE};
pub use queues::{ClusterSettings, Fairness, QueueChange, QueueRetention, QueueSettings, RatePer};
pub use throughput::Throughput;

use crate::db::listener::Listener;
use crate::db::{Database, DEFAULT_POOL_SIZE};
use crate::job::{Job, JobState};
use crate::task::Task;
use crate::{migrate, sql, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::sync::{Arc, OnceLock};
use tokio_postgres::GenericClient;
use tokio_util::sync::CancellationToken;

/// Default limit on the size of a job's args, result or error: 1 MiB.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// Handle to a remuda database. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    max_payload: usize,
    listener: OnceLock<Listener>,
    stop: CancellationToken,
    metrics: crate::metrics::Metrics,
    /// A check of the schema passed (see [`Client::check`]).
    checked: std::sync::atomic::AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("db", &self.inner.db)
            .finish()
    }
}

/// How [`Client::retry_with`] runs a job again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryOptions {
    /// Runs a completed job again too (its result is dropped).
    pub force: bool,
    /// Drops the steps the job recorded: it runs from its first step (`retry --fresh`).
    pub fresh: bool,
}

/// Filters for [`Client::jobs`].
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs in this queue.
    pub queue: Option<String>,
    /// Only jobs of this kind.
    pub kind: Option<String>,
    /// Only jobs run (or running) by this worker id.
    pub worker: Option<String>,
    /// Only jobs whose args contain this JSON (`@>`: `{"user": 42}` matches every job whose
    /// args have `"user": 42` among others).
    pub args: Option<serde_json::Value>,
    /// At most this many (1 to [`MAX_PAGE`]); default [`DEFAULT_PAGE`].
    pub limit: Option<i64>,
    /// The page after this cursor ([`JobPage::next`] of the previous page, or the `cursor`
    /// of a listed job).
    pub after: Option<String>,
    /// Only the jobs of this workflow run.
    pub workflow: Option<i64>,
}

/// Number of jobs in each state of one queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Jobs per state this build knows; states added by a newer schema are left out.
    counts: std::collections::HashMap<JobState, i64>,
    /// Final states whose count reached the cap: "at least" that many.
    capped: Vec<JobState>,
    /// Available jobs that no live worker can take: no live worker serving the queue runs
    /// their kind, or none of those is the named target worker or has every required
    /// capability.
    pub unroutable: i64,
    /// When its oldest available job became runnable (`None`: none is waiting); now minus
    /// this is the queue's lag.
    pub oldest_available: Option<DateTime<Utc>>,
    /// The queue's settings (pause, limits): the defaults for a queue never configured.
    pub settings: QueueSettings,
}

impl QueueStats {
    /// Jobs of the queue in `state`.
    pub fn count(&self, state: JobState) -> i64 {
        self.counts.get(&state).copied().unwrap_or(0)
    }

    /// Whether the count of `state` stopped at the cap of [`Client::queue_stats_capped`]: the
    /// queue holds at least that many jobs in it (only final states are capped).
    pub fn is_capped(&self, state: JobState) -> bool {
        self.capped.contains(&state)
    }
}

/// As `remuda queues --json` and the API print it: `{"queue", "<state>": count for every
/// state, "capped": [final states counted only up to COUNT_CAP], "unroutable", "paused",
/// "max_running", "key_limit", "rate", "rate_per", "max_depth", "fairness"}`.
impl Serialize for QueueStats {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde_json::{json, Map, Value};
        let mut object = Map::new();
        object.insert("queue".into(), json!(self.queue));
        for state in JobState::ALL {
            object.insert(state.as_str().into(), json!(self.count(state)));
        }
        object.insert("capped".into(), json!(self.capped));
        object.insert("unroutable".into(), json!(self.unroutable));
        object.insert("oldest_available".into(), json!(self.oldest_available));
        if let Ok(Value::Object(settings)) = serde_json::to_value(&self.settings) {
            for key in [
                "paused",
                "max_running",
                "key_limit",
                "rate",
                "rate_per",
                "max_depth",
                "fairness",
            ] {
                if let Some(value) = settings.get(key) {
                    object.insert(key.into(), value.clone());
                }
            }
        }
        object.serialize(serializer)
    }
}

/// The most jobs the dashboard counts per queue in each final state
/// ([`Client::queue_stats_capped`]): beyond it the count says "at least", and stays quick with
/// millions of finished jobs.
pub const COUNT_CAP: i64 = 10_000;

/// With a cap, the unroutable jobs are looked for among the next this many to run of each
/// queue: what holds a queue's head back.
const UNROUTABLE_SAMPLE: i64 = 1000;

/// A registered worker, as `remuda workers` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerInfo {
    /// Unique id of this worker process.
    pub id: String,
    /// Name given by the operator (defaults to the host name).
    pub name: String,
    /// Host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: i32,
    /// Queues it claims from.
    pub queues: Vec<String>,
    /// Task kinds it runs.
    pub kinds: Vec<String>,
    /// Capabilities it declared (for jobs that `require` some).
    pub capabilities: Vec<String>,
    /// Jobs it runs at once at most.
    pub concurrency: i32,
    /// Jobs it is running now.
    pub running: i64,
    /// Attempts it completed since it started.
    pub completed: i64,
    /// Attempts that failed for good on it since it started.
    pub failed: i64,
    /// Its processor use over its last heartbeat interval, in percent of one core.
    pub cpu_percent: Option<f32>,
    /// Its resident memory, in bytes.
    pub rss_bytes: Option<i64>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat (`None` once the leader declared it dead).
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// Heard from within its `rescue_after`. A dead worker stays listed while jobs point at
    /// it, until the leader has rescued them.
    pub alive: bool,
}

impl Client {
    /// Connects to the database at `conninfo` and checks that its schema is the one this
    /// build needs (run [`migrate::run`] or `remuda migrate` first).
    pub async fn connect(conninfo: &str) -> Result<Client> {
        let client = Client::new(Database::new(conninfo, DEFAULT_POOL_SIZE)?);
        client.check().await?;
        Ok(client)
    }

    /// A client over an existing pool, without checking anything yet.
    pub fn new(db: Database) -> Client {
        Client {
            inner: Arc::new(Inner {
                db,
                max_payload: DEFAULT_MAX_PAYLOAD,
                listener: OnceLock::new(),
                stop: CancellationToken::new(),
                metrics: crate::metrics::Metrics::new(),
                checked: Default::default(),
            }),
        }
    }

    /// Sets the size limit for args, results and errors (default 1 MiB). Returns a client
    /// with its own listener; call it before sharing the client.
    pub fn with_max_payload(self, bytes: usize) -> Client {
        let mut client = Client::new(self.inner.db.clone());
        if let Some(inner) = Arc::get_mut(&mut client.inner) {
            inner.max_payload = bytes;
            inner.metrics = self.inner.metrics.clone();
            let checked = self
                .inner
                .checked
                .load(std::sync::atomic::Ordering::Relaxed);
            inner.checked = checked.into();
        }
        client
    }

    /// Checks that the server answers and the schema version matches this build.
    pub async fn check(&self) -> Result<()> {
        self.inner.db.ping().await?;
        migrate::check(&self.inner.db).await?;
        self.inner
            .checked
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// [`Client::check`], unless this client passed one already (a worker started on a
    /// client made by [`Client::connect`] checks nothing twice: four round trips and the
    /// text of every function).
    pub(crate) async fn check_once(&self) -> Result<()> {
        match self
            .inner
            .checked
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            true => Ok(()),
            false => self.check().await,
        }
    }

    /// The pool.
    pub fn database(&self) -> &Database {
        &self.inner.db
    }

    /// The size limit for args, results and errors.
    pub fn max_payload(&self) -> usize {
        self.inner.max_payload
    }

    /// This process's metrics: what this client enqueued, and what the workers and the
    /// leader running on it did (see [`crate::metrics`]).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    /// Counts the jobs inserted (those of `jobs` not reported duplicates in `inserted`, nor
    /// folded into a waiting job).
    fn count_enqueued(&self, jobs: &[NewJob], inserted: Option<&[Inserted]>) {
        let mut counts: std::collections::HashMap<(&str, &str), u64> = Default::default();
        for (i, job) in jobs.iter().enumerate() {
            if inserted.is_some_and(|all| all.get(i).is_some_and(|x| x.duplicate || x.joined)) {
                continue;
            }
            *counts.entry((&job.queue, &job.kind)).or_default() += 1;
        }
        for ((queue, kind), n) in counts {
            self.inner.metrics.enqueued(queue, kind, n);
        }
    }

    /// The shared LISTEN connection, started on first use.
    pub(crate) fn listener(&self) -> &Listener {
        self.inner.listener.get_or_init(|| {
            Listener::start(
                self.inner.db.session_target(),
                self.inner.stop.child_token(),
            )
        })
    }

    /// Enqueues a job for task `T` with `T`'s defaults; returns its id.
    pub async fn enqueue<T: Task>(&self, args: &T::Args) -> Result<i64> {
        self.insert(NewJob::for_task::<T>(args)?).await
    }

    /// Enqueues one job; returns its id.
    pub async fn insert(&self, job: NewJob) -> Result<i64> {
        let ids = self.insert_many(std::slice::from_ref(&job)).await?;
        ids.first()
            .copied()
            .ok_or_else(|| Error::InvalidInput("the insert returned no id".into()))
    }

    /// Adds `item` to the batch of `key` of task `T`, which takes batches (`type Args =
    /// Vec<…>` and [`TaskOptions::batch`](crate::TaskOptions::batch)): enqueues with one key
    /// accumulate into one job, run when its batch size is reached or its wait has passed
    /// since the first. Returns the batch job (`joined`: an existing batch).
    pub async fn enqueue_to_batch<T, I>(&self, key: &str, item: &I) -> Result<Inserted>
    where
        T: Task<Args = Vec<I>>,
        I: Serialize,
    {
        let options = T::options();
        let (Some(size), Some(wait)) = (options.batch_size, options.batch_wait) else {
            return Err(Error::InvalidInput(format!(
                "task {} takes no batches: set batch_size and batch_wait in its options() (TaskOptions::batch)",
                T::KIND
            )));
        };
        let mut job = NewJob::new(T::KIND, item)?.batch(key, size, wait);
        job.queue = options.queue;
        job.priority = options.priority;
        job.max_attempts = Some(options.max_attempts);
        job.timeout = options.timeout;
        self.insert_each(std::slice::from_ref(&job))
            .await?
            .first()
            .copied()
            .ok_or_else(|| Error::InvalidInput("the enqueue returned no job".into()))
    }

    /// Enqueues many jobs in one statement (one round trip once prepared); returns their ids
    /// in order (for a duplicate unique job, the existing job's id). All or none are inserted.
    pub async fn insert_many(&self, jobs: &[NewJob]) -> Result<Vec<i64>> {
        Ok(ids(self.insert_each(jobs).await?))
    }

    /// [`Client::insert_many`], saying for each job whether it was a duplicate of an
    /// existing unique job (whose id is returned) or inserted.
    pub async fn insert_each(&self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        let mut conn = self.inner.db.conn().await?;
        if insert::any_unique(jobs) || jobs.iter().any(|j| j.formation.is_some()) {
            // the unique and formed paths may take several statements: all or none, in one
            // transaction
            let tx = conn.transaction().await?;
            let inserted = insert::insert_many(&tx, jobs, self.inner.max_payload).await?;
            tx.commit().await?;
            self.count_enqueued(jobs, Some(&inserted));
            return Ok(inserted);
        }
        let inserted = insert::insert_many(&conn, jobs, self.inner.max_payload).await?;
        self.count_enqueued(jobs, Some(&inserted));
        Ok(inserted)
    }

    /// Enqueues jobs inside the caller's transaction (or on any connection): they exist if
    /// and only if that transaction commits, and workers hear of them at commit. Behind a
    /// transaction-mode pooler, call it inside a transaction (its statements are prepared
    /// and run as separate messages, which the pooler keeps together only there). A unique job
    /// whose key an uncommitted transaction holds waits for that transaction to end.
    pub async fn insert_in<C: GenericClient + Sync>(
        &self,
        conn: &C,
        jobs: &[NewJob],
    ) -> Result<Vec<i64>> {
        Ok(ids(self.insert_each_in(conn, jobs).await?))
    }

    /// [`Client::insert_in`], saying for each job whether it was a duplicate.
    pub async fn insert_each_in<C: GenericClient + Sync>(
        &self,
        conn: &C,
        jobs: &[NewJob],
    ) -> Result<Vec<Inserted>> {
        let inserted =
            insert::insert_many(&crate::db::Prepared(conn), jobs, self.inner.max_payload).await?;
        // counted when the statement succeeded: the caller's transaction may still roll back
        self.count_enqueued(jobs, Some(&inserted));
        Ok(inserted)
    }

    /// Enqueues any number of jobs as fast as PostgreSQL takes them (binary COPY for jobs due
    /// now), all or none, without returning their ids: the path for bulk loads. Returns how
    /// many were inserted.
    pub async fn insert_bulk(&self, jobs: &[NewJob]) -> Result<u64> {
        let mut conn = self.inner.db.conn().await?;
        let tx = conn.transaction().await?;
        let n = insert::insert_bulk(&tx, &tx, jobs, self.inner.max_payload).await?;
        tx.commit().await?;
        self.count_enqueued(jobs, None);
        Ok(n)
    }

    /// [`Client::insert_bulk`] inside the caller's transaction.
    pub async fn insert_bulk_in(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        jobs: &[NewJob],
    ) -> Result<u64> {
        let n =
            insert::insert_bulk(tx, &crate::db::Prepared(tx), jobs, self.inner.max_payload).await?;
        self.count_enqueued(jobs, None);
        Ok(n)
    }

    /// Looks a job up.
    pub async fn job(&self, id: i64) -> Result<Option<Job>> {
        let conn = self.inner.db.conn().await?;
        conn.query_opt(sql::JOB_GET, &[&[id].as_slice()])
            .await?
            .as_ref()
            .map(Job::from_row)
            .transpose()
    }

    /// The jobs of `kind` that hold `key`, newest first (at most 1 000): the job waiting under
    /// a unique, debounce, throttle or batch key (a debounced, throttled or batched job holds
    /// its key only while it waits), a unique job running or finished in one of its unique
    /// states, as the enqueue that gave the key would find it. A unique period's jobs are
    /// found by the key without its period; a key made from the args (`unique_by_args`) is
    /// not the key given.
    pub async fn find_by_key(&self, kind: &str, key: &str) -> Result<Vec<Job>> {
        const MOST: i64 = 1000;
        let conn = self.inner.db.conn().await?;
        let ids: Vec<i64> = conn
            .query(sql::JOBS_BY_KEY, &[&kind, &key, &MOST])
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<_, _>>()?;
        conn.query(sql::JOB_GET, &[&ids])
            .await?
            .iter()
            .map(Job::from_row)
            .collect()
    }

    /// Lists the first page of jobs matching `filter`, in the order of its state (see
    /// [`Client::job_page`]).
    pub async fn jobs(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        Ok(self.job_page(filter).await?.jobs)
    }

    /// Cancels a job that has not finished; a running one is stopped by its worker. Returns
    /// the state it was in.
    pub async fn cancel(&self, id: i64) -> Result<JobState> {
        match self
            .manual_transition(sql::JOB_CANCEL, &[&id], id, "cancel")
            .await
        {
            // cancelling twice is not an error: the job is cancelled, as asked
            Err(Error::WrongState { state, .. }) if state == "cancelled" => Ok(JobState::Cancelled),
            other => other,
        }
    }

    /// Makes a job that is not running or waiting to run available again now, with one more
    /// attempt if it had used them all. Returns the state it was in. A completed job is
    /// refused (its result would be lost): [`Client::rerun`] runs one again on purpose. The
    /// steps it recorded are kept: it resumes after the last one.
    pub async fn retry(&self, id: i64) -> Result<JobState> {
        self.retry_with(id, RetryOptions::default()).await
    }

    /// Like [`Client::retry`], but also runs a completed job again (its result is dropped;
    /// its error history is kept).
    pub async fn rerun(&self, id: i64) -> Result<JobState> {
        let options = RetryOptions {
            force: true,
            ..Default::default()
        };
        self.retry_with(id, options).await
    }

    /// [`Client::retry`] with `options`: `force` runs a completed job again, `fresh` drops
    /// the steps it recorded, in the same transaction, so that it runs from its first step.
    pub async fn retry_with(&self, id: i64, options: RetryOptions) -> Result<JobState> {
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&id, &options.force, &options.fresh];
        self.manual_transition(sql::JOB_RETRY, &params, id, "retry")
            .await
            .map_err(|e| match e {
                Error::WrongState { id, state, .. } if state == "completed" && !options.force => {
                    Error::InvalidInput(format!(
                        "job {id} is completed: running it again drops its result; use --force (Client::rerun) if that is what you want"
                    ))
                }
                e => e,
            })
    }

    /// Redrive: makes every job in `state` (failed, cancelled or expired; completed jobs are
    /// not re-run) matching `queue` and `kind` available again now, each with one more attempt
    /// if it had used them all and its error history kept. Returns how many were re-queued.
    pub async fn retry_many(
        &self,
        state: JobState,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> Result<u64> {
        if !matches!(
            state,
            JobState::Failed | JobState::Cancelled | JobState::Expired
        ) {
            return Err(Error::InvalidInput(format!(
                "only failed, cancelled or expired jobs can be retried in bulk, not {state} ones"
            )));
        }
        let filter = JobFilter {
            state: Some(state),
            queue: queue.map(str::to_string),
            kind: kind.map(str::to_string),
            ..Default::default()
        };
        let outcome = self
            .act_on_matching(&filter, BulkAction::Retry, None, false)
            .await?;
        Ok(outcome.changed)
    }

    /// Runs an operator's transition (`job_cancel.sql`, `job_retry.sql`: both return the old
    /// state and whether the row changed) and says why it did nothing when it did nothing.
    async fn manual_transition(
        &self,
        statement: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        id: i64,
        action: &'static str,
    ) -> Result<JobState> {
        let key_taken = || {
            Error::UniqueConflict(format!(
                "cannot {action} job {id}: another job holds its unique key now (the retry would be a duplicate)"
            ))
        };
        let conn = self.inner.db.conn().await?;
        let row = conn
            .query_opt(statement, params)
            .await
            .map_err(|e| match e.as_db_error() {
                // a key another job took between the check and the write
                Some(db) if db.constraint() == Some("jobs_unique_scope_idx") => key_taken(),
                _ => Error::from(e),
            })?
            .ok_or(Error::NotFound(id))?;
        let old: String = row.try_get("old_state")?;
        let changed: i64 = row.try_get("changed")?;
        // a workflow's job is acted on through its run, which advances its node
        if let Some(run) = row.try_get::<_, Option<i64>>("run_refused")? {
            return Err(Error::InvalidInput(format!(
                "job {id} belongs to workflow run {run}: {action} the run instead (`remuda workflow {action} {run}`), which advances its node"
            )));
        }
        if row.try_get::<_, bool>("key_taken")? {
            return Err(key_taken());
        }
        if changed == 0 {
            return Err(Error::WrongState {
                id,
                state: old,
                action,
            });
        }
        old.parse().map_err(Error::InvalidInput)
    }

    /// Job counts per queue and state, the queue's settings, and how many of its available
    /// jobs no live worker can take; configured queues without jobs are listed too.
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>> {
        self.queue_stats_capped(None).await
    }

    /// Like [`Client::queue_stats`], with each final state counted up to `cap` per queue
    /// ([`QueueStats::is_capped`] says which stopped there): a page shown every few seconds
    /// counts [`COUNT_CAP`] at most, whatever the table holds. With a cap, running jobs are
    /// those the workers reported at their last heartbeat, and unroutable ones are looked for
    /// among the next 1 000 to run of each queue.
    pub async fn queue_stats_capped(&self, cap: Option<i64>) -> Result<Vec<QueueStats>> {
        let conn = self.inner.db.conn().await?;
        let mut stats: std::collections::BTreeMap<String, QueueStats> = Default::default();
        for row in conn.query(sql::QUEUE_COUNTS, &[&cap]).await? {
            let queue: String = row.try_get("queue")?;
            let state: String = row.try_get("state")?;
            let count: i64 = row.try_get("jobs")?;
            let capped: bool = row.try_get("capped")?;
            let oldest: Option<DateTime<Utc>> = row.try_get("oldest")?;
            let entry = stats_entry(&mut stats, &queue);
            entry.oldest_available = entry.oldest_available.or(oldest);
            // a state a newer schema added: not one this build can name, so not counted
            match state.parse::<JobState>() {
                Ok(state) => {
                    entry.counts.insert(state, count);
                    if capped {
                        entry.capped.push(state);
                    }
                }
                Err(_) => tracing::debug!(
                    "remuda: {count} jobs of queue {queue} in state {state}, unknown to this build"
                ),
            }
        }
        for row in conn.query(sql::QUEUE_ALL, &[]).await? {
            let settings = QueueSettings::from_row(&row)?;
            let name = settings.name.clone();
            stats_entry(&mut stats, &name).settings = settings;
        }
        let sample = cap.map(|c| c.min(UNROUTABLE_SAMPLE));
        for row in conn.query(sql::UNROUTABLE, &[&sample]).await? {
            let queue: String = row.try_get("queue")?;
            stats_entry(&mut stats, &queue).unroutable = row.try_get("jobs")?;
        }
        Ok(stats.into_values().collect())
    }

    /// How many jobs of `queues` and `kinds` are scheduled (waiting for their time): what a
    /// `worker --once` run leaves behind.
    pub async fn scheduled_count(&self, queues: &[String], kinds: &[String]) -> Result<i64> {
        let conn = self.inner.db.conn().await?;
        let row = conn
            .query_one(sql::SCHEDULED_LEFT, &[&queues, &kinds, &0i64])
            .await?;
        Ok(row.try_get("scheduled")?)
    }

    /// Whether a live worker runs `kind` in `queue`, and whether any worker is live at all:
    /// a job nobody takes waits forever, so the CLI warns about it at enqueue.
    pub async fn kind_served(&self, kind: &str, queue: &str) -> Result<(bool, bool)> {
        let conn = self.inner.db.conn().await?;
        let row = conn.query_one(sql::KIND_SERVED, &[&kind, &queue]).await?;
        Ok((row.try_get("served")?, row.try_get("any_worker")?))
    }

    /// Registered workers.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let conn = self.inner.db.conn().await?;
        conn.query(sql::WORKER_LIST, &[])
            .await?
            .iter()
            .map(|row| {
                Ok(WorkerInfo {
                    id: row.try_get("id")?,
                    name: row.try_get("name")?,
                    host: row.try_get("host")?,
                    pid: row.try_get("pid")?,
                    queues: row.try_get("queues")?,
                    kinds: row.try_get("kinds")?,
                    capabilities: row.try_get("capabilities")?,
                    concurrency: row.try_get("concurrency")?,
                    running: row.try_get("running")?,
                    completed: row.try_get("completed")?,
                    failed: row.try_get("failed")?,
                    cpu_percent: row.try_get("cpu_percent")?,
                    rss_bytes: row.try_get("rss_bytes")?,
                    started_at: row.try_get("started_at")?,
                    heartbeat_at: row.try_get("heartbeat_at")?,
                    alive: row.try_get("alive")?,
                })
            })
            .collect()
    }
}

/// The statistics of `queue`, created empty when the queue is not listed yet.
fn stats_entry<'a>(
    stats: &'a mut std::collections::BTreeMap<String, QueueStats>,
    queue: &str,
) -> &'a mut QueueStats {
    stats
        .entry(queue.to_string())
        .or_insert_with(|| QueueStats {
            queue: queue.to_string(),
            counts: Default::default(),
            capped: Vec::new(),
            unroutable: 0,
            oldest_available: None,
            settings: QueueSettings::new(queue),
        })
}

fn ids(inserted: Vec<Inserted>) -> Vec<i64> {
    inserted.into_iter().map(|i| i.id).collect()
}
