//! Jobs in the history: their recorded paths against the job state machine, claims ended
//! twice, and running jobs whose worker is gone.

use super::path::{ending, name, step, Ending};
use super::report::{Finding, Report};
use crate::db::{Conn, Database};
use crate::job::JobState;
use crate::{sql, Result};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Switches verification mode on or off for the database (kept in the database: every
/// process writing to it is recorded).
pub async fn set_history(db: &Database, on: bool) -> Result<()> {
    let conn = db.conn().await?;
    conn.execute(sql::VERIFY_SET_HISTORY, &[&on]).await?;
    Ok(())
}

/// One recorded change.
struct Change {
    attempt: i32,
    from: Option<String>,
    to: Option<String>,
    token: Option<chrono::DateTime<chrono::Utc>>,
    worker: Option<String>,
}

/// Judges every recorded job, adding what it finds to `report`. `slack` is how long past
/// its own `rescue_after` a silent worker's running job may wait for its rescue before it
/// counts as stuck.
pub(super) async fn check_jobs(conn: &Conn, slack: Duration, report: &mut Report) -> Result<()> {
    let mut histories: Vec<(i64, Vec<Change>)> = Vec::new();
    for row in conn.query(sql::VERIFY_HISTORY_READ, &[]).await? {
        let job: i64 = row.try_get("job_id")?;
        let change = Change {
            attempt: row.try_get("attempt")?,
            from: row.try_get("from_state")?,
            to: row.try_get("to_state")?,
            token: row.try_get("token")?,
            worker: row.try_get("worker_id")?,
        };
        match histories.last_mut() {
            Some((id, changes)) if *id == job => changes.push(change),
            _ => histories.push((job, vec![change])),
        }
    }
    let slack_ms = i64::try_from(slack.as_millis()).unwrap_or(i64::MAX);
    let mut now: HashMap<i64, String> = HashMap::new();
    report.jobs = histories.len();
    for row in conn.query(sql::VERIFY_JOBS_NOW, &[&slack_ms]).await? {
        let id: i64 = row.try_get("id")?;
        if row.try_get::<_, bool>("abandoned")? {
            report.stuck.push(Finding::of_job(
                id,
                "running, but its worker is gone or silent past its rescue_after".into(),
            ));
        }
        now.insert(id, row.try_get("state")?);
    }
    for (job, changes) in &histories {
        judge(*job, changes, now.get(job), report);
    }
    Ok(())
}

/// Whether the end of a claim came from another claim than the one the job was held under:
/// an outcome accepted from a stale or fenced worker.
fn stale(claim: Option<&Change>, end: &Change) -> Option<String> {
    let claim = claim?;
    let other_token = end.token.is_some() && end.token != claim.token;
    let other_worker = end.worker.is_some() && claim.worker.is_some() && end.worker != claim.worker;
    (other_token || other_worker).then(|| {
        format!(
            "{} was accepted from claim {:?} of worker {}, while the job was held by claim {:?} of worker {} (attempt {}): a stale outcome",
            name(&end.to),
            end.token,
            end.worker.as_deref().unwrap_or("?"),
            claim.token,
            claim.worker.as_deref().unwrap_or("?"),
            claim.attempt
        )
    })
}

/// One job's recorded path against the state machine and the row as it is now.
fn judge(job: i64, changes: &[Change], now: Option<&String>, report: &mut Report) {
    let illegal = |what: String| Finding::of_job(job, what);
    let mut at: Option<&Option<String>> = None;
    let mut ended: HashSet<(i32, Option<chrono::DateTime<chrono::Utc>>)> = HashSet::new();
    let mut claim: Option<&Change> = None;
    for change in changes {
        if change.from.as_deref() == Some("running") {
            if let Some(what) = stale(claim, change) {
                report.accepted_twice.push(illegal(what));
            }
        }
        if change.to.as_deref() == Some("running") {
            claim = Some(change);
        }
        if let Some(what) = step(at, &change.from, &change.to, JobState::may_become) {
            report
                .illegal_transitions
                .push(illegal(format!("{what} (attempt {})", change.attempt)));
        }
        if change.from.as_deref() == Some("running")
            && !ended.insert((change.attempt, change.token))
        {
            report.accepted_twice.push(illegal(format!(
                "attempt {} (claim {:?}) ended a second time, {}",
                change.attempt,
                change.token,
                name(&change.to)
            )));
        }
        at = Some(&change.to);
    }
    match ending(now, at.and_then(|to| to.as_ref())) {
        Some(Ending::Gap(what)) => report.illegal_transitions.push(illegal(what)),
        Some(Ending::Lost(what)) => report.lost.push(illegal(what)),
        None => {}
    }
}
