//! Maintenance, run by one elected worker at a time: promote due scheduled jobs, rescue the
//! jobs of dead workers, expire jobs past their start deadline, forget dead workers.
//!
//! Every worker runs [`run`]; each round it tries to take or renew the leader lease
//! (`leader_elect.sql`) and only the holder does the work. The lease lasts three maintenance
//! intervals, but a leader whose worker is dead by liveness (silent past its own
//! `rescue_after`) loses it at once: a killed leader is replaced, and its jobs rescued, within
//! `rescue_after + maintenance_interval`, like any other dead worker's. One that stops cleanly
//! resigns at once.

mod leader;
mod promoter;
mod rescuer;

pub(crate) use leader::resign;

use crate::db::Database;
use crate::worker::WorkerConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};
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

/// Runs maintenance for this worker until `stop`: the election, and each duty on its own
/// interval while this worker holds the lease. The duties are separate futures polled
/// together, so a slow one (a rescue scanning a large table) never delays another (the
/// promotion of due jobs); each writes only under the lease it was given (see `leader.rs`).
pub(crate) async fn run(
    db: Database,
    worker_id: Arc<str>,
    settings: Settings,
    stop: CancellationToken,
) {
    let (held, lease) = tokio::sync::watch::channel(None::<leader::Lease>);
    let elect = elect(&db, &worker_id, &settings, &stop, held);
    let rescue = duty("rescue", settings.interval, lease.clone(), &stop, |lease| {
        let db = db.clone();
        async move { rescuer::rescue(&db, &lease).await.map(|_| None) }
    });
    let expire = duty("expiry", settings.interval, lease.clone(), &stop, |lease| {
        let db = db.clone();
        async move { rescuer::expire(&db, &lease).await.map(|_| None) }
    });
    let promote = duty(
        "promotion",
        settings.promote_interval,
        lease,
        &stop,
        |lease| {
            let db = db.clone();
            async move { promoter::promote(&db, &lease).await }
        },
    );
    tokio::join!(elect, rescue, expire, promote);
}

/// Takes or renews the lease every `interval`, publishing it (or its loss) to the duties.
async fn elect(
    db: &Database,
    worker_id: &str,
    settings: &Settings,
    stop: &CancellationToken,
    held: tokio::sync::watch::Sender<Option<leader::Lease>>,
) {
    let lease_for = settings.interval * 3;
    loop {
        crate::worker::supervise::fault_point("maintenance");
        let lease = match leader::elect(db, worker_id, lease_for).await {
            Ok(lease) => lease,
            Err(e) => {
                tracing::warn!("remuda maintenance: leader election failed: {e}");
                None
            }
        };
        if lease.is_some() && *held.borrow() != lease {
            tracing::info!("remuda worker {worker_id} is now the maintenance leader");
        }
        // the duties hear of a change only (taken, lost, a new term), not of each renewal
        held.send_if_modified(|held| {
            let changed = *held != lease;
            *held = lease;
            changed
        });
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(settings.interval) => {}
        }
    }
}

/// Runs one maintenance duty while the lease is held: at once when the lease is taken,
/// then every `interval`, or sooner when the duty says when it has work next (the promoter
/// knows when the next scheduled job falls due).
async fn duty<F, Fut>(
    name: &'static str,
    interval: Duration,
    mut lease: tokio::sync::watch::Receiver<Option<leader::Lease>>,
    stop: &CancellationToken,
    work: F,
) where
    F: Fn(leader::Lease) -> Fut,
    Fut: std::future::Future<Output = crate::Result<Option<Instant>>>,
{
    loop {
        let current = lease.borrow_and_update().clone();
        let next = match current {
            None => None,
            Some(held) => match work(held).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!("remuda maintenance: {name} failed: {e}");
                    None
                }
            },
        };
        let cap = Instant::now() + interval;
        let wake = next.map_or(cap, |due| due.min(cap));
        tokio::select! {
            _ = stop.cancelled() => return,
            // taken or lost: act on it at once
            changed = lease.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

#[cfg(test)]
mod tests;
