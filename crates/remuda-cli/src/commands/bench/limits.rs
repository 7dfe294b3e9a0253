//! `remuda bench --limit key|global|rate|fair`: a flow-controlled queue drained by one worker,
//! beside a plain queue of as many jobs drained the same way in the same run, and
//! `--unhandled N`: a plain drain behind N jobs of a kind no worker runs at the head of the
//! queue. Each reports `drain_jobs_per_sec` and `plain_drain_jobs_per_sec`, plus what its
//! limit promises:
//! * `key` (`--keys`, `--key-limit`): every job has one of the keys; per-key fairness is
//!   each key's mean wait (claim time − enqueue time) against the median key's;
//! * `global` (`--max-running`): the queue's cap, with the running jobs counted every 25
//!   ms during the drain (`max_running_seen`);
//! * `rate` (`--rate N/PERIOD`): enough jobs for 30 s at the rate; the achieved rate over the
//!   30 s after the first period (the bucket starts full), and the largest burst above the
//!   steady rate in any window (the bucket bounds it);
//! * `fair` (`--groups`): fair share between groups weighted 1, 2, 3 in turn, each with jobs
//!   in proportion to its weight; `share_error` is the largest relative gap between a
//!   group's starts and its weight's share of them, counted while every group had jobs
//!   waiting (until the first group's last start).

use super::{percentile_of, KIND};
use crate::error::{CliError, CliResult};
use crate::executors::Noop;
use crate::output::print_json;
use remuda::{Client, Database, NewJob, QueueChange, TaskOptions, Worker, WorkerConfig};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Which limit the bench puts on its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Limit {
    /// `key_limit` per concurrency key, the jobs spread over `--keys` keys.
    Key,
    /// `max_running` for the queue across every worker.
    Global,
    /// A token bucket of `--rate` starts per period.
    Rate,
    /// Fair share between `--groups` groups by weight.
    Fair,
}

/// What the limits bench runs.
pub struct LimitBench {
    /// The limit (None: the unhandled-kind bench).
    pub limit: Option<Limit>,
    /// Jobs per drain (the rate bench takes enough for 30 s instead).
    pub jobs: usize,
    /// Concurrency of the worker.
    pub concurrency: usize,
    /// With `key`: how many keys, and the running jobs allowed per key.
    pub keys: usize,
    /// See `keys`.
    pub key_limit: i32,
    /// With `fair`: how many groups.
    pub groups: usize,
    /// With `global`: the cap.
    pub max_running: i32,
    /// With `rate`: starts per period.
    pub rate: (i32, Duration),
    /// With `rate`: how long the achieved rate is measured.
    pub window: Duration,
    /// Jobs of a kind no worker runs, at the head of the queue (the unhandled bench).
    pub unhandled: usize,
    /// Print JSON.
    pub json: bool,
}

/// How long the rate bench measures by default.
pub const RATE_WINDOW: Duration = Duration::from_secs(30);

/// Runs the bench and prints its report.
pub async fn run(db: Database, bench: LimitBench) -> CliResult<Value> {
    let jobs = match bench.limit {
        Some(Limit::Rate) => rate_jobs(bench.rate, bench.window),
        _ => bench.jobs,
    };
    let plain = jobs as f64 / drain(&db, &bench, "bench_plain", jobs, None).await?;
    let report = match bench.limit {
        Some(Limit::Key) => key_bench(&db, &bench, jobs, plain).await?,
        Some(Limit::Global) => global_bench(&db, &bench, jobs, plain).await?,
        Some(Limit::Rate) => rate_bench(&db, &bench, jobs, plain).await?,
        Some(Limit::Fair) => fair_bench(&db, &bench, jobs, plain).await?,
        None => unhandled_bench(&db, &bench, jobs, plain).await?,
    };
    if bench.json {
        print_json(&report);
    } else {
        crate::out!("remuda bench: {}", report_line(&report));
        crate::out!(
            "  plain queue        {:>10.0} jobs/s",
            report["plain_drain_jobs_per_sec"].as_f64().unwrap_or(0.0)
        );
        crate::out!(
            "  this queue         {:>10.0} jobs/s   ({:.2} of plain)",
            report["drain_jobs_per_sec"].as_f64().unwrap_or(0.0),
            report["ratio"].as_f64().unwrap_or(0.0)
        );
        for (name, value) in report.as_object().into_iter().flatten() {
            if !matches!(
                name.as_str(),
                "limit" | "plain_drain_jobs_per_sec" | "drain_jobs_per_sec" | "ratio" | "jobs"
            ) {
                crate::out!("  {name:<18} {value}");
            }
        }
    }
    Ok(report)
}

