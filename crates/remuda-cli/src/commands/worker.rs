//! `remuda worker --config remuda.toml`: a worker for command, HTTP and built-in tasks.

use crate::args::{DbArgs, WorkerArgs};
use crate::config::Config;
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::worker_setup::{build, settings, Overrides};

pub async fn run(db: &DbArgs, args: WorkerArgs) -> CliResult<u8> {
    // from the first moment: a SIGTERM while connecting is a graceful stop, not death by it
    let signals = remuda::worker::ShutdownSignals::listen();
    let config = Config::load(&args.config)?;
    if config.tasks.is_empty() {
        return Err(Config::error(
            &args.config,
            "it defines no tasks: add a [tasks.<kind>] table with command, url or builtin",
        ));
    }
    let settings = settings(&config, Some(&args.config), &overrides(&args))?;
    let queues = settings.queues.clone();
    for warning in config.warnings(&queues) {
        eprintln!("remuda worker: warning: {warning}");
    }
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
    let report = worker.run_until_signals(signals).await?;
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

/// The flags that override the `[worker]` table.
pub fn overrides(args: &WorkerArgs) -> Overrides {
    Overrides {
        name: args.name.clone(),
        concurrency: args.concurrency,
        heartbeat_interval: args.heartbeat_interval,
        rescue_after: args.rescue_after,
        crash_loop_limit: args.crash_loop_limit,
        cancel_grace: args.cancel_grace,
        once: args.once,
        once_wait: args.once_wait,
    }
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
