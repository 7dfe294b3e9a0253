//! How a worker runs: every setting with its default, checked before anything starts.

use crate::{Error, Result};
use std::collections::HashMap;
use std::time::Duration;

/// Largest `concurrency` and `claim_batch` accepted.
pub const MAX_CONCURRENCY: usize = 100_000;

/// How a worker runs. Every field has a default suited to production.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Name shown in `remuda workers` (default: the host name); jobs routed to a worker by
    /// name (`NewJob::target_worker`) run only on workers with this name.
    pub name: Option<String>,
    /// What this worker can do: jobs that `require` capabilities run only on workers that
    /// have them all.
    pub capabilities: Vec<String>,
    /// Queues to claim from, in order of preference when slots are scarce.
    pub queues: Vec<String>,
    /// Jobs run at once, at most.
    pub concurrency: usize,
    /// Most jobs claimed by one statement.
    pub claim_batch: usize,
    /// Time running jobs get to finish at shutdown before they are stopped and released.
    pub shutdown_timeout: Duration,
    /// How often to look for jobs when no notification came.
    pub poll_interval: Duration,
    /// How often the worker says it is alive.
    pub heartbeat_interval: Duration,
    /// A worker silent for this long is presumed dead and its running jobs are rescued.
    /// A worker that cannot heartbeat stops its own jobs one `heartbeat_interval` before
    /// that (self-fencing), so they never run twice at once.
    pub rescue_after: Duration,
    /// Time a stopped job (cancelled, shutdown, fenced) gets to return after its
    /// [`JobContext::cancel`](crate::JobContext::cancel) token fires, before it is aborted.
    pub cancel_grace: Duration,
    /// Attempts in a row that may end with their worker lost (`WORKER_LOST`) before the job
    /// is failed with `CRASH_LOOP` instead of being handed to yet another worker.
    pub crash_loop_limit: u32,
    /// How often the leader rescues, expires and prunes (and renews its lease).
    pub maintenance_interval: Duration,
    /// Longest the leader waits between promotions of due scheduled jobs (and between
    /// looks for due schedules).
    pub promote_interval: Duration,
    /// How often the leader deletes finished jobs past their retention, and idle rate
    /// buckets.
    pub prune_interval: Duration,
    /// How often the leader looks for bloated job-table indexes to rebuild (and for what an
    /// interrupted rebuild left).
    pub reindex_interval: Duration,
    /// How long finished jobs are kept, per final state (a queue's own settings win).
    pub retention: crate::maintenance::Retention,
    /// Whether this worker may be elected to run maintenance.
    pub maintenance: bool,
    /// How the queues share the free slots: in the order given (`Strict`: a later queue gets
    /// only what the earlier ones leave) or taking turns (`RoundRobin`, the default).
    pub queue_order: QueueOrder,
    /// Weights of the queues in round robin (default 1 each): a queue of weight 3 starts three
    /// claim rounds for every one of a queue of weight 1.
    pub queue_weights: HashMap<String, u32>,
    /// Stop (gracefully) once its queues have no runnable job and nothing is running, like
    /// graphile-worker's `--once`: for batch runs and scripts. Retries falling due within
    /// `drain_wait` are waited for; jobs due later are left scheduled.
    pub exit_when_drained: bool,
    /// With `exit_when_drained`: how far ahead a scheduled retry (a job tried before) is still
    /// waited for, so that a job failing once with a short backoff finishes within the run.
    pub drain_wait: Duration,
    /// How this worker delivers completion notifications (its dispatcher).
    pub notifications: crate::notify::NotificationConfig,
    /// Where it exports the spans of its attempts (OTLP; off without an endpoint here or in
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub telemetry: crate::telemetry::TelemetryConfig,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            name: None,
            capabilities: Vec::new(),
            queues: vec!["default".into()],
            concurrency: 32,
            claim_batch: 1000,
            shutdown_timeout: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(5),
            rescue_after: Duration::from_secs(30),
            cancel_grace: Duration::from_secs(10),
            crash_loop_limit: 3,
            maintenance_interval: Duration::from_secs(5),
            promote_interval: Duration::from_secs(1),
            prune_interval: Duration::from_secs(60),
            reindex_interval: Duration::from_secs(3600),
            retention: crate::maintenance::Retention::default(),
            maintenance: true,
            queue_order: QueueOrder::RoundRobin,
            queue_weights: HashMap::new(),
            exit_when_drained: false,
            drain_wait: Duration::from_secs(60),
            notifications: crate::notify::NotificationConfig::default(),
            telemetry: crate::telemetry::TelemetryConfig::default(),
        }
    }
}

