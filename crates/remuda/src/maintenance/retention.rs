//! Retention: finished jobs are deleted once they are older than their state's age — the
//! queue's own (`remuda queue set Q --retain-completed 1h`), else the worker's `[retention]`
//! (defaults: completed 1 day, cancelled and expired 7 days, failed 30 days).
//!
//! Deletes walk `jobs_finished_idx` (state, queue, finished_at), each queue up to its own
//! age, in batches of up to 10 000 rows,
//! each its own short transaction under `lock_timeout` and `statement_timeout`; a batch that
//! times out is retried at half the size. Deleted rows are final rows, which no claim
//! locks, and rows some other transaction holds are passed over (`SKIP LOCKED`), so pruning
//! never waits for, nor stalls, the hot path. A deleted job's unique key is free again.

use super::leader::Lease;
pub use crate::config::{Keep, Retention};
use crate::db::Database;
use crate::{sql, JobState, Result};
use tokio_postgres::types::ToSql;

/// Jobs deleted (or, in a dry run, that would be) per final state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    /// Completed jobs.
    pub completed: i64,
    /// Failed jobs.
    pub failed: i64,
    /// Cancelled jobs.
    pub cancelled: i64,
    /// Expired jobs.
    pub expired: i64,
    /// Finished workflow runs (kept as long as the jobs of their state; their jobs stay
    /// while the run does).
    pub workflows: i64,
    /// Sent and dead notifications.
    pub notifications: i64,
    /// Minutes of activity (per queue).
    pub activity: i64,
    /// Audit entries.
    pub audit: i64,
    /// Failures set aside (`remuda.failures`).
    pub failures: i64,
}

impl Pruned {
    fn add(&mut self, state: JobState, n: i64) {
        match state {
            JobState::Completed => self.completed += n,
            JobState::Failed => self.failed += n,
            JobState::Cancelled => self.cancelled += n,
            _ => self.expired += n,
        }
    }

    /// All states together.
    pub fn total(&self) -> i64 {
        self.completed + self.failed + self.cancelled + self.expired
    }
}

/// Most rows deleted by one statement.
const BATCH: i64 = 10_000;
/// Smallest batch a timed-out one shrinks to.
const MIN_BATCH: i64 = 100;

