//! `remuda bench --churn DURATION [--retain DURATION] [--rate N]`: a steady mix of enqueues
//! and drains with retention shortened to `--retain`, to see that the job table stays the
//! same size for as long as it runs. One worker (maintenance included: retention, the
//! reindexer, autovacuum as configured by the migrations) drains what a producer enqueues
//! every 100 ms. At the start, at each tenth of the run and at the end it samples the rows,
//! table and index bytes (of every partition, and of the live jobs' part alone), and for each tenth the drain rate and the pickup p99 of jobs
//! finished in its last 30 seconds.

use super::{percentile_of, KIND};
use crate::error::{CliError, CliResult};
use crate::executors::Noop;
use crate::output::print_json;
use remuda::maintenance::{Keep, Retention};
use remuda::{Client, Database, NewJob, TaskOptions, Worker, WorkerConfig};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What `--churn` was asked for.
pub struct Churn {
    pub duration: Duration,
    pub retain: Duration,
    pub rate: u32,
    pub json: bool,
}

/// One sample of the job table: all of it (every partition), and its live part alone.
#[derive(serde::Serialize)]
struct Size {
    t_s: f64,
    rows: i64,
    table_bytes: i64,
    index_bytes: i64,
    live_rows: i64,
    live_table_bytes: i64,
    live_index_bytes: i64,
}

async fn sample(db: &Database, t: f64) -> CliResult<Size> {
    let conn = db.conn().await?;
    let row = conn
        .query_one(
            "SELECT (SELECT count(*) FROM remuda.jobs),
                    (SELECT sum(pg_table_size(t.relid))::bigint FROM pg_partition_tree('remuda.jobs') t WHERE t.isleaf),
                    (SELECT sum(pg_indexes_size(t.relid))::bigint FROM pg_partition_tree('remuda.jobs') t WHERE t.isleaf),
                    (SELECT count(*) FROM remuda.jobs_live), pg_table_size('remuda.jobs_live'),
                    pg_indexes_size('remuda.jobs_live')",
            &[],
        )
        .await
        .map_err(remuda::Error::from)?;
    Ok(Size {
        t_s: t,
        rows: row.get(0),
        table_bytes: row.get(1),
        index_bytes: row.get(2),
        live_rows: row.get(3),
        live_table_bytes: row.get(4),
        live_index_bytes: row.get(5),
    })
}

/// Pickup p99 (ms) of the jobs that finished in the last 30 seconds.
async fn recent_pickup_p99(db: &Database) -> CliResult<f64> {
    let conn = db.conn().await?;
    let rows = conn
        .query(
            "SELECT extract(epoch FROM started_at - created_at)::float8 * 1000
             FROM remuda.jobs
             WHERE state = 'completed' AND finished_at > now() - interval '30 seconds'
             ORDER BY 1",
            &[],
        )
        .await
        .map_err(remuda::Error::from)?;
    let ms: Vec<f64> = rows.iter().map(|r| r.get(0)).collect();
    Ok(percentile_of(&ms, 0.99))
}

/// Enqueues `rate` jobs a second in batches every 100 ms until `stop`; returns how many.
async fn produce(client: Client, rate: u32, stop: CancellationToken) -> CliResult<u64> {
    let per_tick = (rate / 10).max(1) as usize;
    let mut sent = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(sent),
            _ = tick.tick() => {}
        }
        let jobs: Vec<NewJob> = (0..per_tick)
            .map(|i| {
                NewJob::from_json(
                    KIND,
                    remuda::Jsonb(format!("{{\"i\":{}}}", sent + i as u64)),
                )
            })
            .collect();
        client.insert_bulk(&jobs).await?;
        sent += per_tick as u64;
    }
}

pub async fn run(db: Database, churn: Churn) -> CliResult<serde_json::Value> {
    let keep = Keep::For(churn.retain);
    let worker = Worker::new(Client::new(db.sibling(16)))
        .config(WorkerConfig {
            concurrency: 2000,
            claim_batch: 2000,
            prune_interval: (churn.retain / 6)
                .clamp(Duration::from_secs(1), Duration::from_secs(60)),
            retention: Retention {
                completed: keep,
                failed: keep,
                cancelled: keep,
                expired: keep,
                ..Retention::default()
            },
            ..WorkerConfig::default()
        })
        .register_dyn(KIND, TaskOptions::default(), Arc::new(Noop));
    let stats = worker.stats();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let mut handles = vec![tokio::spawn(
        worker.run(async move { token.cancelled().await }),
    )];
    let producing = tokio::spawn(produce(
        Client::new(db.sibling(2)),
        churn.rate,
        stop.clone(),
    ));

    let start = Instant::now();
    let tenth = churn.duration / 10;
    let mut sizes = vec![sample(&db, 0.0).await?];
    let mut drain = Vec::new();
    let mut pickup_p99 = Vec::new();
    let mut written_before = stats.written.load(Ordering::Relaxed);
    for k in 1..=10u32 {
        let until = start + tenth * k;
        while Instant::now() < until {
            if let Some(e) = super::super::failed_worker(&mut handles).await {
                stop.cancel();
                return Err(e);
            }
            if producing.is_finished() {
                stop.cancel();
                return Err(CliError::Usage(
                    "the churn producer stopped: see the error above".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200).min(until - Instant::now())).await;
        }
        let written = stats.written.load(Ordering::Relaxed);
        drain.push(((written - written_before) as f64 / tenth.as_secs_f64()).round());
        written_before = written;
        pickup_p99.push(recent_pickup_p99(&db).await?);
        sizes.push(sample(&db, start.elapsed().as_secs_f64()).await?);
        if !churn.json {
            let s = &sizes[sizes.len() - 1];
            eprintln!(
                "  {:>6.0} s  {:>8} rows  table {:>7.1} MiB  indexes {:>7.1} MiB  (live {:>6} rows, {:>5.1} + {:>5.1} MiB)  drain {:>6.0} jobs/s  pickup p99 {:.1} ms",
                s.t_s,
                s.rows,
                s.table_bytes as f64 / 1048576.0,
                s.index_bytes as f64 / 1048576.0,
                s.live_rows,
                s.live_table_bytes as f64 / 1048576.0,
                s.live_index_bytes as f64 / 1048576.0,
                drain[drain.len() - 1],
                pickup_p99[pickup_p99.len() - 1]
            );
        }
    }
    stop.cancel();
    let enqueued = match producing.await {
        Ok(sent) => sent?,
        Err(e) => return Err(CliError::Usage(format!("the churn producer crashed: {e}"))),
    };
    super::join_workers(handles).await?;
    let report = serde_json::json!({
        "mode": "churn",
        "duration_s": churn.duration.as_secs_f64(),
        "retain_s": churn.retain.as_secs_f64(),
        "rate_per_sec": churn.rate,
        "enqueued": enqueued,
        "completed": stats.completed.load(Ordering::Relaxed),
        "sizes": sizes,
        "drain_jobs_per_sec": drain,
        "pickup_p99_ms": pickup_p99,
    });
    if churn.json {
        print_json(&report);
    }
    Ok(report)
}
