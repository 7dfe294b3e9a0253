//! The leader lease: one row in `remuda.leader`, taken when free, expired or held by a dead
//! worker, renewed by its holder each round, deleted when the holder stops cleanly. Each
//! change of holder raises its term: the fencing token that every leader write checks
//! against the row it locks, so a leader that lost the lease without knowing it writes
//! nothing.

use crate::db::Database;
use crate::{sql, Result};
use std::time::Duration;

/// The lease as held by this worker: who and at which term. Passed to every leader write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    pub leader_id: String,
    pub term: i64,
}

impl Lease {
    /// Holds the lease for the rest of `client`'s transaction (autocommit: for that one
    /// statement); false when this worker is not the leader at this term any more.
    pub(crate) async fn hold(&self, client: &impl crate::db::Sql) -> Result<bool> {
        Ok(client
            .query_opt(sql::LEASE_HOLD, &[&self.leader_id, &self.term])
            .await?
            .is_some())
    }
}

/// Takes or renews the lease; the lease when this worker holds it now.
pub(crate) async fn elect(
    db: &Database,
    worker_id: &str,
    lease: Duration,
) -> Result<Option<Lease>> {
    let conn = db.conn().await?;
    let seconds = lease.as_secs_f64();
    let Some(row) = conn
        .query_opt(sql::LEADER_ELECT, &[&worker_id, &seconds])
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(Lease {
        leader_id: worker_id.to_string(),
        term: row.try_get("term")?,
    }))
}

/// Gives the lease up if this worker holds it.
pub(crate) async fn resign(db: &Database, worker_id: &str) -> Result<()> {
    let conn = db.conn().await?;
    conn.execute(sql::LEADER_RESIGN, &[&worker_id]).await?;
    Ok(())
}