fn report_line(report: &Value) -> String {
    format!(
        "{} jobs, limit {}",
        report["jobs"],
        report["limit"].as_str().unwrap_or("none")
    )
}

/// Enough jobs for the rate window and the first period's burst.
fn rate_jobs((n, period): (i32, Duration), window: Duration) -> usize {
    let per_sec = f64::from(n) / period.as_secs_f64().max(0.001);
    (per_sec * (window.as_secs_f64() + 2.0 * period.as_secs_f64().max(1.0))).ceil() as usize
        + n.max(0) as usize
}

fn ratio(drain: f64, plain: f64) -> f64 {
    if plain > 0.0 {
        (drain / plain * 100.0).round() / 100.0
    } else {
        0.0
    }
}

async fn key_bench(db: &Database, bench: &LimitBench, jobs: usize, plain: f64) -> CliResult<Value> {
    if bench.keys == 0 || bench.key_limit < 1 {
        return Err(CliError::Usage(
            "--keys and --key-limit must be at least 1".into(),
        ));
    }
    let queue = "bench_keyed";
    limit_queue(
        db,
        queue,
        QueueChange {
            key_limit: Some(Some(bench.key_limit)),
            ..QueueChange::default()
        },
    )
    .await?;
    let keys = bench.keys;
    let secs = drain(
        db,
        bench,
        queue,
        jobs,
        Some(&|i, job: NewJob| job.concurrency_key(format!("k{}", i % keys))),
    )
    .await?;
    let conn = db.conn().await?;
    let rows = conn
        .query(
            "SELECT avg(extract(epoch FROM started_at - created_at))::float8 * 1000
             FROM remuda.jobs WHERE queue = $1 GROUP BY concurrency_key ORDER BY 1",
            &[&queue],
        )
        .await
        .map_err(remuda::Error::from)?;
    let waits: Vec<f64> = rows.iter().map(|r| r.get::<_, f64>(0)).collect();
    let median = percentile_of(&waits, 0.5);
    let worst = waits.last().copied().unwrap_or(0.0);
    let drain = jobs as f64 / secs;
    Ok(json!({
        "limit": "key",
        "jobs": jobs,
        "keys": keys,
        "key_limit": bench.key_limit,
        "drain_jobs_per_sec": drain.round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio": ratio(drain, plain),
        "key_wait_ms": {
            "median_key": median,
            "worst_key": worst,
            "best_key": waits.first().copied().unwrap_or(0.0),
            "worst_over_median": if median > 0.0 { worst / median } else { 0.0 },
        },
    }))
}

/// A group's weight in the fair bench: 1, 2, 3 in turn.
fn group_weight(group: usize) -> usize {
    1 + group % 3
}

