//! `remuda bench`: the benchmark anyone can rerun. In a scratch database on the resolved
//! server it (optionally) loads a backlog, enqueues N no-op jobs in bulk, then starts workers
//! and drains them (start-up included), then measures pickup latency by sending jobs one at a
//! time to idle workers. It reports throughput, latency percentiles, CPU seconds of this
//! process and of the PostgreSQL server (when it runs on this machine), and database size.
//! Two other modes measure maintenance: `--churn` (table size under steady load with short
//! retention: `churn.rs`) and `--schedules` (fire lateness: `schedules.rs`); `--workflow`
//! measures workflow runs against a plain drain (`workflows.rs`), `--notify` webhook deliveries
//! (`notify.rs`), `--dashboard` the pages and API lists on big tables (`dashboard.rs`);
//! `--limit key|global|rate` and `--unhandled N` measure the claims under flow control and
//! behind jobs no worker runs (`limits.rs`), `--workers N --processes` many worker processes
//! on one queue (`processes.rs`), `--steps K` jobs that record durable steps (`steps.rs`).

mod churn;
mod dashboard;
pub mod limits;
mod notify;
mod processes;
mod schedules;
mod steps;
pub mod workflows;

use crate::args::{BenchArgs, DbArgs};
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::executors::Noop;
use crate::output::print_json;
use remuda::{Client, Database, NewJob, TaskOptions, Worker, WorkerConfig, WorkerStats};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The kind every bench job has.
const KIND: &str = "bench_noop";

/// CPU seconds used by this process so far, and its peak resident memory in MiB.
fn own_usage() -> (f64, f64) {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (
                secs(u.user_time()) + secs(u.system_time()),
                u.max_rss() as f64 / 1024.0,
            )
        }
        Err(_) => (0.0, 0.0),
    }
}

/// Resident memory of this process now, in MiB.
fn current_rss() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<f64>().ok())
        })
        .unwrap_or(0.0);
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as f64;
    pages * page / 1048576.0
}

/// CPU seconds used by every `postgres` process on this machine (backends that exit in
/// between are missed, so keep connections open across a measurement).
fn postgres_cpu() -> f64 {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((name, rest)) = stat.split_once(") ") else {
            continue;
        };
        if !name.ends_with("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // after "pid (comm) ": state is field 3, utime 14 and stime 15 (1-based)
        let get = |i: usize| {
            fields
                .get(i - 3)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        total += get(14) + get(15);
    }
    total as f64 / ticks
}

async fn load_backlog(db: &Database, n: usize) -> CliResult<()> {
    let conn = db.conn().await?;
    let n = n as i64;
    conn.execute(
        "INSERT INTO remuda.jobs (state, kind, run_at, args)
         SELECT 'scheduled', 'backlog', now() + interval '365 days', jsonb_build_object('i', i)
         FROM generate_series(1, $1::bigint) i",
        &[&n],
    )
    .await
    .map_err(remuda::Error::from)?;
    conn.execute(
        "INSERT INTO remuda.jobs (state, kind, attempt, max_attempts, started_at, finished_at, args, result)
         SELECT 'completed', 'backlog', 1, 1, now(), now(), jsonb_build_object('i', i), jsonb_build_object('ok', i)
         FROM generate_series(1, $1::bigint) i",
        &[&n],
    )
    .await
    .map_err(remuda::Error::from)?;
    conn.batch_execute("VACUUM ANALYZE remuda.jobs")
        .await
        .map_err(remuda::Error::from)?;
    Ok(())
}

/// Waits for the bench's workers (already told to stop); the first error, if any.
async fn join_workers(
    handles: Vec<tokio::task::JoinHandle<remuda::Result<remuda::WorkerReport>>>,
) -> CliResult<()> {
    for handle in handles {
        match handle.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(e) => return Err(CliError::Usage(format!("a bench worker crashed: {e}"))),
        }
    }
    Ok(())
}

/// A rate of N per period as whole jobs per second (at least 1).
fn per_second((n, period): (i32, Duration)) -> u32 {
    (f64::from(n) / period.as_secs_f64().max(0.001))
        .round()
        .max(1.0) as u32
}

