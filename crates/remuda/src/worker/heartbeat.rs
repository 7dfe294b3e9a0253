//! Worker registration, heartbeat and self-fencing: one row per worker process in
//! `remuda.workers`, one `UPDATE` per interval for the whole worker however many jobs it runs.
//!
//! Liveness is per worker, not a timer per job: a job runs as long as its worker heartbeats,
//! however long that is. A worker silent for longer than its `rescue_after` is declared dead by
//! the leader (`mark_dead.sql`) and its jobs are rescued. Two rules keep a job from running
//! twice at once:
//! - Self-fencing: a worker that has not heartbeat for `rescue_after - heartbeat_interval`
//!   stops claiming and stops its jobs (each gets a short grace, then is aborted), before
//!   anyone may rescue them. When a heartbeat gets through again it claims again.
//! - A worker whose heartbeat finds its row marked dead learns its jobs are being rescued:
//!   it aborts them at once and registers again.
//!
//! Whatever a fenced worker still writes about those jobs is rejected by the (worker,
//! attempt) guard of every write and counted in [`WorkerStats::rejected`](super::WorkerStats).

use super::Shared;
use crate::db::Database;
use crate::runtime::lock;
use crate::{sql, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What the worker registers about itself.
#[derive(Clone, Debug)]
pub(crate) struct Registration {
    pub id: String,
    pub name: String,
    pub host: String,
    pub pid: i32,
    pub queues: Vec<String>,
    pub kinds: Vec<String>,
    pub concurrency: i32,
    pub rescue_after_ms: i64,
    pub crash_loop_limit: i32,
    pub capabilities: Vec<String>,
}

/// Registers the worker; returns when the installation's schema was first made (microseconds,
/// 0 if unknown), the seed of the trace ids of jobs outside any trace.
pub(crate) async fn register(db: &Database, r: &Registration) -> Result<i64> {
    let conn = db.conn().await?;
    let row = conn
        .query_one(
            sql::WORKER_REGISTER,
            &[
                &r.id,
                &r.name,
                &r.host,
                &r.pid,
                &r.queues,
                &r.kinds,
                &r.concurrency,
                &r.rescue_after_ms,
                &r.crash_loop_limit,
                &r.capabilities,
            ],
        )
        .await?;
    Ok(row.try_get::<_, Option<i64>>(0)?.unwrap_or(0))
}

pub(crate) async fn deregister(db: &Database, id: &str) -> Result<()> {
    let conn = db.conn().await?;
    conn.execute(sql::WORKER_DEREGISTER, &[&id]).await?;
    Ok(())
}

/// Leaves the registry at shutdown, trying again within `patience` (a database that has just
/// restarted refuses or drops the first connections: "the database system is starting up",
/// a pooled connection it closed). A worker that still cannot leave is no failure: its row
/// falls silent and is declared dead and pruned like any other, and every outcome it had was
/// written before (or its jobs are rescued). Says whether it left.
pub(crate) async fn leave(db: &Database, id: &str, patience: std::time::Duration) -> bool {
    let until = tokio::time::Instant::now() + patience;
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        let left = tokio::time::timeout_at(until, deregister(db, id)).await;
        let error = match left {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the database did not answer".to_string(),
        };
        if tokio::time::Instant::now() + pause >= until {
            tracing::warn!(
                "remuda worker {id}: cannot leave the registry ({error}); it will be declared dead and forgotten"
            );
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(1));
    }
}

/// What a heartbeat reports besides the worker being alive.
struct Report {
    running: i32,
    running_ids: Vec<i64>,
    completed: i64,
    failed: i64,
    cpu_percent: Option<f32>,
    rss_bytes: Option<i64>,
}

impl Report {
    fn now(shared: &Shared, concurrency: i32, cpu: &mut super::usage::CpuMeter) -> Report {
        let free = i32::try_from(shared.slots.available_permits()).unwrap_or(i32::MAX);
        let count = |n: &std::sync::atomic::AtomicU64| {
            i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
        };
        Report {
            running: concurrency.saturating_sub(free).max(0),
            running_ids: lock(&shared.running).keys().copied().collect(),
            completed: count(&shared.stats.completed),
            failed: count(&shared.stats.failed),
            cpu_percent: cpu.percent(),
            rss_bytes: super::usage::resident_bytes(),
        }
    }
}

/// Whether the heartbeat found the worker alive in the registry.
async fn beat(db: &Database, r: &Registration, report: &Report) -> Result<bool> {
    let conn = db.conn().await?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
        &r.id,
        &report.running,
        &report.running_ids,
        &report.completed,
        &report.failed,
        &report.cpu_percent,
        &report.rss_bytes,
    ];
    Ok(conn.execute(sql::WORKER_HEARTBEAT, &params).await? > 0)
}

/// Stops every running job: asked at once, aborted after `grace`. The producer claims nothing
/// while the worker is fenced.
fn fence(shared: &Shared, grace: Duration) {
    // under the lock the producer takes to start a job: no job starts unstopped
    let running = lock(&shared.running);
    shared.fenced.store(true, Ordering::SeqCst);
    // a claim whose answer arrives after this starts nothing (see the producer)
    shared.epoch.fetch_add(1, Ordering::SeqCst);
    for job in running.values() {
        job.stop(crate::task::StopReason::Fenced, grace);
    }
}