async fn fair_bench(
    db: &Database,
    bench: &LimitBench,
    jobs: usize,
    plain: f64,
) -> CliResult<Value> {
    if bench.groups == 0 || jobs < bench.groups * 6 {
        return Err(CliError::Usage(
            "--limit fair needs --groups of at least 1 and at least 6 jobs per group".into(),
        ));
    }
    let queue = "bench_fair";
    limit_queue(
        db,
        queue,
        QueueChange {
            fairness: Some(remuda::Fairness::Group),
            ..QueueChange::default()
        },
    )
    .await?;
    let client = Client::new(db.clone());
    for g in 0..bench.groups {
        client
            .set_group_weight(queue, Some(&format!("g{g}")), group_weight(g) as f64)
            .await?;
    }
    // job i belongs to the group that owns slot i of a round in which group g has weight(g)
    // slots: each group's jobs in proportion to its weight
    let round: Vec<usize> = (0..bench.groups)
        .flat_map(|g| std::iter::repeat_n(g, group_weight(g)))
        .collect();
    let secs = drain(
        db,
        bench,
        queue,
        jobs,
        Some(&|i, job: NewJob| job.group(format!("g{}", round[i % round.len()]))),
    )
    .await?;
    let conn = db.conn().await?;
    // starts per group before the first group's last start (all had jobs waiting till then)
    let rows = conn
        .query(
            "WITH last AS (SELECT min(m) AS cutoff FROM (SELECT max(started_at) AS m FROM remuda.jobs
                                                        WHERE queue = $1 GROUP BY group_key) g)
             SELECT j.group_key, count(*) FILTER (WHERE j.started_at < last.cutoff)
             FROM remuda.jobs j, last WHERE j.queue = $1 GROUP BY j.group_key",
            &[&queue],
        )
        .await
        .map_err(remuda::Error::from)?;
    let total_weight: usize = (0..bench.groups).map(group_weight).sum();
    let starts: i64 = rows.iter().map(|r| r.get::<_, i64>(1)).sum();
    let mut error: f64 = 0.0;
    for row in &rows {
        let group: String = row.get(0);
        let g: usize = group.trim_start_matches('g').parse().unwrap_or(0);
        let expected = starts as f64 * group_weight(g) as f64 / total_weight as f64;
        if expected > 0.0 {
            error = error.max((row.get::<_, i64>(1) as f64 - expected).abs() / expected);
        }
    }
    let drain = jobs as f64 / secs;
    Ok(json!({
        "limit": "fair",
        "jobs": jobs,
        "groups": bench.groups,
        "weights": "1, 2, 3 in turn",
        "starts_compared": starts,
        "share_error": (error * 1000.0).round() / 1000.0,
        "drain_jobs_per_sec": drain.round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio": ratio(drain, plain),
    }))
}

async fn global_bench(
    db: &Database,
    bench: &LimitBench,
    jobs: usize,
    plain: f64,
) -> CliResult<Value> {
    let queue = "bench_capped";
    limit_queue(
        db,
        queue,
        QueueChange {
            max_running: Some(Some(bench.max_running)),
            ..QueueChange::default()
        },
    )
    .await?;
    let seen = Arc::new(AtomicI64::new(0));
    let samples = Arc::new(AtomicI64::new(0));
    let stop = CancellationToken::new();
    let sampler = tokio::spawn(sample_running(
        db.clone(),
        queue,
        seen.clone(),
        samples.clone(),
        stop.clone(),
    ));
    let secs = drain(db, bench, queue, jobs, None).await;
    stop.cancel();
    let sampled = sampler
        .await
        .map_err(|e| CliError::Usage(format!("the sampler crashed: {e}")))?;
    let secs = secs?;
    sampled?;
    let drain = jobs as f64 / secs;
    let max_seen = seen.load(Ordering::Relaxed);
    Ok(json!({
        "limit": "global",
        "jobs": jobs,
        "max_running": bench.max_running,
        "max_running_seen": max_seen,
        "samples": samples.load(Ordering::Relaxed),
        "cap_exceeded": max_seen > i64::from(bench.max_running),
        "drain_jobs_per_sec": drain.round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio": ratio(drain, plain),
    }))
}

