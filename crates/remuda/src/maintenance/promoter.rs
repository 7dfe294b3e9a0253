//! The promoter: scheduled jobs whose `run_at` has come become available, and their queues
//! are woken. It reports when the next scheduled job falls due so the leader sleeps until then
//! (bounded by the promote interval, which catches jobs scheduled by others meanwhile).

use super::leader::Lease;
use crate::db::Database;
use crate::{sql, Result};
use chrono::{DateTime, Utc};
use std::time::Instant;

/// Rows promoted per statement.
const BATCH: i64 = 10_000;

/// Promotes every due job; returns how many, and when the next one falls due if any is
/// scheduled.
pub(crate) async fn promote(db: &Database, lease: &Lease) -> Result<(i64, Option<Instant>)> {
    let conn = db.conn().await?;
    let mut total = 0;
    loop {
        let rows = conn
            .query_pinned(
                sql::PROMOTE_PINNED,
                &[&BATCH, &lease.leader_id, &lease.term],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| crate::Error::Setup("the promotion returned no row".into()))?;
        let promoted: i64 = row.try_get("promoted")?;
        total += promoted;
        if promoted < BATCH {
            let next: Option<DateTime<Utc>> = row.try_get("next_run_at")?;
            let due = next.map(|at| {
                let wait = (at - Utc::now()).to_std().unwrap_or_default();
                Instant::now() + wait
            });
            return Ok((total, due));
        }
    }
}
