//! The rescuer and the expirer. Rescue: running jobs of workers silent for longer than the
//! threshold go back to available (or fail on their last attempt) with a `WORKER_LOST` error,
//! and those workers are then forgotten. A worker's row is its jobs' lifeline: workers
//! register before claiming and leave only after giving every job back. Expiry: jobs that did not start before their
//! `expires_at` become `expired`.

use crate::db::Database;
use crate::{sql, Result};

/// Rows expired per statement.
const EXPIRE_BATCH: i64 = 10_000;

/// Rescues the jobs of dead workers (each judged by its own `rescue_after`); returns
/// (retried, failed).
pub(crate) async fn rescue(db: &Database) -> Result<(i64, i64)> {
    let conn = db.conn().await?;
    let dead = conn.prepare_cached(sql::DEAD_WORKERS).await?;
    let dead: Vec<String> = conn
        .query(&dead, &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if dead.is_empty() {
        return Ok((0, 0));
    }
    let statement = conn.prepare_cached(sql::RESCUE).await?;
    let row = conn.query_one(&statement, &[&dead]).await?;
    let (retried, failed): (i64, i64) = (row.get("retried"), row.get("failed"));
    if retried + failed > 0 {
        tracing::warn!("remuda rescuer: {retried} jobs of lost workers retried, {failed} failed");
    }
    let prune = conn.prepare_cached(sql::PRUNE_WORKERS).await?;
    conn.execute(&prune, &[&dead]).await?;
    Ok((retried, failed))
}

/// Expires jobs past their start deadline; returns how many.
pub(crate) async fn expire(db: &Database) -> Result<i64> {
    let conn = db.conn().await?;
    let statement = conn.prepare_cached(sql::EXPIRE).await?;
    let mut total = 0;
    loop {
        let expired: i64 = conn
            .query_one(&statement, &[&EXPIRE_BATCH])
            .await?
            .get("expired");
        total += expired;
        if expired < EXPIRE_BATCH {
            return Ok(total);
        }
    }
}
