//! Maintenance, run by one elected worker at a time: promote due scheduled jobs, rescue the
//! jobs of dead workers (and forget those workers), expire jobs past their start deadline.
//!
//! Every worker runs [`run`]: its election loop tries each interval to take or renew the
//! leader lease (`leader_elect.sql`) and publishes the lease it holds, if any. Each duty is a
//! supervised task of its own with its own pace (rescue and expiry each interval, promotion
//! as jobs fall due), acting only while a lease is published, so a slow one (a big expiry
//! backlog) never delays rescue or promotion. The lease lasts three maintenance intervals,
//! but a leader whose worker is dead by liveness (silent past its own `rescue_after`) loses
//! it at once: a killed leader is replaced, and its jobs rescued, within
//! `rescue_after + maintenance_interval`, like any other dead worker's. One that stops
//! cleanly resigns at once.

mod firer;
mod leader;
mod promoter;
mod rescuer;

pub(crate) use leader::resign;

use crate::db::Database;
use crate::worker::supervise::{self, Failures};
use crate::worker::WorkerConfig;
use leader::Lease;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The intervals maintenance runs at.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub interval: Duration,
    pub promote_interval: Duration,
}

impl From<&WorkerConfig> for Settings {
    fn from(c: &WorkerConfig) -> Self {
        Settings {
            interval: c.maintenance_interval,
            promote_interval: c.promote_interval,
        }
    }
}

/// Connections maintenance may hold at once: the election and each duty.
pub(crate) const CONNECTIONS: usize = 5;

/// Runs maintenance for this worker until `stop`: the election loop here, each duty as a
/// supervised task reporting to `failures`. Every write goes under the lease it was given
/// (see `leader.rs`).
pub(crate) async fn run(
    db: Database,
    worker_id: Arc<str>,
    settings: Settings,
    stop: CancellationToken,
    failures: Arc<Failures>,
) {
    let (publish, lease) = watch::channel(None);
    let interval = settings.interval;
    let duties = [
        spawn_duty("rescue", &lease, &stop, &failures, {
            let db = db.clone();
            move |held: Lease| {
                let db = db.clone();
                async move {
                    if let Err(e) = rescuer::rescue(&db, &held).await {
                        tracing::warn!("remuda maintenance: rescue failed: {e}");
                    }
                    Instant::now() + interval
                }
            }
        }),
        spawn_duty("expiry", &lease, &stop, &failures, {
            let db = db.clone();
            move |held: Lease| {
                let db = db.clone();
                async move {
                    if let Err(e) = rescuer::expire(&db, &held).await {
                        tracing::warn!("remuda maintenance: expiry failed: {e}");
                    }
                    Instant::now() + interval
                }
            }
        }),
        spawn_duty("promotion", &lease, &stop, &failures, {
            let db = db.clone();
            let every = settings.promote_interval;
            move |held: Lease| {
                let db = db.clone();
                async move {
                    let cap = Instant::now() + every;
                    until_due(promoter::promote(&db, &held).await, cap, "promotion")
                }
            }
        }),
        spawn_duty("schedules", &lease, &stop, &failures, {
            let db = db.clone();
            let every = settings.promote_interval;
            move |held: Lease| {
                let db = db.clone();
                async move {
                    let cap = Instant::now() + every;
                    let fired = firer::fire(&db, &held).await.map(|(_, next)| next);
                    until_due(fired, cap, "firing schedules")
                }
            }
        }),
    ];
    // aborted with this task (a worker that cannot wait for maintenance to end), the duties
    // are aborted too
    let duties = duties.map(supervise::AbortOnDrop);
    elect_until(&db, &worker_id, interval, &publish, &stop).await;
    for mut duty in duties {
        let _ = (&mut duty.0).await;
    }
}

/// Takes or renews the lease each `interval` until `stop`, publishing the lease held (a
/// change of holder or term only: a renewal wakes no duty).
async fn elect_until(
    db: &Database,
    worker_id: &str,
    interval: Duration,
    publish: &watch::Sender<Option<Lease>>,
    stop: &CancellationToken,
) {
    let lease = interval * 3;
    loop {
        crate::worker::supervise::fault_point("maintenance");
        let next_round = Instant::now() + interval;
        let held = match leader::elect(db, worker_id, lease).await {
            Ok(elected) => elected,
            Err(e) => {
                tracing::warn!("remuda maintenance: leader election failed: {e}");
                None
            }
        };
        publish.send_if_modified(|current| {
            if *current == held {
                return false;
            }
            if held.is_some() && current.is_none() {
                tracing::info!("remuda worker {worker_id} is now the maintenance leader");
            }
            *current = held;
            true
        });
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next_round.into()) => {}
        }
    }
}

/// Spawns duty `name`: while a lease is published, `step` runs with it and says when to run
/// again; a new lease (or none) is taken into account at once.
fn spawn_duty<F, Fut>(
    name: &'static str,
    lease: &watch::Receiver<Option<Lease>>,
    stop: &CancellationToken,
    failures: &Arc<Failures>,
    mut step: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(Lease) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Instant> + Send,
{
    let mut lease = lease.clone();
    let until = stop.clone();
    let task = async move {
        loop {
            let held = lease.borrow_and_update().clone();
            let next = match held {
                Some(held) => Some(step(held).await),
                None => None,
            };
            tokio::select! {
                _ = until.cancelled() => return,
                changed = lease.changed() => if changed.is_err() { return },
                _ = sleep_until(next) => {}
            }
        }
    };
    crate::worker::supervise::spawn(name, task, supervise::until(stop), failures.clone())
}

/// When a duty that knows its next due time runs again: then, or at `cap` if sooner (or
/// if it failed, logged as `what`).
fn until_due(due: crate::Result<Option<Instant>>, cap: Instant, what: &str) -> Instant {
    match due {
        Ok(next) => next.map_or(cap, |due| due.min(cap)),
        Err(e) => {
            tracing::warn!("remuda maintenance: {what} failed: {e}");
            cap
        }
    }
}

/// Sleeps until `at`, or for ever when there is nothing to wait for.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod schedule_tests;
#[cfg(test)]
mod tests;
