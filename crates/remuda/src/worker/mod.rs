//! The worker: claims jobs from its queues, runs up to `concurrency` of them at once, writes
//! their outcomes in batches, heartbeats, takes its turn at maintenance when elected leader,
//! and shuts down gracefully.
//!
//! ```no_run
//! # use remuda::{Client, Worker, Task, JobContext, TaskError};
//! # struct Noop;
//! # impl Task for Noop {
//! #     const KIND: &'static str = "noop";
//! #     type Args = serde_json::Value;
//! #     type Output = ();
//! #     async fn run(&self, _: JobContext, _: serde_json::Value) -> Result<(), TaskError> { Ok(()) }
//! # }
//! # async fn demo(client: Client) -> remuda::Result<()> {
//! let report = Worker::new(client)
//!     .queues(["default"])
//!     .concurrency(64)
//!     .register(Noop)
//!     .run_until_signal()
//!     .await?;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! Shutdown: the producer stops claiming; running jobs get `shutdown_timeout` to finish; the
//! rest are stopped and released to `available` without counting the attempt; pending
//! outcomes are written; the worker resigns leadership and leaves the registry.

mod activity;
mod claim;
mod completer;
mod dispatch;
mod due_soon;
mod executor;
pub use executor::JOB_LOG;
mod gauges;
mod heartbeat;
mod outcome;
mod producer;
mod settings;
mod signals;
mod startup;
pub use signals::ShutdownSignals;
mod usage;

use crate::client::Client;
pub use crate::config::{QueueOrder, WorkerConfig, MAX_CONCURRENCY};
use crate::maintenance;
use crate::runtime::{lock, supervise};
use crate::task::{DynTask, Task, TaskOptions, Typed};
use crate::{Error, Result};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// Connections of a worker's own pool besides maintenance's: one for each task that may hold
/// one at the same time as the others — producer, completer, heartbeat, settings refresh,
/// cancel reconciliation, the notification dispatcher and its writer, and the step writer
/// and reader — so none waits for another.
const WORKER_POOL_SIZE: usize = 9;

/// Longest a stopping worker waits for its last spans to reach the collector.
const SPANS_FLUSH: Duration = Duration::from_secs(5);
/// How long past that deadline the exporter may take to count and say what it could not send.
const SPANS_FLUSH_MARGIN: Duration = Duration::from_secs(1);

/// Counts of what a worker did, readable while it runs.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Attempts that completed.
    pub completed: AtomicU64,
    /// Attempts that failed and will be retried.
    pub retried: AtomicU64,
    /// Attempts that failed for good.
    pub failed: AtomicU64,
    /// Attempts that asked to run again later without counting ([`TaskError::snooze`](crate::TaskError::snooze)).
    pub snoozed: AtomicU64,
    /// Attempts stopped unfinished (shutdown, fencing, a cancel) whose jobs were given back:
    /// each attempt is counted once, here or in the counts above.
    pub released: AtomicU64,
    /// Outcomes the database rejected because the job was no longer this worker's at that
    /// attempt (cancelled, or rescued while this worker was cut off): stale writes, refused.
    pub rejected: AtomicU64,
    /// Checks for jobs claimed by a statement whose answer was lost (each one scans this
    /// worker's running jobs in the table): made only after a claim whose connection failed.
    pub orphan_checks: AtomicU64,
    /// Outcomes written to the database. The counts above are of outcomes written too, as
    /// the database decided them (a retryable error on the last attempt counts as failed):
    /// a job is finished for everyone else (`wait`, listings, dependants) only once its
    /// outcome is written, which the completer does in batches a moment after the task returns.
    pub written: AtomicU64,
}

/// Totals when a worker stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerReport {
    /// The worker's id in `remuda.workers`.
    pub worker_id: String,
    /// Attempts that completed.
    pub completed: u64,
    /// Attempts that failed and will be retried.
    pub retried: u64,
    /// Attempts that failed for good.
    pub failed: u64,
    /// Jobs given back unfinished at shutdown.
    pub released: u64,
    /// Stale outcomes the database rejected (see [`WorkerStats::rejected`]).
    pub rejected: u64,
}

