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

/// Runs maintenance for this worker until `stop`: each round it takes or renews the lease
/// and, while it holds it, rescues and expires; between rounds it promotes due jobs as they
/// fall due. Every write goes under the lease it was given (see `leader.rs`).
pub(crate) async fn run(
    db: Database,
    worker_id: Arc<str>,
    settings: Settings,
    stop: CancellationToken,
) {
    let lease = settings.interval * 3;
    let mut held: Option<leader::Lease> = None;
    let mut next_round = Instant::now();
    let mut next_promotion = Instant::now();
    loop {
        crate::worker::supervise::fault_point("maintenance");
        let now = Instant::now();
        if now >= next_round {
            next_round = now + settings.interval;
            held = match leader::elect(&db, &worker_id, lease).await {
                Ok(elected) => {
                    if elected.is_some() && held.is_none() {
                        tracing::info!("remuda worker {worker_id} is now the maintenance leader");
                    }
                    elected
                }
                Err(e) => {
                    tracing::warn!("remuda maintenance: leader election failed: {e}");
                    None
                }
            };
            if let Some(lease) = &held {
                if let Err(e) = rescuer::rescue(&db, lease).await {
                    tracing::warn!("remuda maintenance: rescue failed: {e}");
                }
                if let Err(e) = rescuer::expire(&db, lease).await {
                    tracing::warn!("remuda maintenance: expiry failed: {e}");
                }
            }
        }
        if let Some(lease) = held.as_ref().filter(|_| now >= next_promotion) {
            next_promotion = match promoter::promote(&db, lease).await {
                Ok(next_due) => {
                    let cap = Instant::now() + settings.promote_interval;
                    next_due.map_or(cap, |due| due.min(cap))
                }
                Err(e) => {
                    tracing::warn!("remuda maintenance: promotion failed: {e}");
                    Instant::now() + settings.promote_interval
                }
            };
        }
        let wake = if held.is_some() {
            next_round.min(next_promotion)
        } else {
            next_round
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

#[cfg(test)]
mod tests;
