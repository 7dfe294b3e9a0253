//! The rescuer and the expirer. Rescue: running jobs of workers silent for longer than the
//! threshold go back to available (or fail on their last attempt) with a `WORKER_LOST` error,
//! and those workers are then forgotten. A worker's row is its jobs' lifeline: workers
//! register before claiming and leave only after giving every job back. Expiry: jobs that did not start before their
//! `expires_at` become `expired`. And every few rounds, workers that running jobs name but
//! the registry lost are registered again as dead, for the rescue to find.

use super::leader::Lease;
use crate::db::Database;
use crate::{sql, Result};

/// Rows expired per statement.
const EXPIRE_BATCH: i64 = 10_000;

/// Declares dead the workers silent for longer than their own `rescue_after`, rescues their
/// jobs (quarantining crash loops) and forgets them; returns (retried, failed).
pub(crate) async fn rescue(
    db: &Database,
    lease: &Lease,
    metrics: &crate::metrics::Metrics,
) -> Result<(i64, i64)> {
    let conn = db.conn().await?;
    let rows = conn
        .query(sql::MARK_DEAD, &[&lease.leader_id, &lease.term])
        .await?;
    if rows.is_empty() {
        return Ok((0, 0));
    }
    let mut dead = Vec::with_capacity(rows.len());
    let mut limits = Vec::with_capacity(rows.len());
    let mut marked_at = Vec::with_capacity(rows.len());
    for row in &rows {
        dead.push(row.try_get::<_, String>("id")?);
        limits.push(row.try_get::<_, i32>("crash_loop_limit")?);
        marked_at.push(row.try_get::<_, chrono::DateTime<chrono::Utc>>("marked_at")?);
    }
    let row = conn
        .query_one(
            sql::RESCUE,
            &[&dead, &limits, &marked_at, &lease.leader_id, &lease.term],
        )
        .await?;
    let retried: i64 = row.try_get("retried")?;
    let failed: i64 = row.try_get("failed")?;
    let quarantined: i64 = row.try_get("quarantined")?;
    let by_kind: Option<serde_json::Value> = row.try_get("by_kind")?;
    for entry in by_kind
        .as_ref()
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        let text = |key: &str| entry[key].as_str().unwrap_or_default();
        let n = entry["jobs"].as_u64().unwrap_or(0);
        metrics.rescued(text("queue"), text("kind"), n);
    }
    if retried + failed > 0 {
        tracing::warn!(
            "remuda rescuer: jobs of lost workers {}: {retried} retried, {failed} failed ({quarantined} of them quarantined as crash loops)",
            dead.join(", ")
        );
    }
    conn.execute(sql::PRUNE_WORKERS, &[&dead]).await?;
    Ok((retried, failed))
}

/// Registers as dead the workers that running jobs name but the registry lost (a claim that
/// committed after its worker's row was removed), so that the next rescue takes their jobs:
/// returns them.
pub(crate) async fn recall_forgotten(db: &Database, lease: &Lease) -> Result<Vec<String>> {
    let conn = db.conn().await?;
    let rows = conn
        .query(sql::FORGOTTEN_WORKERS, &[&lease.leader_id, &lease.term])
        .await?;
    let ids = rows
        .iter()
        .map(|row| row.try_get::<_, String>("id"))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if !ids.is_empty() {
        tracing::warn!(
            "remuda rescuer: jobs run for workers no longer registered ({}): registered as dead, their jobs are rescued",
            ids.join(", ")
        );
    }
    Ok(ids)
}

/// Expires jobs past their start deadline; returns how many.
pub(crate) async fn expire(db: &Database, lease: &Lease) -> Result<i64> {
    let conn = db.conn().await?;
    let mut total = 0;
    loop {
        let expired: i64 = conn
            .query_one(sql::EXPIRE, &[&EXPIRE_BATCH, &lease.leader_id, &lease.term])
            .await?
            .try_get("expired")?;
        total += expired;
        if expired < EXPIRE_BATCH {
            return Ok(total);
        }
    }
}