/// The stop signals of one running job, shared (one allocation a job) by the running map, the
/// executor and whoever stops the job. Its tokens stand alone, children of nothing: a child
/// token locks its parent as it is made and dropped, and every job's did, on both runtime
/// threads at once. A stop of every job walks the running map instead (see `stop_every_job`).
#[derive(Clone)]
pub(crate) struct Running(Arc<RunStop>);

pub(crate) struct RunStop {
    /// Handed to the task as [`JobContext::cancel`](crate::JobContext::cancel).
    pub soft: CancellationToken,
    /// Handed to the task as [`JobContext::stop`](crate::JobContext::stop): why it stops.
    pub signal: crate::task::StopSignal,
    /// Aborts the attempt at once (after the grace, or when the job is surely taken over).
    pub hard: CancellationToken,
    /// Which run of the job this is (attempt and claim time, the guard of its writes): a
    /// job can be in the map under one id for a new run while an aborted old run of it
    /// (from before this worker was declared dead and registered again) is still ending.
    pub run: (i32, chrono::DateTime<chrono::Utc>),
}

impl std::ops::Deref for Running {
    type Target = RunStop;

    fn deref(&self) -> &RunStop {
        &self.0
    }
}

impl Running {
    /// The signals of a run (its attempt and claim time), none given yet.
    pub fn new(run: (i32, chrono::DateTime<chrono::Utc>)) -> Self {
        Running(Arc::new(RunStop {
            soft: CancellationToken::new(),
            signal: Default::default(),
            hard: CancellationToken::new(),
            run,
        }))
    }

    /// Asks the job to stop for `reason`; it is aborted if it has not returned after `grace`.
    pub fn stop(&self, reason: crate::task::StopReason, grace: Duration) {
        self.signal.set_reason(reason);
        self.soft.cancel();
        if grace.is_zero() {
            self.hard.cancel();
        } else {
            let hard = self.hard.clone();
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                hard.cancel();
            });
        }
    }
}

/// The metrics handles of each queue and kind a worker runs.
pub(crate) type KindMetrics = HashMap<String, HashMap<String, crate::metrics::JobMetrics>>;

struct Registered {
    task: Arc<dyn DynTask>,
    options: TaskOptions,
}

/// State shared by the producer, the executors and the notification dispatcher.
pub(crate) struct Shared {
    db: crate::db::Database,
    config: WorkerConfig,
    worker_id: Arc<str>,
    tasks: HashMap<String, Registered>,
    slots: Arc<Semaphore>,
    /// Slots the producer waits for before claiming when work is waiting.
    fill_target: usize,
    slot_freed: Notify,
    wake: Notify,
    /// Jobs this worker runs, from the claim until their outcome is queued for writing.
    running: Mutex<HashMap<i64, Running>>,
    /// Set while this worker cannot vouch for being alive (no heartbeat for too long, or
    /// declared dead): it claims nothing until a heartbeat gets through again.
    fenced: std::sync::atomic::AtomicBool,
    /// Bumped at each fencing: jobs claimed before it are not started.
    epoch: AtomicU64,
    /// The name jobs are routed by.
    name: String,
    /// Settings of this worker's queues and of the cluster, refreshed every second and on
    /// `remuda_queue` notifications (see `settings.rs`).
    settings: settings::Cache,
    /// Cancels that arrived before their job's executor was registered (a cancel can commit
    /// between the claim's commit and the claimed rows reaching this worker), each with the
    /// attempt it cancelled.
    early_cancels: Mutex<HashMap<i64, (Option<i32>, std::time::Instant)>>,
    completer: mpsc::Sender<completer::Outcome>,
    /// Set once every job was asked to stop (`stop_every_job`): a job registered after it is
    /// asked at once.
    stopping: std::sync::atomic::AtomicBool,
    max_payload: usize,
    stats: Arc<WorkerStats>,
    /// Its attempts per queue and minute, added to `remuda.queue_minutes` with each heartbeat.
    activity: Arc<activity::Activity>,
    /// Where its runs record their steps.
    steps: Arc<crate::step::Store>,
    /// Where each attempt's span goes, when spans are exported.
    spans: Option<crate::telemetry::Spans>,
}

