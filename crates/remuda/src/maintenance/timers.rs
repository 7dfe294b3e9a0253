//! The workflow duties: timers (sleeps that are due complete, signals that waited too long
//! fail, runs past their deadline fail) and recovery (advancement that was not written in
//! the seam is repaired), each under the leader lease. Timers report when the next one falls
//! due so the leader sleeps until then.

use super::leader::Lease;
use crate::db::Database;
use crate::{sql, Result};
use chrono::{DateTime, Utc};
use std::time::Instant;

/// Runs advanced per transaction. Each run is settled in a subtransaction of its own (one
/// that fails is set aside, see `wf_settle_isolated.sql`), and a transaction with more than
/// 64 subtransactions makes every other session's snapshot look them up in `pg_subtrans`
/// while it runs: 30 runs keep a batch under that with room for a node start's own.
const BATCH: i32 = 30;

/// Ends every due timer; returns how many nodes and runs it ended, and when the next timer
/// falls due.
pub(crate) async fn fire(db: &Database, lease: &Lease) -> Result<(i64, Option<Instant>)> {
    let mut total = 0;
    loop {
        let mut conn = db.conn().await?;
        let tx = conn.transaction().await?;
        if !lease.hold(&tx).await? {
            return Ok((total, None));
        }
        let row = tx.query_one(sql::WORKFLOW_TIMERS, &[&BATCH]).await?;
        let ended: i32 = row.try_get("ended")?;
        let next: Option<DateTime<Utc>> = row.try_get("next_at")?;
        tx.commit().await?;
        total += i64::from(ended);
        if ended < BATCH {
            let due =
                next.map(|at| Instant::now() + (at - Utc::now()).to_std().unwrap_or_default());
            return Ok((total, due));
        }
    }
}

/// Repairs the runs whose advancement was not written; returns how many nodes and runs.
pub(crate) async fn repair(db: &Database, lease: &Lease) -> Result<i64> {
    let mut conn = db.conn().await?;
    let tx = conn.transaction().await?;
    if !lease.hold(&tx).await? {
        return Ok(0);
    }
    let repaired: i32 = tx
        .query_one(sql::WORKFLOW_REPAIR, &[&BATCH])
        .await?
        .try_get("repaired")?;
    tx.commit().await?;
    Ok(i64::from(repaired))
}
