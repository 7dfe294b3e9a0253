//! Worker registration and heartbeat: one row per worker process in `remuda.workers`, one
//! `UPDATE` per interval for the whole worker however many jobs it runs. A worker whose
//! heartbeat is older than the rescue threshold is presumed dead and its jobs are rescued.

use crate::db::Database;
use crate::{sql, Result};
use std::time::Duration;
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
}

pub(crate) async fn register(db: &Database, r: &Registration) -> Result<()> {
    let conn = db.conn().await?;
    let statement = conn.prepare_cached(sql::WORKER_REGISTER).await?;
    conn.execute(
        &statement,
        &[
            &r.id,
            &r.name,
            &r.host,
            &r.pid,
            &r.queues,
            &r.kinds,
            &r.concurrency,
            &r.rescue_after_ms,
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn deregister(db: &Database, id: &str) -> Result<()> {
    let conn = db.conn().await?;
    let statement = conn.prepare_cached(sql::WORKER_DEREGISTER).await?;
    conn.execute(&statement, &[&id]).await?;
    Ok(())
}

async fn beat(db: &Database, r: &Registration, running: i32) -> Result<()> {
    let conn = db.conn().await?;
    let statement = conn.prepare_cached(sql::WORKER_HEARTBEAT).await?;
    if conn.execute(&statement, &[&r.id, &running]).await? == 0 {
        // pruned while we could not reach the database: come back
        drop(conn);
        register(db, r).await?;
    }
    Ok(())
}

/// Heartbeats until `stop`, reporting how many jobs run (concurrency minus free `slots`).
pub(crate) async fn run(
    db: Database,
    registration: Registration,
    slots: std::sync::Arc<tokio::sync::Semaphore>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let free = i32::try_from(slots.available_permits()).unwrap_or(i32::MAX);
        let running = registration.concurrency.saturating_sub(free).max(0);
        if let Err(e) = beat(&db, &registration, running).await {
            tracing::warn!("remuda worker {}: heartbeat failed: {e}", registration.id);
        }
    }
}
