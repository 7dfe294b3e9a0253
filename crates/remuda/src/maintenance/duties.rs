//! The duties, one step each: what the step does with the lease, what it reports, and when
//! it runs next. `mod.rs` runs each as a supervised task of its own.

use super::leader::Lease;
use super::{firer, promoter, reindexer, rescuer, retention, timers, Settings};
use crate::db::Database;
use crate::{sql, Result};
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Instant;

/// One run of a duty: its outcome (what it did, or its error) and when to run again.
pub(crate) struct Ran {
    pub outcome: std::result::Result<String, String>,
    pub next: Instant,
}

/// A duty's step.
pub(crate) type Step = fn(Database, Lease, Arc<Settings>) -> BoxFuture<'static, Ran>;

/// Every duty, by name.
pub(crate) const DUTIES: &[(&str, Step)] = &[
    ("rescue", |db, lease, s| Box::pin(rescue(db, lease, s))),
    ("expiry", |db, lease, s| Box::pin(expiry(db, lease, s))),
    ("promotion", |db, lease, s| {
        Box::pin(promotion(db, lease, s))
    }),
    ("schedules", |db, lease, s| {
        Box::pin(schedules(db, lease, s))
    }),
    ("workflow_timers", |db, lease, s| {
        Box::pin(workflow_timers(db, lease, s))
    }),
    ("workflow_repair", |db, lease, s| {
        Box::pin(workflow_repair(db, lease, s))
    }),
    ("retention", |db, lease, s| Box::pin(prune(db, lease, s))),
    ("rate_buckets", |db, lease, s| {
        Box::pin(rate_buckets(db, lease, s))
    }),
    ("reindex", |db, lease, s| Box::pin(reindex(db, lease, s))),
    ("vacuum", |db, lease, s| Box::pin(vacuum(db, lease, s))),
];

/// Runs again after `every`, reporting `done`.
fn after(every: std::time::Duration, done: Result<String>) -> Ran {
    Ran {
        outcome: done.map_err(|e| e.to_string()),
        next: Instant::now() + every,
    }
}

/// Runs again when `due` says, or after `cap` if sooner.
fn when_due(cap: std::time::Duration, done: Result<(String, Option<Instant>)>) -> Ran {
    let cap = Instant::now() + cap;
    match done {
        Ok((what, due)) => Ran {
            outcome: Ok(what),
            next: due.map_or(cap, |due| due.min(cap)),
        },
        Err(e) => Ran {
            outcome: Err(e.to_string()),
            next: cap,
        },
    }
}

/// Rounds of the rescue between two looks for workers the registry lost (the look scans the
/// live jobs; what it finds comes only from a rare race). Not at the first round: a leader
/// elected as a backlog drains would scan it then (a drain of 100 000 jobs measured 0.96 of
/// its base with that scan in it, 0.99 without: near this machine's noise, but a cost the
/// drain need not pay).
const FORGOTTEN_EVERY: u32 = 10;

async fn rescue(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let round = s
        .rescue_rounds
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if round % FORGOTTEN_EVERY == FORGOTTEN_EVERY - 1 {
        // found now, rescued by this round's rescue below
        if let Err(e) = rescuer::recall_forgotten(&db, &lease).await {
            return after(s.interval, Err(e));
        }
    }
    let done = rescuer::rescue(&db, &lease, &s.metrics).await;
    after(
        s.interval,
        done.map(|(retried, failed)| format!("{retried} retried, {failed} failed")),
    )
}

async fn expiry(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = rescuer::expire(&db, &lease).await;
    after(s.interval, done.map(|n| format!("{n} expired")))
}

async fn promotion(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = promoter::promote(&db, &lease).await;
    when_due(
        s.promote_interval,
        done.map(|(n, due)| (format!("{n} promoted"), due)),
    )
}

async fn schedules(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = firer::fire(&db, &lease).await;
    when_due(
        s.promote_interval,
        done.map(|(fired, due)| {
            (
                format!("{} fired, {} skipped", fired.jobs, fired.skipped),
                due,
            )
        }),
    )
}