/// The `p` quantile of sorted values (0 when there are none).
fn percentile_of(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Jobs whose outcome is written: a job counts as drained once the database says so, not
/// when its task returned (counting returns left the last batches' writes, ~0.3 s of a
/// 100 000-job drain, out of the drain time).
fn done(stats: &[Arc<WorkerStats>]) -> u64 {
    stats
        .iter()
        .map(|s| s.written.load(Ordering::Relaxed))
        .sum()
}

pub async fn run(db_args: &DbArgs, args: BenchArgs) -> CliResult<u8> {
    if args.jobs == 0 || args.workers == 0 || args.concurrency == 0 || args.queues == 0 {
        return Err(CliError::Usage(
            "--jobs, --workers, --concurrency and --queues must be at least 1".into(),
        ));
    }
    let admin = connect::database(db_args).await?;
    let db = super::scratch::create(&admin, "bench", 16).await?;
    if args.churn.is_some()
        || args.schedules.is_some()
        || args.workflow.is_some()
        || args.notify.is_some()
        || args.dashboard
        || args.limit.is_some()
        || args.unhandled.is_some()
        || args.processes
        || args.steps.is_some()
    {
        let measured = if args.limit.is_some() || args.unhandled.is_some() {
            let bench = limits::LimitBench {
                limit: args.limit,
                jobs: args.jobs,
                concurrency: args.concurrency,
                keys: args.keys,
                key_limit: args.key_limit,
                groups: args.groups,
                max_running: args.max_running,
                rate: args.rate,
                window: args.duration.unwrap_or(limits::RATE_WINDOW),
                unhandled: args.unhandled.unwrap_or(0),
                json: args.json,
            };
            limits::run(db.clone(), bench).await
        } else if args.processes {
            processes::run(db.clone(), &args).await
        } else if args.dashboard {
            dashboard::run(db.clone(), args.jobs, args.json).await
        } else if let Some(shape) = args.workflow {
            workflows::run(db.clone(), shape, args.nodes, args.json).await
        } else if let Some(n) = args.notify {
            notify::run(db.clone(), n, args.json).await
        } else if let Some(k) = args.steps {
            steps::run(db.clone(), args.jobs, k, args.json).await
        } else if let Some(duration) = args.churn {
            let churn = churn::Churn {
                duration,
                retain: args.retain,
                rate: per_second(args.rate),
                json: args.json,
            };
            churn::run(db.clone(), churn).await
        } else {
            let n = args.schedules.unwrap_or(1000);
            let duration = args.duration.unwrap_or(Duration::from_secs(300));
            schedules::run(db.clone(), n, duration, args.json).await
        };
        if !args.keep {
            drop(db);
            super::scratch::drop(&admin, "bench").await?;
        }
        return measured.map(|_| 0);
    }
    let client = Client::new(db.clone());
    if args.backlog > 0 {
        eprintln!(
            "loading a backlog of {} scheduled and {} completed jobs…",
            args.backlog, args.backlog
        );
        load_backlog(&db, args.backlog).await?;
    }
    let queues: Vec<String> = (0..args.queues).map(|q| format!("bench_{q}")).collect();
    let padding = "x".repeat(args.payload_bytes);
    let jobs: Vec<NewJob> = (0..args.jobs)
        .map(|i| {
            let args_json = if padding.is_empty() {
                format!("{{\"i\":{i}}}")
            } else {
                format!("{{\"i\":{i},\"p\":\"{padding}\"}}")
            };
            NewJob::from_json(KIND, remuda::Jsonb(args_json))
                .queue(queues[i % queues.len()].clone())
        })
        .collect();

    // Enqueue.
    let started = Instant::now();
    client.insert_bulk(&jobs).await?;
    let enqueue_secs = started.elapsed().as_secs_f64();
    drop(jobs);

    // Drain, worker start-up included.
    let rss_before = current_rss();
    let (cpu_before, _) = own_usage();
    let pg_before = postgres_cpu();
    let stop = CancellationToken::new();
    let mut stats = Vec::new();
    let mut handles = Vec::new();
    let drain_start = Instant::now();
    for _ in 0..args.workers {
        let own = Client::new(db.sibling(8));
        let worker = Worker::new(own)
            .config(WorkerConfig {
                queues: queues.clone(),
                concurrency: args.concurrency,
                claim_batch: args.claim_batch,
                ..WorkerConfig::default()
            })
            .register_dyn(KIND, TaskOptions::default(), Arc::new(Noop));
        stats.push(worker.stats());
        let token = stop.clone();
        handles.push(tokio::spawn(
            worker.run(async move { token.cancelled().await }),
        ));
    }
    let target = args.jobs as u64;
    while done(&stats) < target {
        if let Some(e) = super::failed_worker(&mut handles).await {
            stop.cancel();
            return Err(e);
        }
        if drain_start.elapsed() > Duration::from_secs(3600) {
            return Err(CliError::Usage(
                "the drain did not finish within an hour".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let drain_secs = drain_start.elapsed().as_secs_f64();
    let rss_after = current_rss();
    let (cpu_after, _) = own_usage();
    let pg_after = postgres_cpu();

    // Pickup latency: one job at a time into idle workers.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..args.pickup {
        let job = NewJob::from_json(KIND, remuda::Jsonb(format!("{{\"pickup\":{i}}}")))
            .queue(queues[0].clone());
        client.insert(job).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pickup_start = Instant::now();
    while done(&stats) < target + args.pickup as u64 {
        if let Some(e) = super::failed_worker(&mut handles).await {
            stop.cancel();
            return Err(e);
        }
        if pickup_start.elapsed() > Duration::from_secs(600) {
            stop.cancel();
            return Err(CliError::Usage(
                "the pickup jobs did not finish within 10 minutes".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.cancel();
    join_workers(handles).await?;
    let conn = db.conn().await?;
    let rows = conn
        .query(
            "SELECT extract(epoch FROM started_at - created_at)::float8 * 1000
             FROM remuda.jobs WHERE args ? 'pickup' ORDER BY 1",
            &[],
        )
        .await
        .map_err(remuda::Error::from)?;
    let pickups: Vec<f64> = rows.iter().map(|r| r.get::<_, f64>(0)).collect();
    let size: i64 = conn
        .query_one("SELECT pg_database_size(current_database())", &[])
        .await
        .map_err(remuda::Error::from)?
        .get(0);
    drop(conn);
    let (_, max_rss) = own_usage();
    if !args.keep {
        drop(client);
        drop(db);
        super::scratch::drop(&admin, "bench").await?;
    }

    let n = args.jobs as f64;
    let report = serde_json::json!({
        "jobs": args.jobs,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "claim_batch": args.claim_batch,
        "queues": args.queues,
        "payload_bytes": args.payload_bytes,
        "backlog": args.backlog,
        "enqueue_seconds": enqueue_secs,
        "enqueue_jobs_per_sec": (n / enqueue_secs).round(),
        "drain_seconds": drain_secs,
        "drain_jobs_per_sec": (n / drain_secs).round(),
        "pickup_ms": {
            "p50": percentile_of(&pickups, 0.50),
            "p95": percentile_of(&pickups, 0.95),
            "p99": percentile_of(&pickups, 0.99),
            "samples": pickups.len(),
        },
        "cpu_seconds": { "worker": cpu_after - cpu_before, "postgres": pg_after - pg_before },
        "rss_mib": { "before_drain": rss_before, "after_drain": rss_after, "peak": max_rss },
        "database_bytes": size,
    });
    if args.json {
        print_json(&report);
    } else {
        crate::out!("remuda bench: {} no-op jobs, {} worker(s) x {} slots, claim batch {}, {} queue(s), backlog {}",
            args.jobs, args.workers, args.concurrency, args.claim_batch, args.queues, args.backlog);
        crate::out!(
            "  enqueue (COPY)     {:>10.0} jobs/s   ({:.3} s)",
            n / enqueue_secs,
            enqueue_secs
        );
        crate::out!(
            "  drain              {:>10.0} jobs/s   ({:.3} s, worker start-up included)",
            n / drain_secs,
            drain_secs
        );
        crate::out!(
            "  pickup latency     p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms ({} jobs, one at a time)",
            percentile_of(&pickups, 0.5), percentile_of(&pickups, 0.95), percentile_of(&pickups, 0.99), pickups.len()
        );
        crate::out!(
            "  CPU during drain   worker {:.2} s, postgres {:.2} s",
            cpu_after - cpu_before,
            pg_after - pg_before
        );
        crate::out!(
            "  memory (RSS)       {rss_before:.0} MiB before the drain, {rss_after:.0} MiB after (peak {max_rss:.0} MiB, enqueue included)"
        );
        crate::out!("  database size      {:.1} MiB", size as f64 / 1048576.0);
    }
    Ok(0)
}