impl WorkerConfig {
    /// Checks the configuration as [`Worker::run`](crate::Worker::run) does before it starts anything, so a
    /// program can report a bad setting before it prints that it is running.
    pub fn validate(&self) -> Result<()> {
        let config = self;
        if config.queues.is_empty() {
            return Err(Error::InvalidInput(
                "queues is empty: the worker needs at least one queue to claim from".into(),
            ));
        }
        for queue in &config.queues {
            crate::names::check_name("queue", queue)?;
        }
        if let Some(name) = &config.name {
            crate::names::check_name("worker", name)?;
        }
        for (name, value) in [
            ("concurrency", config.concurrency),
            ("claim_batch", config.claim_batch),
        ] {
            if !(1..=MAX_CONCURRENCY).contains(&value) {
                return Err(Error::InvalidInput(format!(
                    "{name} is {value}: it must be between 1 and {MAX_CONCURRENCY}"
                )));
            }
        }
        for (name, value) in [
            ("rescue_after", config.rescue_after),
            ("cancel_grace", config.cancel_grace),
            ("shutdown_timeout", config.shutdown_timeout),
        ] {
            if value > crate::duration::MAX {
                return Err(Error::InvalidInput(format!(
                    "{name} must be at most 100 years"
                )));
            }
        }
        for (name, value) in [
            ("heartbeat_interval", config.heartbeat_interval),
            ("poll_interval", config.poll_interval),
            ("maintenance_interval", config.maintenance_interval),
            ("promote_interval", config.promote_interval),
            ("prune_interval", config.prune_interval),
            ("reindex_interval", config.reindex_interval),
        ] {
            if value.is_zero() || value > crate::duration::MAX {
                return Err(Error::InvalidInput(format!(
                    "{name} must be more than 0 and at most 100 years"
                )));
            }
        }
        if config.heartbeat_interval * 2 > config.rescue_after {
            return Err(Error::InvalidInput(format!(
                "heartbeat_interval ({}) must be at most half of rescue_after ({}), or live workers would be taken for dead",
                crate::duration::format(config.heartbeat_interval),
                crate::duration::format(config.rescue_after)
            )));
        }
        if let Some((queue, weight)) = config
            .queue_weights
            .iter()
            .find(|(_, w)| !(1..=1000).contains(*w))
        {
            return Err(Error::InvalidInput(format!(
                "the weight of queue {queue} is {weight}: weights are 1 to 1000"
            )));
        }
        if let Some(queue) = config
            .queue_weights
            .keys()
            .find(|q| !config.queues.contains(q))
        {
            return Err(Error::InvalidInput(format!(
                "queue_weights names queue {queue:?}, which this worker does not serve (its queues: {})",
                config.queues.join(", ")
            )));
        }
        if config.queue_order == QueueOrder::Strict && !config.queue_weights.is_empty() {
            return Err(Error::InvalidInput(
                "queue_weights apply to round robin only: with queue_order = \"strict\" the first queue always goes first; remove the weights or use round_robin".into(),
            ));
        }
        config.retention.validate()?;
        config.notifications.validate()?;
        if config.crash_loop_limit == 0 {
            return Err(Error::InvalidInput(
                "crash_loop_limit must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// How a worker serving several queues shares its free slots among them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueOrder {
    /// Each claim round starts with the next queue in turn, so every queue gets its share.
    #[default]
    RoundRobin,
    /// Each claim round starts with the first queue: a later queue runs only what the
    /// earlier ones leave room for (horsies' CUSTOM priority mode).
    Strict,
}
