//! The reindexer: rebuilds the job table's indexes `CONCURRENTLY` once they are mostly
//! empty space. A queue's indexes bloat by design — every job enters the available index,
//! then leaves it — and autovacuum frees their pages for reuse but never gives them back,
//! so a burst of a million jobs leaves a large, sparse index behind for good. First it drops
//! what an interrupted rebuild left (`_ccnew`, `_ccold` copies: every write keeps paying
//! for them while they exist).
//!
//! A rebuild cannot run inside a transaction, so it cannot hold the lease the way other
//! duties' statements do: the lease is checked before each step, and a session advisory
//! lock keeps two reindexers (a stale leader and a new one) from working at once. The
//! session is closed, never pooled, if the run is dropped half-way with the lock held.

use super::leader::Lease;
use crate::db::Database;
use crate::{sql, Result};
use deadpool_postgres::Object;

/// When an index is worth rebuilding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Thresholds {
    /// Smaller indexes are left alone: rebuilding them gives back little.
    pub min_bytes: i64,
    /// More bytes per entry than this is mostly empty space (a healthy entry of these
    /// indexes takes 20 to 60 bytes with its share of the page).
    pub max_bytes_per_entry: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_bytes: 16 << 20,
            max_bytes_per_entry: 200.0,
        }
    }
}

/// The advisory lock of the reindexer ("remuda.reindex").
const LOCK: i64 = 0x7265_6d75_6461_7278;

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reindexed {
    /// Leftovers of interrupted rebuilds dropped.
    pub dropped: Vec<String>,
    /// Indexes rebuilt.
    pub rebuilt: Vec<String>,
}

/// Drops leftovers and rebuilds bloated indexes, while `lease` holds.
pub(crate) async fn reindex(
    db: &Database,
    lease: &Lease,
    thresholds: Thresholds,
) -> Result<Reindexed> {
    // the lock is a session's: past a transaction-mode pooler, directly to PostgreSQL, or
    // not at all
    let Some(sessions) = db.sessions(1) else {
        tracing::debug!(
            "remuda reindexer: skipped behind a transaction-mode pooler without a direct address"
        );
        return Ok(Reindexed::default());
    };
    let mut session = Locked(Some(sessions.conn().await?));
    let Some(conn) = session.0.as_ref() else {
        return Ok(Reindexed::default());
    };
    let locked: bool = conn
        .query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK])
        .await?
        .try_get(0)?;
    if !locked {
        session.release();
        return Ok(Reindexed::default());
    }
    let done = run_locked(db, conn, lease, thresholds).await;
    if conn
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK])
        .await
        .is_ok()
    {
        session.release();
    }
    done
}

async fn run_locked(
    db: &Database,
    conn: &Object,
    lease: &Lease,
    thresholds: Thresholds,
) -> Result<Reindexed> {
    let mut done = Reindexed::default();
    if !holds(db, lease).await? {
        return Ok(done);
    }
    for row in conn.query(sql::REINDEX_LEFTOVERS, &[]).await? {
        let name: String = row.try_get("name")?;
        tracing::warn!("remuda reindexer: dropping {name}, left by an interrupted rebuild");
        conn.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
            .await?;
        done.dropped.push(name);
    }
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] =
        [&thresholds.min_bytes, &thresholds.max_bytes_per_entry];
    let mut rows = conn.query(sql::REINDEX_CANDIDATES, &params).await?;
    if !rows.is_empty() {
        // the entries are counted again first: an index that filled since its last count
        // (a backlog enqueued into a table analysed while empty) is full, not bloated, and a
        // leader started into that backlog rebuilt every index of the live part in the
        // middle of its drain. A sample of 3 000 rows counts them (as the vacuum duty does)
        conn.batch_execute(
            "BEGIN; SET LOCAL default_statistics_target = 10; ANALYZE remuda.jobs_live; COMMIT",
        )
        .await?;
        rows = conn.query(sql::REINDEX_CANDIDATES, &params).await?;
    }
    for row in rows {
        if !holds(db, lease).await? {
            break;
        }
        let name: String = row.try_get("name")?;
        let bytes: i64 = row.try_get("bytes")?;
        let entries: f64 = row.try_get("entries")?;
        tracing::info!("remuda reindexer: rebuilding {name} ({bytes} bytes for {entries} entries)");
        conn.batch_execute(&format!("REINDEX INDEX CONCURRENTLY {name}"))
            .await?;
        done.rebuilt.push(name);
    }
    Ok(done)
}

/// Whether `lease` still holds (checked before each step: a rebuild cannot hold it).
async fn holds(db: &Database, lease: &Lease) -> Result<bool> {
    let conn = db.conn().await?;
    lease.hold(&conn).await
}

/// The reindexer's session: back to the pool only once its lock is released, closed
/// otherwise (which releases it).
struct Locked(Option<crate::db::Conn>);

impl Locked {
    fn release(&mut self) {
        self.0 = None;
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            conn.close();
        }
    }
}
