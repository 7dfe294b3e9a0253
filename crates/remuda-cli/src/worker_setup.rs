//! The worker a config file describes: its settings (the `[worker]`, `[retention]` and
//! `[notifications]` tables with the command line's overrides) and its command, HTTP and
//! built-in tasks. The `remuda worker` command and the Python package's worker share it, so
//! both accept every key.

use crate::config::{Config, Runner};
use crate::error::{CliError, CliResult};
use crate::executors::{CommandTask, HttpTask, Noop};
use remuda::{DynTask, Worker, WorkerConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What the command line may override of the `[worker]` table.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--name`.
    pub name: Option<String>,
    /// `--concurrency`.
    pub concurrency: Option<usize>,
    /// `--heartbeat-interval`.
    pub heartbeat_interval: Option<Duration>,
    /// `--rescue-after`.
    pub rescue_after: Option<Duration>,
    /// `--crash-loop-limit`.
    pub crash_loop_limit: Option<u32>,
    /// `--cancel-grace`.
    pub cancel_grace: Option<Duration>,
    /// `--once`: exit when the queues are drained.
    pub once: bool,
    /// `--once-wait`: how far ahead a scheduled retry is still waited for.
    pub once_wait: Duration,
}

/// The worker settings a config file and the flags describe, checked: every mistake is
/// reported with the file, before anything starts. `path` is the file the config was read
/// from; `None` when there was none (a worker set up in code, as Python's `run_worker`
/// may be), and then a mistake names no file.
pub fn settings(config: &Config, path: Option<&Path>, args: &Overrides) -> CliResult<WorkerConfig> {
    let bad = |message: String| match path {
        Some(path) => Config::error(path, &message),
        None => CliError::Usage(format!("invalid worker settings: {message}")),
    };
    if args.name.as_deref().is_some_and(str::is_empty) {
        return Err(CliError::Usage(
            "--name is empty: give the worker a name, or leave the flag out to use [worker] name or the host name".into(),
        ));
    }
    let w = &config.worker;
    let defaults = WorkerConfig::default();
    let settings = WorkerConfig {
        name: args.name.clone().or_else(|| w.name.clone()),
        queues: config.queues(),
        concurrency: args
            .concurrency
            .or(w.concurrency)
            .unwrap_or(defaults.concurrency),
        claim_batch: w.claim_batch.unwrap_or(defaults.claim_batch),
        shutdown_timeout: w.shutdown_timeout.unwrap_or(defaults.shutdown_timeout),
        poll_interval: w.poll_interval.unwrap_or(defaults.poll_interval),
        heartbeat_interval: args
            .heartbeat_interval
            .or(w.heartbeat_interval)
            .unwrap_or(defaults.heartbeat_interval),
        rescue_after: args
            .rescue_after
            .or(w.rescue_after)
            .unwrap_or(defaults.rescue_after),
        cancel_grace: args
            .cancel_grace
            .or(w.cancel_grace)
            .unwrap_or(defaults.cancel_grace),
        crash_loop_limit: args
            .crash_loop_limit
            .or(w.crash_loop_limit)
            .unwrap_or(defaults.crash_loop_limit),
        maintenance_interval: w
            .maintenance_interval
            .unwrap_or(defaults.maintenance_interval),
        promote_interval: w.promote_interval.unwrap_or(defaults.promote_interval),
        prune_interval: w.prune_interval.unwrap_or(defaults.prune_interval),
        reindex_interval: w.reindex_interval.unwrap_or(defaults.reindex_interval),
        retention: config.retention.retention(),
        notifications: config.notifications.config().map_err(|e| bad(e.clone()))?,
        telemetry: config.telemetry.config(),
        exit_when_drained: args.once,
        drain_wait: args.once_wait,
        queue_order: w.queue_order.map_or(defaults.queue_order, Into::into),
        capabilities: w.capabilities.clone().unwrap_or_default(),
        queue_weights: w
            .queue_weights
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        ..defaults
    };
    // flags override the file: say which, so the message points at what to change
    settings.validate().map_err(|e| {
        let from_flags = args.concurrency.is_some()
            || args.heartbeat_interval.is_some()
            || args.rescue_after.is_some()
            || args.crash_loop_limit.is_some()
            || args.cancel_grace.is_some();
        bad(match path {
            Some(_) if from_flags => format!("[worker] {e} (with the command-line overrides)"),
            Some(_) => format!("[worker] {e}"),
            None => e.to_string(),
        })
    })?;
    Ok(settings)
}

/// Builds the worker a config file describes.
pub fn build(client: remuda::Client, config: &Config, settings: WorkerConfig) -> CliResult<Worker> {
    let max_payload = config
        .worker
        .max_payload_bytes
        .unwrap_or(remuda::client::DEFAULT_MAX_PAYLOAD);
    let client = client.with_max_payload(max_payload);
    let http = reqwest::Client::builder()
        .connect_timeout(crate::executors::http::CONNECT_TIMEOUT)
        .build()
        .map_err(|e| CliError::Usage(format!("cannot set up the HTTP client: {e}")))?;
    let mut worker = Worker::new(client).config(settings);
    for schedule in config.schedules().map_err(CliError::Usage)? {
        worker = worker.schedule(schedule);
    }
    for (kind, task) in &config.tasks {
        let runner = task
            .runner(kind, &config.base_dir)
            .map_err(CliError::Usage)?;
        let implementation: Arc<dyn DynTask> = match runner {
            Runner::Command { argv, env, workdir } => Arc::new(CommandTask {
                argv,
                env,
                workdir,
                max_output: max_payload,
            }),
            Runner::Http { url, headers } => Arc::new(HttpTask {
                url,
                headers,
                client: http.clone(),
                max_output: max_payload,
            }),
            Runner::Builtin(_) => Arc::new(Noop),
        };
        worker = worker.register_dyn(kind.clone(), task.options(), implementation);
    }
    Ok(worker)
}
