//! Retries and snoozes due sooner than the leader's next promotion: the worker that wrote
//! them makes them available when due (`promote_ids.sql`), so a retry after 100 ms runs
//! after about 100 ms, not at the promotion's next tick (a second by default). Another
//! promotion taking them first, or a cancel meanwhile, leaves nothing to do; a worker that
//! stops before they are due leaves them to the leader.

use super::outcome::{End, Outcome};
use crate::db::Database;
use crate::sql;
use std::time::Duration;
use tokio::time::Instant;

/// Jobs due within this much of each other are promoted by one statement.
const TOGETHER: Duration = Duration::from_millis(5);

/// Promotes, once due, the jobs of `written` (a batch just committed) that wait less than
/// `within` (the promotion interval) before their next run.
pub(crate) fn promote_when_due(db: &Database, written: &[Outcome], within: Duration) {
    let mut due: Vec<(Duration, i64)> = written
        .iter()
        .filter_map(|outcome| match outcome {
            Outcome::Ended {
                run,
                end: End::Retry { delay, .. } | End::Snooze { delay },
                ..
            } if !delay.is_zero() && *delay < within => Some((*delay, run.id)),
            _ => None,
        })
        .collect();
    if due.is_empty() {
        return;
    }
    due.sort_unstable();
    // the batch committed before now: each job's run_at (the write's time plus its delay)
    // has passed by now plus its delay
    let committed = Instant::now();
    let db = db.clone();
    tokio::spawn(async move {
        let mut rest = due.as_slice();
        while let Some(&(first, _)) = rest.first() {
            let together = rest.partition_point(|(delay, _)| *delay <= first + TOGETHER);
            // until the last of the group is due: one promoted early would wait for the leader
            tokio::time::sleep_until(committed + rest[together - 1].0).await;
            let ids: Vec<i64> = rest[..together].iter().map(|(_, id)| *id).collect();
            rest = &rest[together..];
            if let Err(e) = promote(&db, &ids).await {
                tracing::debug!("remuda worker: the promotion of {} jobs due soon failed ({e}); the leader's promotion takes them", ids.len());
            }
        }
    });
}

async fn promote(db: &Database, ids: &[i64]) -> crate::Result<()> {
    let conn = db.conn().await?;
    conn.execute(sql::PROMOTE_IDS, &[&ids]).await?;
    Ok(())
}
