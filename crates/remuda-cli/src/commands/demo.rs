//! `remuda demo`: migrates, enqueues a realistic mix (many quick jobs, some that fail and
//! retry, some that fail for good, some delayed, some command tasks), drains it with workers
//! in this process while a progress bar runs, measures pickup latency on idle workers, and
//! prints a summary.

use crate::args::{DbArgs, DemoArgs};
use crate::connect;
use crate::error::CliResult;
use crate::executors::CommandTask;
use crate::output::print_json;
use indicatif::{ProgressBar, ProgressStyle};
use remuda::{
    Backoff, Client, JobContext, NewJob, Task, TaskError, TaskOptions, Worker, WorkerConfig,
    WorkerStats,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const FLAKY: usize = 20;
const DOOMED: usize = 5;
const DELAYED: usize = 10;
const COMMANDS: usize = 10;
const PINGS: usize = 100;
const DELAY: Duration = Duration::from_secs(2);

/// A quick job: a little arithmetic on its args.
struct Quick;
impl Task for Quick {
    const KIND: &'static str = "demo_quick";
    type Args = serde_json::Value;
    type Output = u64;
    fn options() -> TaskOptions {
        TaskOptions::default().queue("demo")
    }
    async fn run(&self, _ctx: JobContext, args: serde_json::Value) -> Result<u64, TaskError> {
        let i = args["i"].as_u64().unwrap_or(0);
        Ok(i.wrapping_mul(2_654_435_761) % 1000)
    }
}

/// Fails with FLAKY twice, then succeeds.
struct Flaky;
impl Task for Flaky {
    const KIND: &'static str = "demo_flaky";
    type Args = serde_json::Value;
    type Output = String;
    fn options() -> TaskOptions {
        TaskOptions::default()
            .queue("demo")
            .max_attempts(5)
            .backoff(Backoff::Exponential {
                base: Duration::from_millis(100),
                max: Duration::from_secs(1),
                jitter: true,
            })
    }
    async fn run(&self, ctx: JobContext, _args: serde_json::Value) -> Result<String, TaskError> {
        if ctx.attempt < 3 {
            return Err(TaskError::new(
                "FLAKY",
                format!("upstream hiccup on attempt {}", ctx.attempt),
            ));
        }
        Ok(format!("succeeded on attempt {}", ctx.attempt))
    }
}

/// Always fails; gives up after three attempts.
struct Doomed;
impl Task for Doomed {
    const KIND: &'static str = "demo_doomed";
    type Args = serde_json::Value;
    type Output = ();
    fn options() -> TaskOptions {
        TaskOptions::default()
            .queue("demo")
            .max_attempts(3)
            .backoff(Backoff::Fixed {
                delay: Duration::from_millis(100),
                jitter: false,
            })
    }
    async fn run(&self, _ctx: JobContext, _args: serde_json::Value) -> Result<(), TaskError> {
        Err(TaskError::new(
            "UPSTREAM_DOWN",
            "the upstream service refused the request",
        ))
    }
}

/// The same quick work under other kinds, to measure delays and pickup separately.
struct Delayed;
impl Task for Delayed {
    const KIND: &'static str = "demo_delayed";
    type Args = serde_json::Value;
    type Output = ();
    fn options() -> TaskOptions {
        TaskOptions::default().queue("demo")
    }
    async fn run(&self, _ctx: JobContext, _args: serde_json::Value) -> Result<(), TaskError> {
        Ok(())
    }
}

struct Ping;
impl Task for Ping {
    const KIND: &'static str = "demo_ping";
    type Args = usize;
    type Output = ();
    fn options() -> TaskOptions {
        TaskOptions::default().queue("demo")
    }
    async fn run(&self, _ctx: JobContext, _args: usize) -> Result<(), TaskError> {
        Ok(())
    }
}

fn worker(client: Client, concurrency: usize) -> Worker {
    let command = CommandTask {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "cat >/dev/null; echo '{\"resized\": true}'".into(),
        ],
        env: Vec::new(),
        workdir: None,
        max_output: remuda::client::DEFAULT_MAX_PAYLOAD,
    };
    Worker::new(client)
        .config(WorkerConfig {
            queues: vec!["demo".into(), "demo_media".into()],
            concurrency,
            promote_interval: Duration::from_millis(100),
            ..WorkerConfig::default()
        })
        .register(Quick)
        .register(Flaky)
        .register(Doomed)
        .register(Delayed)
        .register(Ping)
        .register_dyn(
            "demo_resize",
            TaskOptions::default()
                .queue("demo_media")
                .timeout(Duration::from_secs(30)),
            Arc::new(command),
        )
}

/// p50 and p99 of (started_at - created_at) in ms for first attempts of a kind.
async fn latency(client: &Client, kind: &str) -> CliResult<(f64, f64)> {
    let conn = client.database().conn().await?;
    let row = conn
        .query_one(
            "SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0)::float8,
                    coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0)::float8
             FROM (SELECT extract(epoch FROM started_at - created_at)::float8 * 1000 AS ms
                   FROM remuda.jobs WHERE kind = $1 AND queue = 'demo' AND started_at IS NOT NULL) t",
            &[&kind],
        )
        .await
        .map_err(remuda::Error::from)?;
    Ok((row.get(0), row.get(1)))
}

fn finished(stats: &[Arc<WorkerStats>]) -> u64 {
    stats
        .iter()
        .map(|s| s.completed.load(Ordering::Relaxed) + s.failed.load(Ordering::Relaxed))
        .sum()
}