/// The metrics handles of every queue and kind of a worker, taken once at its start.
fn job_metrics(
    metrics: &crate::metrics::Metrics,
    queues: &[String],
    kinds: &[String],
) -> HashMap<String, HashMap<String, crate::metrics::JobMetrics>> {
    queues
        .iter()
        .map(|q| {
            let per_kind = kinds
                .iter()
                .map(|k| (k.clone(), metrics.job(q, k)))
                .collect();
            (q.clone(), per_kind)
        })
        .collect()
}

/// A worker process's job runner. Build it, register tasks, then [`Worker::run`].
pub struct Worker {
    client: Client,
    config: WorkerConfig,
    tasks: HashMap<String, Registered>,
    schedules: Vec<crate::schedule::Schedule>,
    stats: Arc<WorkerStats>,
    notification_stats: Arc<crate::notify::NotificationStats>,
}

impl Worker {
    /// A worker with the default configuration.
    pub fn new(client: Client) -> Worker {
        Worker {
            client,
            config: WorkerConfig::default(),
            tasks: HashMap::new(),
            schedules: Vec::new(),
            stats: Arc::default(),
            notification_stats: Arc::default(),
        }
    }

    /// Replaces the whole configuration.
    pub fn config(mut self, config: WorkerConfig) -> Worker {
        self.config = config;
        self
    }

    /// Sets the queues to claim from.
    pub fn queues<I: IntoIterator<Item = S>, S: Into<String>>(mut self, queues: I) -> Worker {
        self.config.queues = queues.into_iter().map(Into::into).collect();
        self
    }

    /// Sets how many jobs run at once.
    pub fn concurrency(mut self, concurrency: usize) -> Worker {
        self.config.concurrency = concurrency;
        self
    }

    /// Registers a typed task under its kind.
    pub fn register<T: Task>(self, task: T) -> Worker {
        self.register_dyn(T::KIND, T::options(), Arc::new(Typed(task)))
    }

    /// Registers a task that takes and returns raw JSON (command and HTTP tasks, or any kind
    /// known only at run time).
    pub fn register_dyn(
        mut self,
        kind: impl Into<String>,
        options: TaskOptions,
        task: Arc<dyn DynTask>,
    ) -> Worker {
        self.tasks.insert(kind.into(), Registered { task, options });
        self
    }

    /// Declares a schedule when the worker starts (creating or replacing it: see
    /// [`Client::set_schedule`]). Any worker fires it, whichever declared it; a worker
    /// that does not run its kind still declares it.
    pub fn schedule(mut self, schedule: crate::schedule::Schedule) -> Worker {
        self.schedules.push(schedule);
        self
    }

    /// Live counters of this worker.
    pub fn stats(&self) -> Arc<WorkerStats> {
        self.stats.clone()
    }

    /// Live counters of this worker's notification dispatcher.
    pub fn notification_stats(&self) -> Arc<crate::notify::NotificationStats> {
        self.notification_stats.clone()
    }

    /// Runs until SIGINT or SIGTERM, then shuts down gracefully; a second SIGINT or SIGTERM
    /// during the shutdown stops the running jobs at once and releases them.
    ///
    /// The signals are listened for from the call on: one that arrives while the worker is
    /// still setting up (registering, waiting for LISTEN) shuts it down gracefully once set
    /// up, rather than killing the process with the signal's default action.
    pub async fn run_until_signal(self) -> Result<WorkerReport> {
        self.run_until_signals(ShutdownSignals::listen()).await
    }

    /// [`Worker::run_until_signal`] with signals listened for since `signals` was made: a
    /// program makes it first thing, so that a signal during its own set-up (connecting,
    /// reading its config) is a graceful shutdown too.
    pub async fn run_until_signals(self, signals: ShutdownSignals) -> Result<WorkerReport> {
        let ShutdownSignals { seen, listening } = signals;
        let shutdown = {
            let mut seen = seen.clone();
            async move {
                let _ = seen.wait_for(|n| *n >= 1).await;
            }
        };
        let force = async move {
            let mut seen = seen;
            let _ = seen.wait_for(|n| *n >= 2).await;
            tracing::warn!("remuda worker: second signal: stopping the running jobs now");
        };
        let result = self.run_with(shutdown, force).await;
        listening.abort();
        result
    }

