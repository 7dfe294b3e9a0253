//! `remuda bench --schedules N [--duration 5m]`: N schedules firing every minute, fired by
//! one worker's maintenance leader for the duration. Reports each fire's lateness (the job's
//! `created_at` minus its `fire_at`) p50 and p99, the jobs fired, duplicates (more than one
//! job for a schedule and fire time) and missing fires (a minute boundary of the run with
//! no job of a schedule).

use super::{percentile_of, KIND};
use crate::error::CliResult;
use crate::executors::Noop;
use crate::output::print_json;
use remuda::schedule::{Pattern, Schedule};
use remuda::{Client, Database, TaskOptions, Worker, WorkerConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub async fn run(
    db: Database,
    schedules: usize,
    duration: Duration,
    json: bool,
) -> CliResult<serde_json::Value> {
    let client = Client::new(db.clone());
    let every = Pattern::every("1m")?;
    for i in 0..schedules {
        client
            .set_schedule(&Schedule::new(format!("bench_{i:05}"), KIND, every.clone()))
            .await?;
    }
    let worker = Worker::new(Client::new(db.sibling(16)))
        .config(WorkerConfig {
            concurrency: 2000,
            ..WorkerConfig::default()
        })
        .register_dyn(KIND, TaskOptions::default(), Arc::new(Noop));
    let stop = CancellationToken::new();
    let token = stop.clone();
    let conn = db.conn().await?;
    let clock = "SELECT now()";
    let started: chrono::DateTime<chrono::Utc> = conn
        .query_one(clock, &[])
        .await
        .map_err(remuda::Error::from)?
        .get(0);
    let mut handles = vec![tokio::spawn(
        worker.run(async move { token.cancelled().await }),
    )];
    let deadline = std::time::Instant::now() + duration;
    while std::time::Instant::now() < deadline {
        if let Some(e) = super::super::failed_worker(&mut handles).await {
            stop.cancel();
            return Err(e);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // the last minute's fires are given 5 s to land before the count
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ended: chrono::DateTime<chrono::Utc> = conn
        .query_one(clock, &[])
        .await
        .map_err(remuda::Error::from)?
        .get(0);
    stop.cancel();
    super::join_workers(handles).await?;
    let rows = conn
        .query(
            "SELECT extract(epoch FROM created_at - fire_at)::float8 * 1000
             FROM remuda.jobs WHERE schedule IS NOT NULL ORDER BY 1",
            &[],
        )
        .await
        .map_err(remuda::Error::from)?;
    let lateness: Vec<f64> = rows.iter().map(|r| r.get(0)).collect();
    let counts = conn
        .query_one(
            "SELECT (SELECT count(*) - count(DISTINCT (schedule, fire_at)) FROM remuda.jobs
                     WHERE schedule IS NOT NULL),
                    (SELECT count(*) FROM remuda.schedules s
                     CROSS JOIN generate_series(date_trunc('minute', $1::timestamptz) + interval '1 minute',
                                                $2::timestamptz - interval '5 seconds', interval '1 minute') m(at)
                     WHERE NOT EXISTS (SELECT 1 FROM remuda.jobs j WHERE j.schedule = s.name AND j.fire_at = m.at))",
            &[&started, &ended],
        )
        .await
        .map_err(remuda::Error::from)?;
    let (duplicates, missing): (i64, i64) = (counts.get(0), counts.get(1));
    let report = serde_json::json!({
        "mode": "schedules",
        "schedules": schedules,
        "duration_s": duration.as_secs_f64(),
        "fired": lateness.len(),
        "duplicates": duplicates,
        "missing": missing,
        "lateness_ms": {
            "p50": percentile_of(&lateness, 0.50),
            "p99": percentile_of(&lateness, 0.99),
            "max": lateness.last().copied().unwrap_or(0.0),
        },
    });
    if json {
        print_json(&report);
    } else {
        crate::out!(
            "remuda bench: {schedules} schedules every minute for {}: {} fired, {duplicates} duplicates, {missing} missing; lateness p50 {:.1} ms, p99 {:.1} ms",
            remuda::duration::format(duration),
            lateness.len(),
            percentile_of(&lateness, 0.50),
            percentile_of(&lateness, 0.99)
        );
    }
    Ok(report)
}