async fn workflow_timers(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = timers::fire(&db, &lease).await;
    when_due(
        s.promote_interval
            .max(std::time::Duration::from_millis(200)),
        done.map(|(n, due)| (format!("{n} timers ended"), due)),
    )
}

async fn workflow_repair(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = timers::repair(&db, &lease).await;
    after(s.interval, done.map(|n| format!("{n} repaired")))
}

async fn prune(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = retention::prune(&db, &s.retention, Some(&lease), false).await;
    after(
        s.prune_interval,
        done.map(|p| {
            format!(
                "{} deleted ({} completed, {} failed, {} cancelled, {} expired)",
                p.total(),
                p.completed,
                p.failed,
                p.cancelled,
                p.expired
            )
        }),
    )
}

/// Deletes the token buckets that refilled (idle for a whole period: a fresh bucket is as
/// full) or whose queue no longer has a rate limit, the throttle windows that have
/// passed, and the idle groups of fair queues. Nothing else ever deletes them.
async fn rate_buckets(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = async {
        let conn = db.conn().await?;
        let n: i64 = conn
            .query_one(sql::RATE_BUCKETS_PRUNE, &[&lease.leader_id, &lease.term])
            .await?
            .try_get("deleted")?;
        let windows: i64 = conn
            .query_one(sql::THROTTLES_PRUNE, &[&lease.leader_id, &lease.term])
            .await?
            .try_get("deleted")?;
        let groups: i64 = conn
            .query_one(sql::GROUPS_PRUNE, &[&lease.leader_id, &lease.term])
            .await?
            .try_get("deleted")?;
        Ok(format!(
            "{n} idle buckets deleted, {windows} passed throttle windows deleted, {groups} idle groups deleted"
        ))
    };
    after(s.prune_interval, done.await)
}

async fn reindex(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = reindexer::reindex(&db, &lease, reindexer::Thresholds::default()).await;
    after(
        s.reindex_interval,
        done.map(|r| {
            let list = |names: &[String]| {
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            };
            format!(
                "rebuilt {}; leftovers dropped {}",
                list(&r.rebuilt),
                list(&r.dropped)
            )
        }),
    )
}

/// Vacuums (and analyses) the remuda tables whose dead rows piled up past twice what
/// autovacuum was told to allow: with autovacuum off (some servers run so) or behind, a
/// queue's table would otherwise grow for ever and its statistics go stale; and analyses
/// those whose statistics no longer tell their size (see `vacuum_due.sql`). Neither takes a
/// lock that stops enqueues, claims or completions.
pub(crate) async fn vacuum_due(db: &Database, lease: &Lease) -> Result<Vec<String>> {
    let conn = db.conn().await?;
    if !lease.hold(&conn).await? {
        return Ok(Vec::new());
    }
    let mut done = Vec::new();
    for row in conn.query(sql::VACUUM_DUE, &[]).await? {
        let name: String = row.try_get("name")?;
        let vacuum: bool = row.try_get("vacuum")?;
        // stale statistics are mostly a stale row count: a sample of 3 000 rows tells it (a
        // live part of 300 000 jobs: 15 ms, against 130 ms for the default 30 000)
        // SKIP_LOCKED: a table another session holds (a rebuild of its index, `REINDEX
        // CONCURRENTLY`, holds it between its steps and waits for older transactions, this
        // one included) is passed over until the next run, never waited for: waiting, the
        // two deadlocked and the server cancelled one
        let statement = if vacuum {
            format!("VACUUM (SKIP_LOCKED, ANALYZE) {name}")
        } else {
            // (one query string: one transaction, the setting its own)
            format!("SET LOCAL default_statistics_target = 10; ANALYZE (SKIP_LOCKED) {name}")
        };
        match conn.batch_execute(&statement).await {
            Ok(()) => done.push(name),
            // a day of finished jobs dropped since the list was read
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

async fn vacuum(db: Database, lease: Lease, s: Arc<Settings>) -> Ran {
    let done = vacuum_due(&db, &lease).await;
    after(
        s.prune_interval.min(std::time::Duration::from_secs(10)),
        done.map(|tables| {
            if tables.is_empty() {
                "none needed".to_string()
            } else {
                format!("vacuumed or analysed {}", tables.join(", "))
            }
        }),
    )
}