    /// Runs until `shutdown` resolves, then shuts down gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<WorkerReport> {
        self.run_with(shutdown, std::future::pending()).await
    }

    /// Runs until `shutdown` resolves, then shuts down gracefully; if `force` resolves during
    /// the shutdown, the jobs still running are aborted at once (without their
    /// `shutdown_timeout` and `cancel_grace`) and released.
    pub async fn run_with(
        self,
        shutdown: impl Future<Output = ()>,
        force: impl Future<Output = ()>,
    ) -> Result<WorkerReport> {
        let config = self.config;
        if self.tasks.is_empty() {
            return Err(Error::InvalidInput(
                "the worker has no tasks: register at least one".into(),
            ));
        }
        config.validate()?;
        for (kind, registered) in &self.tasks {
            registered.options.validate(kind)?;
        }
        for schedule in &self.schedules {
            schedule.validate()?;
        }
        // start-up rides out a restart that begins while it runs (see `startup`)
        let mut start = startup::Start::new();
        let mut defaults: Vec<(String, Option<crate::notify::NotifyTarget>)> = self
            .tasks
            .iter()
            .map(|(kind, r)| (kind.clone(), r.options.notify.clone()))
            .collect();
        defaults.sort_by(|a, b| a.0.cmp(&b.0));
        let client = &self.client;
        start.step(|| client.check_once()).await?;
        for schedule in &self.schedules {
            start.step(|| client.set_schedule(schedule)).await?;
        }
        start
            .step(|| crate::notify::store_defaults(client.database(), &defaults))
            .await?;
        // The worker's own small pool: tasks that share the client's pool can never starve
        // the heartbeat, the claims or the completions.
        let maintenance_connections = if config.maintenance {
            maintenance::CONNECTIONS
        } else {
            0
        };
        let db = self
            .client
            .database()
            .sibling(WORKER_POOL_SIZE + maintenance_connections);
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into());
        let pid = std::process::id();
        let name = config.name.clone().unwrap_or_else(|| host.clone());
        let worker_id: Arc<str> = format!("{name}-{pid}-{:08x}", fastrand::u32(..)).into();
        let mut kinds: Vec<String> = self.tasks.keys().cloned().collect();
        kinds.sort();
        let registration = heartbeat::Registration {
            id: worker_id.to_string(),
            name,
            host,
            pid: i32::try_from(pid).unwrap_or(i32::MAX),
            queues: config.queues.clone(),
            kinds,
            concurrency: i32::try_from(config.concurrency).unwrap_or(i32::MAX),
            rescue_after_ms: i64::try_from(config.rescue_after.as_millis()).unwrap_or(i64::MAX),
            crash_loop_limit: i32::try_from(config.crash_loop_limit).unwrap_or(i32::MAX),
            capabilities: config.capabilities.clone(),
        };
        // set up before anything is registered or started: a setup that fails leaves nothing
        let dispatcher = crate::notify::dispatcher::Dispatcher::new(
            db.clone(),
            config.notifications.clone(),
            worker_id.clone(),
            self.notification_stats.clone(),
        )?;
        let can_send = !dispatcher.channels().is_empty();
        if config.notifications.enabled && !can_send {
            tracing::info!("remuda worker {worker_id}: no webhook secret and no SMTP server: this worker sends no notifications");
        }
        let dispatcher = (config.notifications.enabled && can_send).then_some(dispatcher);
        // the clock of self-fencing starts when the registration that got through was sent
        let mut registered = std::time::Instant::now();
        let installation = start
            .step(|| {
                registered = std::time::Instant::now();
                heartbeat::register(&db, &registration)
            })
            .await?;

        let background = CancellationToken::new();
        let (completer_tx, completer_rx) =
            mpsc::channel(config.concurrency.max(completer::MAX_BATCH) * 2);
        let give_up = CancellationToken::new();
        let metrics = job_metrics(self.client.metrics(), &config.queues, &registration.kinds);
        let activity = Arc::new(activity::Activity::default());
        let mut completer_task = tokio::spawn(completer::run(
            db.clone(),
            worker_id.clone(),
            completer_rx,
            give_up.clone(),
            self.stats.clone(),
            config.promote_interval,
            completer::Counts {
                activity: activity.clone(),
                metrics,
                lag: self.client.metrics().lag().clone(),
            },
        ));
        let (spans, spans_task, spans_close) = match crate::telemetry::Spans::start(
            &config.telemetry,
            installation,
            self.client.metrics().spans().clone(),
        ) {
            Some((spans, task, close)) => (Some(spans), Some(task), Some(close)),
            None => (None, None, None),
        };
        let shared = Arc::new(Shared {
            spans,
            db: db.clone(),
            fill_target: (config.concurrency / 4).clamp(1, config.claim_batch),
            config: config.clone(),
            worker_id: worker_id.clone(),
            tasks: self.tasks,
            slots: Arc::new(Semaphore::new(config.concurrency)),
            slot_freed: Notify::new(),
            wake: Notify::new(),
            running: Mutex::new(HashMap::new()),
            early_cancels: Mutex::new(HashMap::new()),
            completer: completer_tx,
            fenced: Default::default(),
            epoch: AtomicU64::new(0),
            settings: settings::Cache::default(),
            name: registration.name.clone(),
            stopping: Default::default(),
            max_payload: self.client.max_payload(),
            stats: self.stats.clone(),
            activity,
            steps: Arc::new(crate::step::Store::new(db.clone(), worker_id.clone())),
        });
        self.client
            .metrics()
            .register_collector(Box::new(gauges::WorkerGauges {
                shared: Arc::downgrade(&shared),
                notifications: self.notification_stats.clone(),
            }));
        let listener = self.client.listener();
        let events = listener.subscribe();
        // Claim only once LISTEN is in place: a job committed before is found by the first
        // claim, one committed after is announced. (If the listener cannot connect, polling
        // still finds everything.)
        if listener.polling() {
            tracing::info!(
                "remuda worker {worker_id}: behind a transaction-mode pooler without a direct address: polling every {:?} instead of listening",
                config.poll_interval
            );
        } else if !listener.ready(Duration::from_secs(5)).await {
            tracing::warn!(
                "remuda worker {worker_id}: not listening for notifications yet; polling meanwhile"
            );
        }
        settings::refresh(&shared).await;
        let failures = Arc::new(supervise::Failures::default());
        let spawn = |name: &'static str,
                     task: futures_util::future::BoxFuture<'static, ()>,
                     stop: &CancellationToken| {
            supervise::spawn(name, task, supervise::until(stop), failures.clone())
        };
        spawn(
            "settings",
            Box::pin(settings::run(shared.clone(), background.clone())),
            &background,
        );
        let mut delivery_task = None;
        if let Some(dispatcher) = dispatcher {
            delivery_task = Some(spawn(
                "notification delivery",
                Box::pin(crate::notify::dispatcher::run(
                    dispatcher,
                    listener.subscribe(),
                    background.clone(),
                )),
                &background,
            ));
        }
        spawn(
            "notification dispatch",
            Box::pin(dispatch::run(shared.clone(), events, background.clone())),
            &background,
        );
        let heartbeat_task = spawn(
            "heartbeat",
            Box::pin(heartbeat::run(
                shared.clone(),
                registration,
                registered,
                background.clone(),
            )),
            &background,
        );
        let maintenance_task = config.maintenance.then(|| {
            spawn(
                "maintenance",
                Box::pin(maintenance::run(
                    db.clone(),
                    worker_id.clone(),
                    maintenance_settings(&config, self.client.metrics().clone()),
                    background.clone(),
                    failures.clone(),
                )),
                &background,
            )
        });

        // Run until asked to stop.
        let stop_claiming = CancellationToken::new();
        let drained = CancellationToken::new();
        // the producer ends by itself when its queues are drained (exit_when_drained)
        let producer = {
            let (stop_claiming, drained) = (stop_claiming.clone(), drained.clone());
            supervise::spawn(
                "producer",
                producer::run(shared.clone(), stop_claiming.clone(), drained.clone()),
                move || !stop_claiming.is_cancelled() && !drained.is_cancelled(),
                failures.clone(),
            )
        };
        // The completer ends only when told to; ending before means it failed, and then no
        // outcome can be written: stop at once and leave the running jobs to the rescuer.
        let completer_failure = tokio::select! {
            _ = shutdown => None,
            _ = drained.cancelled() => None,
            ended = &mut completer_task => Some(match ended {
                Err(e) => e.to_string(),
                Ok(()) => "it stopped".to_string(),
            }),
            _ = failures.failed.cancelled() => None,
        };
        tracing::info!("remuda worker {worker_id}: shutting down");
        stop_claiming.cancel();
        let _ = producer.await;
        if completer_failure.is_some() {
            stop_every_job(&shared);
        }
        // a background task failed: this worker cannot vouch for its jobs any more (its
        // heartbeat may be gone): stop them now and give them back
        let background_failure = failures.reason();
        if background_failure.is_some() {
            shared.fenced.store(true, Ordering::SeqCst);
            for running in lock(&shared.running).values() {
                running.signal.set_reason(crate::task::StopReason::Fenced);
            }
            stop_every_job(&shared);
            abort_all(&shared);
        }

        // Let running jobs finish, then stop and release the rest. A background task that
        // fails meanwhile hurries the shutdown as a second signal does: without a heartbeat
        // the jobs must be gone before anyone may rescue them.
        let mut force = std::pin::pin!(async {
            tokio::select! {
                _ = force => {}
                _ = failures.failed.cancelled() => {}
            }
        });
        let mut forced = false;
        let all = u32::try_from(config.concurrency).unwrap_or(u32::MAX);
        let running_now = lock(&shared.running).len();
        if running_now > 0 {
            tracing::info!(
                "remuda worker {worker_id}: waiting up to {} for {running_now} running job{} to finish (signal again to stop at once)",
                crate::duration::format(config.shutdown_timeout),
                if running_now == 1 { "" } else { "s" }
            );
        }
        let finished = tokio::select! {
            done = tokio::time::timeout(config.shutdown_timeout, shared.slots.acquire_many(all)) => done.is_ok(),
            _ = &mut force => { forced = true; false }
        };
        if !finished {
            let still = lock(&shared.running).len();
            tracing::info!(
                "remuda worker {worker_id}: stopping the {still} jobs still running and releasing those that stop unfinished"
            );
            // said before the stop, so that a body reading it is not told otherwise later
            for running in lock(&shared.running).values() {
                running.signal.set_reason(crate::task::StopReason::Shutdown);
            }
            stop_every_job(&shared);
            if forced {
                abort_all(&shared);
            }
            // the stopped jobs queue their releases; if the completer cannot write (database
            // gone), do not wait on it forever: their rows are rescued once this worker is gone
            let stopped = tokio::select! {
                done = tokio::time::timeout(
                    config.cancel_grace + config.shutdown_timeout,
                    shared.slots.acquire_many(all),
                ) => done.is_ok(),
                _ = &mut force, if !forced => {
                    forced = true;
                    abort_all(&shared);
                    tokio::time::timeout(config.shutdown_timeout, shared.slots.acquire_many(all))
                        .await
                        .is_ok()
                }
            };
            if !stopped {
                give_up.cancel();
                let _ = shared.slots.acquire_many(all).await;
            }
        }
        if completer_failure.is_none() {
            let _ = shared.completer.send(completer::Outcome::Stop).await;
            tracing::info!("remuda worker {worker_id}: writing the last outcomes");
            // a database that is down must not hold the worker forever; a background task
            // that failed stopped the jobs, but their releases are still worth writing
            let hurry = !forced && failures.reason().is_none();
            let written = tokio::select! {
                done = tokio::time::timeout(config.shutdown_timeout, &mut completer_task) => done.is_ok(),
                _ = &mut force, if hurry => false,
            };
            if !written {
                give_up.cancel();
                let _ = completer_task.await;
            }
        }

        background.cancel();
        // a database that does not answer must not hold the worker: each last step has the
        // shutdown timeout (a worker that could not deregister is rescued like a dead one)
        let patience = config.shutdown_timeout;
        // the dispatcher writes what it sent before the worker is gone
        for mut task in [maintenance_task, delivery_task].into_iter().flatten() {
            if tokio::time::timeout(patience, &mut task).await.is_err() {
                task.abort();
            }
        }
        // a heartbeat in flight must not bring the row back after it is gone
        let mut heartbeat_task = heartbeat_task;
        if tokio::time::timeout(patience, &mut heartbeat_task)
            .await
            .is_err()
        {
            heartbeat_task.abort();
            let _ = heartbeat_task.await;
        }
        match tokio::time::timeout(patience, maintenance::resign(&db, &worker_id)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!("remuda worker {worker_id}: cannot resign leadership: {e}")
            }
            Err(_) => {
                tracing::warn!("remuda worker {worker_id}: resigning leadership got no answer")
            }
        }
        heartbeat::leave(&db, &worker_id, patience).await;
        // every attempt has ended: the last spans go out, once the worker has left (a collector
        // that does not answer holds nothing else up, and gets at most a few seconds; the
        // exporter says what it could not send by then)
        if let (Some(close), Some(mut task)) = (spans_close, spans_task) {
            let flush = patience.min(SPANS_FLUSH);
            close.send_replace(Some(tokio::time::Instant::now() + flush));
            if tokio::time::timeout(flush + SPANS_FLUSH_MARGIN, &mut task)
                .await
                .is_err()
            {
                tracing::warn!("remuda worker {worker_id}: the span exporter did not end by its deadline; stopped");
                task.abort();
            }
        }
        if let Some(reason) = completer_failure {
            return Err(Error::WorkerFailed(format!(
                "worker {worker_id}: the completer failed ({reason}); its unfinished jobs will be rescued"
            )));
        }
        if let Some(reason) = background_failure.or_else(|| failures.reason()) {
            return Err(Error::WorkerFailed(format!(
                "worker {worker_id} stopped: {reason}; its jobs were stopped and given back"
            )));
        }
        Ok(WorkerReport {
            worker_id: worker_id.to_string(),
            completed: self.stats.completed.load(Ordering::Relaxed),
            retried: self.stats.retried.load(Ordering::Relaxed),
            failed: self.stats.failed.load(Ordering::Relaxed),
            released: self.stats.released.load(Ordering::Relaxed),
            rejected: self.stats.rejected.load(Ordering::Relaxed),
        })
    }
}

