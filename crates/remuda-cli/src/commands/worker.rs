//! `remuda worker --config remuda.toml`: a worker for command, HTTP and built-in tasks.

use crate::args::{DbArgs, WorkerArgs};
use crate::config::{Config, Runner};
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::executors::{CommandTask, HttpTask, Noop};
use remuda::{DynTask, Worker, WorkerConfig};
use std::sync::Arc;

/// The worker settings a config file and the flags describe, checked: every mistake is
/// reported with the file, before anything starts.
pub fn settings(config: &Config, args: &WorkerArgs) -> CliResult<WorkerConfig> {
    let bad = |message: String| Config::error(&args.config, &message);
    if config.tasks.is_empty() {
        return Err(bad(
            "it defines no tasks: add a [tasks.<kind>] table with command, url or builtin".into(),
        ));
    }
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
        bad(format!(
            "[worker] {e}{}",
            if from_flags {
                " (with the command-line overrides)"
            } else {
                ""
            }
        ))
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

pub async fn run(db: &DbArgs, args: WorkerArgs) -> CliResult<u8> {
    let config = Config::load(&args.config)?;
    let settings = settings(&config, &args)?;
    let queues = settings.queues.clone();
    let client = connect::client(db).await?;
    let worker = build(client.clone(), &config, settings)?;
    let _metrics = match args.metrics_bind {
        Some(addr) => Some(serve_metrics(addr, client.metrics().clone()).await?),
        None => None,
    };
    eprintln!(
        "remuda worker: running {} on queues {} (Ctrl-C to stop; twice to stop at once)",
        config.tasks.keys().cloned().collect::<Vec<_>>().join(", "),
        queues.join(", ")
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
    if !args.once {
        return Ok(0);
    }
    let kinds: Vec<String> = config.tasks.keys().cloned().collect();
    match client.scheduled_count(&queues, &kinds).await {
        Ok(0) => {}
        Ok(n) => eprintln!(
            "remuda worker: {n} job{} of these queues and kinds left scheduled for later (due after the run; --once-wait waits longer for retries)",
            if n == 1 { "" } else { "s" }
        ),
        Err(e) => eprintln!("remuda worker: cannot count the jobs left scheduled: {e}"),
    }
    // a batch run that lost jobs must not look like success to the script that ran it
    Ok(if report.failed > 0 { 1 } else { 0 })
}

/// Serves the worker's metrics at `addr` until the returned task is dropped.
async fn serve_metrics(
    addr: std::net::SocketAddr,
    metrics: remuda::metrics::Metrics,
) -> CliResult<Serving> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::Usage(format!("--metrics-bind {addr}: cannot listen: {e}")))?;
    let address = listener.local_addr().unwrap_or(addr);
    eprintln!("remuda worker: metrics at http://{address}/metrics");
    let router = remuda_dashboard::metrics_router(metrics);
    Ok(Serving(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            eprintln!("remuda worker: the metrics server stopped: {e}");
        }
    })))
}

/// A server task, stopped when dropped.
struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}