/// Heartbeats until `stop`, reporting how many jobs run, and fences the worker when it cannot.
/// `registered` is when the registration statement was sent: the clock of self-fencing starts
/// there, as the database's clock of this worker's silence does.
pub(crate) async fn run(
    shared: Arc<Shared>,
    registration: Registration,
    registered: Instant,
    stop: CancellationToken,
) {
    beat_until(&shared, &registration, registered, &stop).await;
    // what the last jobs' attempts add to the activity minutes
    let patience = shared.config.heartbeat_interval.max(Duration::from_secs(1));
    match tokio::time::timeout(patience, shared.activity.flush(&shared.db)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("remuda worker: cannot write its last activity: {e}"),
        Err(_) => tracing::warn!("remuda worker: writing its last activity got no answer"),
    }
}

/// Adds the activity tallies to the database beside the heartbeat, one write at a time, so
/// that a slow write never holds a heartbeat back.
fn flush_activity(shared: &Arc<Shared>, patience: Duration) {
    if !shared.activity.start_writing() {
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        match tokio::time::timeout(patience, shared.activity.flush(&shared.db)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("remuda worker: activity kept for later: {e}"),
            Err(_) => tracing::debug!("remuda worker: activity kept for later: no answer"),
        }
        shared.activity.done_writing();
    });
}

async fn beat_until(
    shared: &Arc<Shared>,
    registration: &Registration,
    registered: Instant,
    stop: &CancellationToken,
) {
    let every = shared.config.heartbeat_interval;
    let fence_after = shared.config.rescue_after.saturating_sub(every);
    // the jobs must be gone before rescue_after: half an interval of the remaining margin
    let grace = shared.config.cancel_grace.min(every / 2);
    // a heartbeat stuck on a connection that went silent must not stop the clock
    let patience = every.max(Duration::from_secs(1));
    let id = &registration.id;
    let mut last_ok = registered;
    let mut cpu = super::usage::CpuMeter::new();
    loop {
        crate::runtime::supervise::fault_point("heartbeat");
        let fence_at = tokio::time::Instant::from_std(last_ok + fence_after);
        let fenced = shared.fenced.load(Ordering::SeqCst);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
            _ = tokio::time::sleep_until(fence_at), if !fenced => {
                fence_for_silence(shared, last_ok, grace);
                continue;
            }
        }
        let started = Instant::now();
        let report = Report::now(shared, registration.concurrency, &mut cpu);
        let beating = tokio::time::timeout(patience, beat(&shared.db, registration, &report));
        tokio::pin!(beating);
        let outcome = loop {
            let fenced = shared.fenced.load(Ordering::SeqCst);
            tokio::select! {
                _ = stop.cancelled() => return,
                outcome = &mut beating => break outcome,
                // the deadline passes while this heartbeat hangs: fence now, keep waiting
                _ = tokio::time::sleep_until(fence_at), if !fenced => {
                    fence_for_silence(shared, last_ok, grace);
                }
            }
        };
        match outcome {
            Ok(Ok(true)) => {
                last_ok = started;
                flush_activity(shared, patience);
                if shared.fenced.swap(false, Ordering::SeqCst) {
                    tracing::warn!("remuda worker {id}: heartbeat through again; claiming again");
                    shared.wake.notify_one();
                }
            }
            Ok(Ok(false)) => {
                // declared dead (or forgotten): its jobs are being rescued right now
                tracing::error!(
                    "remuda worker {id}: the database declared this worker dead (no heartbeat for over {}); aborting its {} jobs, which are rescued elsewhere, and registering again",
                    crate::duration::format(shared.config.rescue_after),
                    lock(&shared.running).len()
                );
                fence(shared, Duration::ZERO);
                match tokio::time::timeout(patience, register(&shared.db, registration)).await {
                    Ok(Ok(_)) => {
                        last_ok = started;
                        shared.fenced.store(false, Ordering::SeqCst);
                        shared.wake.notify_one();
                    }
                    Ok(Err(e)) => {
                        tracing::warn!("remuda worker {id}: cannot register again: {e}")
                    }
                    Err(_) => tracing::warn!("remuda worker {id}: registering again got no answer"),
                }
            }
            Ok(Err(e)) => tracing::warn!("remuda worker {id}: heartbeat failed: {e}"),
            Err(_) => tracing::warn!(
                "remuda worker {id}: heartbeat got no answer within {}",
                crate::duration::format(patience)
            ),
        }
        if !shared.fenced.load(Ordering::SeqCst) && last_ok.elapsed() >= fence_after {
            fence_for_silence(shared, last_ok, grace);
        }
    }
}

/// Fences a worker whose heartbeats have not got through since `last_ok`. Fencing late (the
/// process was paused, or starved of CPU) leaves no time for a grace: the jobs are aborted.
fn fence_for_silence(shared: &Shared, last_ok: Instant, grace: Duration) {
    let late = shared
        .config
        .rescue_after
        .saturating_sub(shared.config.heartbeat_interval / 2);
    let grace = if last_ok.elapsed() >= late {
        Duration::ZERO
    } else {
        grace
    };
    tracing::error!(
        "remuda worker {}: no heartbeat got through for {}; stopping its {} jobs before they are rescued, and claiming nothing until the database answers",
        shared.worker_id,
        crate::duration::format(last_ok.elapsed()),
        lock(&shared.running).len()
    );
    fence(shared, grace);
}