/// Removes job `id` from the running set if the entry is still this run's: an old run that
/// ends late must not remove a new run's entry, which could then be neither cancelled nor
/// fenced, and which the orphan check would release while it runs.
pub(crate) fn finish_run(
    running: &Mutex<HashMap<i64, Running>>,
    id: i64,
    run: (i32, chrono::DateTime<chrono::Utc>),
) {
    let mut running = lock(running);
    if running.get(&id).is_some_and(|entry| entry.run == run) {
        running.remove(&id);
    }
}

/// Asks every running job to stop (a shutdown); each is aborted after `cancel_grace` (the
/// executor's wait). Under the lock the producer registers jobs in, so that a job registered
/// later sees `stopping` set.
fn stop_every_job(shared: &Shared) {
    let running = lock(&shared.running);
    shared.stopping.store(true, Ordering::SeqCst);
    for job in running.values() {
        job.soft.cancel();
    }
}

/// Aborts every running job now (a forced shutdown): each gives its job back.
fn abort_all(shared: &Shared) {
    for running in lock(&shared.running).values() {
        running.signal.set_reason(crate::task::StopReason::Shutdown);
        running.soft.cancel();
        running.hard.cancel();
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// What maintenance runs with, from the worker's configuration, counting into `metrics`.
fn maintenance_settings(
    c: &WorkerConfig,
    metrics: crate::metrics::Metrics,
) -> maintenance::Settings {
    maintenance::Settings {
        interval: c.maintenance_interval,
        promote_interval: c.promote_interval,
        prune_interval: c.prune_interval,
        reindex_interval: c.reindex_interval,
        retention: c.retention,
        metrics,
        rescue_rounds: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(attempt: i32, started_at: chrono::DateTime<chrono::Utc>) -> Running {
        Running::new((attempt, started_at))
    }

    #[test]
    fn a_late_old_run_leaves_the_new_runs_entry_alone() {
        let old = chrono::Utc::now();
        let new = old + chrono::Duration::seconds(5);
        let running = Mutex::new(HashMap::new());
        // the job was rescued and claimed again by this worker: its new run is registered
        lock(&running).insert(7, entry(2, new));
        // the aborted executor of the old run ends now
        finish_run(&running, 7, (1, old));
        assert!(
            lock(&running).get(&7).is_some_and(|e| e.run == (2, new)),
            "the new run can still be cancelled and fenced"
        );
        finish_run(&running, 7, (2, new));
        assert!(lock(&running).is_empty());
    }
}
