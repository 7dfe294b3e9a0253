//! The schedule firer: each due schedule's fire times become jobs, exactly once. One
//! transaction per batch holds the lease (a stale leader fires nothing), locks the due rows
//! (another firer passes them over), inserts one job per fire time (unique per schedule and
//! time) and moves each schedule's `next_run_at` on from the value it read. What fires, and
//! what is skipped, is decided by `schedule/plan.rs` on the database's clock.

use super::leader::Lease;
use crate::db::Database;
use crate::schedule::plan::{self, Due, Plan};
use crate::schedule::{CatchUp, Overlap, Pattern, Zone};
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use std::time::Instant;

/// Schedules fired per transaction.
const BATCH: i64 = 500;

/// How soon the firer looks again when a due schedule could not be fired (its row held by
/// another firer, the lease lost, a row it cannot read): not at once, in a loop.
const AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// What a round of firing did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fired {
    /// Jobs inserted.
    pub jobs: i64,
    /// Fire times that got no job.
    pub skipped: i64,
}

impl std::ops::AddAssign for Fired {
    fn add_assign(&mut self, other: Fired) {
        self.jobs += other.jobs;
        self.skipped += other.skipped;
    }
}

/// Whether a batch inserts its jobs or, for a schedule whose queue is full, records its
/// fire times as skipped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Insert {
    Jobs,
    SkipAsFull,
}

/// Fires every due schedule; when the next one falls due.
pub(crate) async fn fire(db: &Database, lease: &Lease) -> Result<(Fired, Option<Instant>)> {
    let mut total = Fired::default();
    loop {
        match fire_batch(db, lease, BATCH, Insert::Jobs).await {
            Ok((fired, locked)) => {
                total += fired;
                if locked < BATCH as usize {
                    break;
                }
            }
            // one queue is full: fire one schedule at a time, so only its times are skipped
            Err(Error::QueueFull(_)) => {
                total += fire_one_by_one(db, lease).await?;
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok((total, next_due(db).await?))
}

async fn fire_one_by_one(db: &Database, lease: &Lease) -> Result<Fired> {
    let mut total = Fired::default();
    loop {
        let (fired, locked) = match fire_batch(db, lease, 1, Insert::Jobs).await {
            Err(Error::QueueFull(reason)) => {
                tracing::warn!("remuda schedules: a fire was skipped: {reason}");
                fire_batch(db, lease, 1, Insert::SkipAsFull).await?
            }
            other => other?,
        };
        total += fired;
        if locked == 0 {
            return Ok(total);
        }
    }
}

/// When the next schedule falls due, on this host's clock.
async fn next_due(db: &Database) -> Result<Option<Instant>> {
    let conn = db.conn().await?;
    let row = conn.query_one(sql::SCHEDULE_NEXT_DUE, &[]).await?;
    let next: Option<DateTime<Utc>> = row.try_get("next_run_at")?;
    let now: DateTime<Utc> = row.try_get("now")?;
    // a time already past is one this round could not fire
    Ok(next.map(|at| Instant::now() + (at - now).to_std().unwrap_or(AGAIN_AFTER)))
}

/// The arrays of `schedule_fire.sql`.
#[derive(Default)]
struct Writes {
    names: Vec<String>,
    old_next: Vec<DateTime<Utc>>,
    new_next: Vec<DateTime<Utc>>,
    skipped: Vec<i64>,
    reasons: Vec<Option<String>>,
    fire_names: Vec<String>,
    fire_times: Vec<DateTime<Utc>>,
}

/// Fires up to `limit` due schedules in one transaction; returns what it did and how many
/// schedules it locked.
async fn fire_batch(
    db: &Database,
    lease: &Lease,
    limit: i64,
    insert: Insert,
) -> Result<(Fired, usize)> {
    let mut conn = db.conn().await?;
    let tx = conn.transaction().await?;
    if !lease.hold(&tx).await? {
        return Ok((Fired::default(), 0));
    }
    let rows = tx.query(sql::SCHEDULE_DUE, &[&limit]).await?;
    if rows.is_empty() {
        return Ok((Fired::default(), 0));
    }
    let mut writes = Writes::default();
    for row in &rows {
        let name: String = row.try_get("name")?;
        let next_run_at: DateTime<Utc> = row.try_get("next_run_at")?;
        let now: DateTime<Utc> = row.try_get("now")?;
        let mut plan = match planned(row, next_run_at, now) {
            Ok(plan) => plan,
            Err(reason) => {
                // a row this build cannot read (edited by hand, or declared by a newer
                // remuda during an upgrade): left as it is, for a firer that can
                tracing::warn!("remuda schedules: schedule {name} cannot fire: {reason}");
                continue;
            }
        };
        let mut reason = plan.reason.map(str::to_string);
        if insert == Insert::SkipAsFull && !plan.fires.is_empty() {
            plan.skipped += plan.fires.len() as i64;
            plan.fires.clear();
            reason = Some("its queue was full (max_depth)".into());
        }
        for at in &plan.fires {
            writes.fire_names.push(name.clone());
            writes.fire_times.push(*at);
        }
        writes.names.push(name);
        writes.old_next.push(next_run_at);
        writes.new_next.push(plan.next);
        writes.skipped.push(plan.skipped);
        writes.reasons.push(reason);
    }
    if writes.names.is_empty() {
        return Ok((Fired::default(), rows.len()));
    }
    let row = tx
        .query_one(
            sql::SCHEDULE_FIRE,
            &[
                &writes.names,
                &writes.old_next,
                &writes.new_next,
                &writes.skipped,
                &writes.fire_names,
                &writes.fire_times,
                &writes.reasons,
            ],
        )
        .await?;
    let moved: i64 = row.try_get("moved")?;
    if moved != writes.names.len() as i64 {
        // cannot happen while the rows are locked; if it does, nothing is written
        return Err(Error::InvalidInput(format!(
            "schedules moved under the firer: {moved} of {} still held the next_run_at read; rolled back",
            writes.names.len()
        )));
    }
    let fired = Fired {
        jobs: row.try_get("fired")?,
        skipped: writes.skipped.iter().sum(),
    };
    tx.commit().await?;
    Ok((fired, rows.len()))
}

/// Plans one due row.
fn planned(
    row: &tokio_postgres::Row,
    next_run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> std::result::Result<Plan, String> {
    let text = |column: &str| row.try_get::<_, String>(column).map_err(|e| e.to_string());
    let pattern: Pattern = text("pattern")?.parse().map_err(|e: Error| e.to_string())?;
    let zone: Zone = text("tz")?.parse().map_err(|e: Error| e.to_string())?;
    let catch_up: CatchUp = text("catch_up")?
        .parse()
        .map_err(|e: Error| e.to_string())?;
    let overlap: Overlap = text("overlap")?.parse().map_err(|e: Error| e.to_string())?;
    let limit: i32 = row.try_get("catch_up_limit").map_err(|e| e.to_string())?;
    let busy: bool = row.try_get("busy").map_err(|e| e.to_string())?;
    let due = Due {
        pattern: &pattern,
        zone,
        catch_up,
        catch_up_limit: u32::try_from(limit).unwrap_or(1),
        overlap,
        busy,
        next_run_at,
    };
    plan::plan(&due, now).ok_or_else(|| format!("its pattern {pattern} never fires again"))
}