/// Counts the queue's running jobs every 25 ms until `stop`, keeping the largest.
async fn sample_running(
    db: Database,
    queue: &'static str,
    seen: Arc<AtomicI64>,
    samples: Arc<AtomicI64>,
    stop: CancellationToken,
) -> CliResult<()> {
    let mut conn = db.conn().await?;
    while !stop.is_cancelled() {
        // every job of the queue is counted (claimed under its cap): read from
        // jobs_counted_running_idx, never a scan of the live jobs. The statement is planned
        // once, when the queue may still be empty (statistics of an empty table): without
        // the setting that plan was a sequential scan, 11 ms of every 25 beside the drain
        let tx = conn.transaction().await.map_err(remuda::Error::from)?;
        tx.batch_execute("SET LOCAL enable_seqscan = off")
            .await
            .map_err(remuda::Error::from)?;
        let running: i64 = tx
            .query_one(
                "SELECT count(*) FROM remuda.jobs_live WHERE state = 'running' AND counted AND queue = $1",
                &[&queue],
            )
            .await
            .map_err(remuda::Error::from)?
            .get(0);
        tx.commit().await.map_err(remuda::Error::from)?;
        seen.fetch_max(running, Ordering::Relaxed);
        samples.fetch_add(1, Ordering::Relaxed);
        // (every 5 ms, its count took a third of a core from the drain it watched)
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}

async fn rate_bench(
    db: &Database,
    bench: &LimitBench,
    jobs: usize,
    plain: f64,
) -> CliResult<Value> {
    let queue = "bench_rated";
    let (n, period) = bench.rate;
    limit_queue(
        db,
        queue,
        QueueChange {
            rate: Some(Some(bench.rate)),
            ..QueueChange::default()
        },
    )
    .await?;
    let secs = drain(db, bench, queue, jobs, None).await?;
    let conn = db.conn().await?;
    let rows = conn
        .query(
            "SELECT extract(epoch FROM started_at - min(started_at) OVER ())::float8
             FROM remuda.jobs WHERE queue = $1 ORDER BY started_at",
            &[&queue],
        )
        .await
        .map_err(remuda::Error::from)?;
    let starts: Vec<f64> = rows.iter().map(|r| r.get::<_, f64>(0)).collect();
    let per_sec = f64::from(n) / period.as_secs_f64();
    let from = period.as_secs_f64();
    let to = from + bench.window.as_secs_f64();
    let in_window = starts.iter().filter(|&&t| t >= from && t < to).count();
    let achieved = in_window as f64 / bench.window.as_secs_f64();
    Ok(json!({
        "limit": "rate",
        "jobs": jobs,
        "rate": format!("{n}/{}", remuda::duration::format(period)),
        "window_seconds": bench.window.as_secs_f64(),
        "configured_rate_per_sec": per_sec,
        "achieved_rate_per_sec": (achieved * 10.0).round() / 10.0,
        "achieved_over_configured": if per_sec > 0.0 { achieved / per_sec } else { 0.0 },
        "bucket": n,
        "burst_max": largest_burst(&starts, per_sec),
        "drain_jobs_per_sec": (jobs as f64 / secs).round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio": ratio(jobs as f64 / secs, plain),
    }))
}

/// The most starts in any window beyond what the steady rate allows in it: the largest
/// `(j − i + 1) − rate × (t_j − t_i)` over sorted start times. A token bucket holding at
/// most `bucket` tokens keeps it at or below `bucket`.
fn largest_burst(starts: &[f64], per_sec: f64) -> f64 {
    let mut lowest = f64::INFINITY;
    let mut worst: f64 = 0.0;
    for (k, &t) in starts.iter().enumerate() {
        let level = k as f64 - per_sec * t;
        lowest = lowest.min(level);
        worst = worst.max(level - lowest + 1.0);
    }
    worst.round()
}

async fn unhandled_bench(
    db: &Database,
    bench: &LimitBench,
    jobs: usize,
    plain: f64,
) -> CliResult<Value> {
    let queue = "bench_mixed";
    let conn = db.conn().await?;
    let n = bench.unhandled as i64;
    // first in the queue's order: higher priority (lower number) and enqueued earlier
    conn.execute(
        "INSERT INTO remuda.jobs (state, queue, kind, priority, run_at, args)
         SELECT 'available', $1, 'bench_unhandled', -1, now() - interval '1 hour', jsonb_build_object('i', i)
         FROM generate_series(1, $2::bigint) i",
        &[&queue, &n],
    )
    .await
    .map_err(remuda::Error::from)?;
    conn.batch_execute("VACUUM ANALYZE remuda.jobs")
        .await
        .map_err(remuda::Error::from)?;
    let secs = drain(db, bench, queue, jobs, None).await?;
    let drain = jobs as f64 / secs;
    Ok(json!({
        "limit": "none",
        "jobs": jobs,
        "unhandled": bench.unhandled,
        "drain_jobs_per_sec": drain.round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio": ratio(drain, plain),
        "slowdown": if drain > 0.0 { plain / drain } else { 0.0 },
    }))
}

async fn limit_queue(db: &Database, queue: &str, change: QueueChange) -> CliResult<()> {
    Client::new(db.clone()).change_queue(queue, &change).await?;
    Ok(())
}

/// Enqueues `jobs` no-op jobs in `queue` (each job `i` shaped by `shape`: its key, its
/// group), then starts one
/// worker on the queue and waits until every outcome is written. Seconds from the worker's
/// start (start-up included, as the main bench).
async fn drain(
    db: &Database,
    bench: &LimitBench,
    queue: &str,
    jobs: usize,
    shape: Option<&dyn Fn(usize, NewJob) -> NewJob>,
) -> CliResult<f64> {
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| {
            let job = NewJob::from_json(KIND, remuda::Jsonb(format!("{{\"i\":{i}}}"))).queue(queue);
            match shape {
                Some(shape) => shape(i, job),
                None => job,
            }
        })
        .collect();
    Client::new(db.clone()).insert_bulk(&batch).await?;
    drop(batch);
    let worker = Worker::new(Client::new(db.sibling(8)))
        .config(WorkerConfig {
            queues: vec![queue.to_string()],
            concurrency: bench.concurrency,
            claim_batch: bench.concurrency,
            ..WorkerConfig::default()
        })
        .register_dyn(KIND, TaskOptions::default(), Arc::new(Noop));
    let stats = worker.stats();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let started = Instant::now();
    let mut handles = vec![tokio::spawn(
        worker.run(async move { token.cancelled().await }),
    )];
    let limit = Duration::from_secs(3600);
    while stats.written.load(Ordering::Relaxed) < jobs as u64 {
        if let Some(e) = super::super::failed_worker(&mut handles).await {
            stop.cancel();
            return Err(e);
        }
        if started.elapsed() > limit {
            stop.cancel();
            return Err(CliError::Usage(format!(
                "the drain of {queue} did not finish within an hour"
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    stop.cancel();
    super::join_workers(handles).await?;
    // what the drain left (its jobs' dead rows in the live part) is vacuumed, so the next
    // drain starts from tables as clean as the first's: the limited drain, always second,
    // otherwise paid the plain drain's vacuum in its own time
    db.conn()
        .await?
        .batch_execute("VACUUM (ANALYZE) remuda.jobs_live")
        .await
        .map_err(remuda::Error::from)?;
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use super::largest_burst;

    #[test]
    fn a_steady_stream_has_no_burst_and_a_full_bucket_shows_as_one() {
        let steady: Vec<f64> = (0..1000).map(|i| f64::from(i) / 100.0).collect();
        assert!(largest_burst(&steady, 100.0) <= 1.0);
        let mut bursty: Vec<f64> = vec![0.0; 100];
        bursty.extend((0..1000).map(|i| 1.0 + f64::from(i) / 100.0));
        let burst = largest_burst(&bursty, 100.0);
        assert!((100.0..=102.0).contains(&burst), "{burst}");
    }
}
