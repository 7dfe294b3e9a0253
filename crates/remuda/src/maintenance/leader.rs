//! The leader lease: one row in `remuda.leader`, taken when free or expired, renewed by its
//! holder each round, deleted when the holder stops cleanly.

use crate::db::Database;
use crate::{sql, Result};
use std::time::Duration;

/// Takes or renews the lease; true when this worker holds it now.
pub(crate) async fn elect(db: &Database, worker_id: &str, lease: Duration) -> Result<bool> {
    let conn = db.conn().await?;
    let statement = conn.prepare_cached(sql::LEADER_ELECT).await?;
    let seconds = lease.as_secs_f64();
    Ok(conn
        .query_opt(&statement, &[&worker_id, &seconds])
        .await?
        .is_some())
}

/// Gives the lease up if this worker holds it.
pub(crate) async fn resign(db: &Database, worker_id: &str) -> Result<()> {
    let conn = db.conn().await?;
    let statement = conn.prepare_cached(sql::LEADER_RESIGN).await?;
    conn.execute(&statement, &[&worker_id]).await?;
    Ok(())
}
