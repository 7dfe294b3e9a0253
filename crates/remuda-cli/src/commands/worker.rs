//! `remuda worker --config remuda.toml`: a worker for command, HTTP and built-in tasks.

use crate::args::{DbArgs, WorkerArgs};
use crate::config::{Config, Runner};
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::executors::{CommandTask, HttpTask, Noop};
use remuda::{DynTask, Worker, WorkerConfig};
use std::sync::Arc;

/// Builds the worker a config file describes.
pub fn build(client: remuda::Client, config: &Config, args: &WorkerArgs) -> CliResult<Worker> {
    if config.tasks.is_empty() {
        return Err(CliError::Usage(format!(
            "{} defines no tasks: add a [tasks.<kind>] table with command, url or builtin",
            args.config.display()
        )));
    }
    let w = &config.worker;
    let defaults = WorkerConfig::default();
    let max_payload = w
        .max_payload_bytes
        .unwrap_or(remuda::client::DEFAULT_MAX_PAYLOAD);
    let client = client.with_max_payload(max_payload);
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
        exit_when_drained: args.once,
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
    if settings.concurrency == 0 {
        return Err(CliError::Usage("--concurrency must be at least 1".into()));
    }
    let http = reqwest::Client::builder()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot set up the HTTP client: {e}")))?;
    let mut worker = Worker::new(client).config(settings);
    for (kind, task) in &config.tasks {
        let runner = task.runner(kind).map_err(CliError::Usage)?;
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

pub async fn run(db: &DbArgs, args: WorkerArgs) -> CliResult<u8> {
    let config = Config::load(&args.config)?;
    let client = connect::client(db).await?;
    let worker = build(client, &config, &args)?;
    eprintln!(
        "remuda worker: running {} on queues {} (Ctrl-C to stop)",
        config.tasks.keys().cloned().collect::<Vec<_>>().join(", "),
        config.queues().join(", ")
    );
    let report = worker.run_until_signal().await?;
    eprintln!(
        "remuda worker {}: stopped; {} completed, {} retried, {} failed, {} released, {} stale writes rejected",
        report.worker_id,
        report.completed,
        report.retried,
        report.failed,
        report.released,
        report.rejected
    );
    Ok(0)
}