/// Deletes what is past its age, under `lease` when given (the leader's duty; a stale
/// leader deletes nothing); a dry run counts instead.
pub(crate) async fn prune(
    db: &Database,
    retention: &Retention,
    lease: Option<&Lease>,
    dry_run: bool,
) -> Result<Pruned> {
    let mut pruned = Pruned::default();
    let mut first_error = None;
    if !dry_run {
        if let Err(e) = finished_days(db).await {
            tracing::warn!(
                "remuda retention: creating the finished jobs' day partitions failed: {e}"
            );
            first_error = Some(e);
        }
    }
    match prune_workflows(db, retention, lease, dry_run).await {
        Ok(n) => pruned.workflows = n,
        Err(e) => {
            tracing::warn!("remuda retention: pruning workflow runs failed: {e}");
            first_error = Some(e);
        }
    }
    match prune_notifications(db, retention, lease, dry_run).await {
        Ok(n) => pruned.notifications = n,
        Err(e) => {
            tracing::warn!("remuda retention: pruning notifications failed: {e}");
            first_error.get_or_insert(e);
        }
    }
    for (table, keep, count) in [
        (
            sql::ACTIVITY_PRUNE,
            retention.activity,
            &mut pruned.activity,
        ),
        (sql::AUDIT_PRUNE, retention.audit, &mut pruned.audit),
        (
            sql::FAILURES_PRUNE,
            retention.failures,
            &mut pruned.failures,
        ),
    ] {
        match prune_aged(db, table, keep, lease, dry_run).await {
            Ok(n) => *count = n,
            Err(e) => {
                tracing::warn!("remuda retention: pruning activity minutes, audit entries or set-aside failures failed: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    if !dry_run {
        match drop_days(db, retention, lease).await {
            Ok(days) => {
                for (state, n) in days {
                    pruned.add(state, n);
                }
            }
            Err(e) => {
                tracing::warn!(
                    "remuda retention: dropping the finished jobs' past days failed: {e}"
                );
                first_error.get_or_insert(e);
            }
        }
    }
    for (state, keep) in retention.by_state() {
        // one state failing (a timeout) does not hold the others back
        match prune_state(db, state, keep, lease, dry_run).await {
            Ok(n) => pruned.add(state, n),
            Err(e) => {
                tracing::warn!("remuda retention: pruning {state} jobs failed: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e)
            if pruned.total() == 0
                && pruned.workflows == 0
                && pruned.notifications == 0
                && pruned.activity == 0
                && pruned.audit == 0
                && pruned.failures == 0 =>
        {
            Err(e)
        }
        _ => Ok(pruned),
    }
}

/// Days ahead whose partitions of finished jobs are made before they begin.
const DAYS_AHEAD: i32 = 2;

/// Makes the finished jobs' day partitions of today and the days ahead that are missing.
async fn finished_days(db: &Database) -> Result<()> {
    let conn = db.conn().await?;
    conn.query_one(sql::FINISHED_DAYS, &[&DAYS_AHEAD]).await?;
    Ok(())
}

/// Longest wait for the finished part's lock when a day is dropped: the completions that
/// move jobs into it wait behind the drop meanwhile.
const DROP_LOCK_TIMEOUT_MS: i32 = 200;

/// Most days dropped by one run of the duty (each in a transaction of its own).
const DAYS_PER_RUN: usize = 40;

/// Drops the finished jobs' days whose every job is past its age, the oldest first, one a
/// statement; returns how many jobs of each state went. A day found busy (its locks not had
/// within the timeout) is left for the next run.
async fn drop_days(
    db: &Database,
    retention: &Retention,
    lease: Option<&Lease>,
) -> Result<Vec<(JobState, i64)>> {
    let (leader, term) = (lease.map(|l| l.leader_id.as_str()), lease.map(|l| l.term));
    let (states, ages): (Vec<&str>, Vec<i64>) = retention
        .by_state()
        .into_iter()
        .map(|(state, keep)| (state.as_str(), keep.as_ms()))
        .unzip();
    let conn = db.conn().await?;
    let mut dropped = Vec::new();
    for _ in 0..DAYS_PER_RUN {
        let rows = conn
            .query(
                sql::FINISHED_DAYS_DROP,
                &[&states, &ages, &leader, &term, &DROP_LOCK_TIMEOUT_MS],
            )
            .await?;
        let Some(first) = rows.first() else {
            break;
        };
        let day: String = first.try_get("day")?;
        if first.try_get::<_, bool>("busy")? {
            tracing::warn!("remuda retention: the finished jobs of {day} are in use; their partition is dropped at a later run");
            break;
        }
        let kept: i64 = first.try_get("kept")?;
        for row in &rows {
            let state: Option<String> = row.try_get("state")?;
            let jobs: i64 = row.try_get("jobs")?;
            if let Some(state) = state.and_then(|s| s.parse::<JobState>().ok()) {
                dropped.push((state, jobs));
            }
        }
        tracing::debug!(
            "remuda retention: dropped the finished jobs of {day}, {kept} kept past it"
        );
    }
    Ok(dropped)
}

/// Deletes (or counts) the jobs of one final state past their age.
async fn prune_state(
    db: &Database,
    state: JobState,
    keep: Keep,
    lease: Option<&Lease>,
    dry_run: bool,
) -> Result<i64> {
    let (leader, term) = (lease.map(|l| l.leader_id.as_str()), lease.map(|l| l.term));
    let state_text = state.as_str();
    let default_ms = keep.as_ms();
    if dry_run {
        let conn = db.conn().await?;
        return Ok(conn
            .query_one(sql::PRUNE_COUNT, &[&state_text, &default_ms])
            .await?
            .try_get("doomed")?);
    }
    let mut batch = BATCH;
    let mut total = 0;
    loop {
        match delete_batch(db, state_text, default_ms, batch, leader, term).await {
            Ok(n) => {
                total += n;
                if n < batch {
                    return Ok(total);
                }
            }
            Err(e) if e.is_timeout() && batch > MIN_BATCH => batch = (batch / 2).max(MIN_BATCH),
            Err(e) => return Err(e),
        }
    }
}

/// Deletes (or counts) the finished workflow runs past the age of their state.
async fn prune_workflows(
    db: &Database,
    retention: &Retention,
    lease: Option<&Lease>,
    dry_run: bool,
) -> Result<i64> {
    let (leader, term) = (lease.map(|l| l.leader_id.as_str()), lease.map(|l| l.term));
    let ages = [
        retention.completed.as_ms(),
        retention.failed.as_ms(),
        retention.cancelled.as_ms(),
    ];
    let limit = if dry_run { i64::MAX } else { BATCH / 10 };
    let params: [&(dyn ToSql + Sync); 7] = [
        &ages[0], &ages[1], &ages[2], &limit, &leader, &dry_run, &term,
    ];
    in_batches(db, sql::WORKFLOW_PRUNE, &params, limit, dry_run).await
}

/// Deletes (or counts) the sent and dead notifications past their age.
async fn prune_notifications(
    db: &Database,
    retention: &Retention,
    lease: Option<&Lease>,
    dry_run: bool,
) -> Result<i64> {
    let (leader, term) = (lease.map(|l| l.leader_id.as_str()), lease.map(|l| l.term));
    let sent = retention.notifications_sent.as_ms();
    let dead = retention.notifications_dead.as_ms();
    let limit = if dry_run { i64::MAX } else { BATCH };
    let params: [&(dyn ToSql + Sync); 6] = [&sent, &dead, &limit, &leader, &dry_run, &term];
    in_batches(db, sql::NOTIFICATION_PRUNE, &params, limit, dry_run).await
}

/// Deletes (or counts) the rows of a log past their age: minutes of activity, audit entries,
/// failures set aside.
async fn prune_aged(
    db: &Database,
    statement: &str,
    keep: Keep,
    lease: Option<&Lease>,
    dry_run: bool,
) -> Result<i64> {
    let (leader, term) = (lease.map(|l| l.leader_id.as_str()), lease.map(|l| l.term));
    let age = keep.as_ms();
    let limit = if dry_run { i64::MAX } else { BATCH };
    let params: [&(dyn ToSql + Sync); 5] = [&age, &limit, &leader, &dry_run, &term];
    in_batches(db, statement, &params, limit, dry_run).await
}

/// Runs a pruning statement (which returns `deleted` and `doomed` counts) in short
/// transactions, bounded in time and in waiting, until a batch deletes fewer than `limit`
/// rows; a dry run counts once.
async fn in_batches(
    db: &Database,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    limit: i64,
    dry_run: bool,
) -> Result<i64> {
    let mut total = 0;
    loop {
        let mut conn = db.conn().await?;
        let tx = conn.transaction().await?;
        tx.batch_execute("SET LOCAL lock_timeout = '1s'; SET LOCAL statement_timeout = '10s'")
            .await?;
        let row = tx.query_one(statement, params).await?;
        tx.commit().await?;
        let n: i64 = row.try_get(if dry_run { "doomed" } else { "deleted" })?;
        total += n;
        if dry_run || n < limit {
            return Ok(total);
        }
    }
}

/// One batch in its own transaction, bounded in time and in waiting.
async fn delete_batch(
    db: &Database,
    state: &str,
    default_ms: i64,
    batch: i64,
    leader: Option<&str>,
    term: Option<i64>,
) -> Result<i64> {
    let mut conn = db.conn().await?;
    let tx = conn.transaction().await?;
    tx.batch_execute("SET LOCAL lock_timeout = '1s'; SET LOCAL statement_timeout = '10s'")
        .await?;
    let n: i64 = tx
        .query_one(sql::PRUNE, &[&state, &default_ms, &batch, &leader, &term])
        .await?
        .try_get("deleted")?;
    tx.commit().await?;
    Ok(n)
}