/// Runs the demo in a scratch database of its own (`<database>_demo`, dropped afterwards):
/// the user's jobs are never touched.
pub async fn run(db: &DbArgs, args: DemoArgs) -> CliResult<u8> {
    let admin = connect::database(db).await?;
    let database = super::scratch::create(&admin, "demo", 16).await?;
    eprintln!(
        "remuda demo on {} (a scratch database, dropped afterwards)",
        database.target()
    );
    let outcome = demo(database, args).await;
    let dropped = super::scratch::drop(&admin, "demo").await;
    let code = outcome?;
    dropped?;
    Ok(code)
}

async fn demo(database: remuda::Database, args: DemoArgs) -> CliResult<u8> {
    let client = Client::new(database.clone());
    client.check().await?;

    // Enqueue the mix.
    let started = Instant::now();
    let quick: Vec<NewJob> = (0..args.jobs)
        .map(|i| NewJob::for_task::<Quick>(&serde_json::json!({ "i": i })))
        .collect::<Result<_, _>>()?;
    client.insert_many(&quick).await?;
    let enqueue_time = started.elapsed();
    let mut others = Vec::new();
    for i in 0..FLAKY {
        others.push(NewJob::for_task::<Flaky>(&serde_json::json!({ "i": i }))?);
    }
    for i in 0..DOOMED {
        others.push(NewJob::for_task::<Doomed>(&serde_json::json!({ "i": i }))?);
    }
    for i in 0..DELAYED {
        others.push(NewJob::for_task::<Delayed>(&serde_json::json!({ "i": i }))?.delay(DELAY));
    }
    for i in 0..COMMANDS {
        others.push(
            NewJob::new(
                "demo_resize",
                &serde_json::json!({ "image": format!("photo-{i}.jpg") }),
            )?
            .queue("demo_media"),
        );
    }
    client.insert_many(&others).await?;
    let total = (args.jobs + others.len()) as u64;

    // Drain with workers in this process, each with its own pool as separate processes would.
    let stop = CancellationToken::new();
    let mut handles = Vec::new();
    let mut stats = Vec::new();
    let drain_start = Instant::now();
    for _ in 0..args.workers.max(1) {
        let own = Client::new(database.sibling(8));
        let w = worker(own, args.concurrency);
        stats.push(w.stats());
        let token = stop.clone();
        handles.push(tokio::spawn(w.run(async move { token.cancelled().await })));
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} jobs ({per_sec})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut quick_done_at = None;
    loop {
        let done = finished(&stats);
        bar.set_position(done);
        let completed: u64 = stats
            .iter()
            .map(|s| s.completed.load(Ordering::Relaxed))
            .sum();
        if quick_done_at.is_none() && completed >= args.jobs as u64 {
            quick_done_at = Some(drain_start.elapsed());
        }
        if done >= total {
            break;
        }
        if let Some(e) = super::failed_worker(&mut handles).await {
            bar.abandon();
            stop.cancel();
            return Err(e);
        }
        if drain_start.elapsed() > Duration::from_secs(600) {
            bar.abandon();
            eprintln!("error: the demo did not finish within 10 minutes");
            stop.cancel();
            return Ok(1);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drain_time = drain_start.elapsed();
    bar.finish_and_clear();

    // Pickup latency: one job at a time into idle workers.
    for i in 0..PINGS {
        client.enqueue::<Ping>(&i).await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while finished(&stats) < total + PINGS as u64 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    let mut retried = 0;
    let mut failed = 0;
    for handle in handles {
        if let Ok(Ok(report)) = handle.await {
            retried += report.retried;
            failed += report.failed;
        }
    }
    let (bulk_p50, bulk_p99) = latency(&client, "demo_quick").await?;
    let (pick_p50, pick_p99) = latency(&client, "demo_ping").await?;
    let quick_time = quick_done_at.unwrap_or(drain_time);
    let rate = args.jobs as f64 / quick_time.as_secs_f64().max(1e-9);
    let enqueue_rate = args.jobs as f64 / enqueue_time.as_secs_f64().max(1e-9);
    if args.json {
        print_json(&serde_json::json!({
            "jobs": total,
            "workers": args.workers,
            "concurrency": args.concurrency,
            "enqueue_jobs_per_sec": enqueue_rate.round(),
            "jobs_per_sec": rate.round(),
            "drain_seconds": drain_time.as_secs_f64(),
            "retries": retried,
            "failures": failed,
            "enqueue_to_start_ms": { "p50": bulk_p50, "p99": bulk_p99 },
            "pickup_ms": { "p50": pick_p50, "p99": pick_p99 },
        }));
    } else {
        crate::out!(
            "remuda demo: {total} jobs, {} workers x {} slots",
            args.workers,
            args.concurrency
        );
        crate::out!(
            "  enqueue           {} quick jobs in {:.0} ms ({:.0} jobs/s, one statement)",
            args.jobs,
            enqueue_time.as_secs_f64() * 1000.0,
            enqueue_rate
        );
        crate::out!(
            "  throughput        {} quick jobs run in {:.2} s: {:.0} jobs/s",
            args.jobs,
            quick_time.as_secs_f64(),
            rate
        );
        crate::out!("  everything        {total} jobs final in {:.2} s (includes {DELAYED} jobs delayed by {} s)", drain_time.as_secs_f64(), DELAY.as_secs());
        crate::out!("  retries           {retried} (flaky jobs succeed on attempt 3; doomed ones use their 3 attempts)");
        crate::out!("  failures          {failed} (the {DOOMED} doomed jobs)");
        crate::out!("  command tasks     {COMMANDS} run as `sh -c` processes");
        crate::out!("  enqueue → start   p50 {bulk_p50:.1} ms, p99 {bulk_p99:.1} ms (bulk backlog, waiting their turn)");
        crate::out!("  pickup when idle  p50 {pick_p50:.2} ms, p99 {pick_p99:.2} ms ({PINGS} jobs sent one at a time)");
    }
    Ok(0)
}
