//! Reading the history and judging it (see the module's documentation).

use crate::db::Database;
use crate::job::JobState;
use crate::{sql, Result};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Switches verification mode on or off for the database (kept in the database: every
/// process writing to it is recorded).
pub async fn set_history(db: &Database, on: bool) -> Result<()> {
    let conn = db.conn().await?;
    conn.execute(sql::VERIFY_SET_HISTORY, &[&on]).await?;
    Ok(())
}

/// One thing the checker found: the job, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The job's id.
    pub job: i64,
    /// What was found, for people.
    pub what: String,
}

/// What the checker found, by class; every class must be empty.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Jobs with a recorded history.
    pub jobs: usize,
    /// Changes the state machine does not allow, and gaps in a recorded path.
    pub illegal_transitions: Vec<Finding>,
    /// Claims whose run ended more than once.
    pub accepted_twice: Vec<Finding>,
    /// Jobs gone without a recorded deletion.
    pub lost: Vec<Finding>,
    /// Running jobs whose worker is gone or silent past its rescue_after and the slack.
    pub stuck: Vec<Finding>,
}

impl Report {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.illegal_transitions.is_empty()
            && self.accepted_twice.is_empty()
            && self.lost.is_empty()
            && self.stuck.is_empty()
    }
}

/// One recorded change.
struct Change {
    attempt: i32,
    from: Option<String>,
    to: Option<String>,
    token: Option<chrono::DateTime<chrono::Utc>>,
}

/// Holds the history and the tables against the state machine. `slack` is how long past its
/// own `rescue_after` a silent worker's running job may wait for its rescue before it counts
/// as stuck.
pub async fn check(db: &Database, slack: Duration) -> Result<Report> {
    let conn = db.conn().await?;
    let mut histories: Vec<(i64, Vec<Change>)> = Vec::new();
    for row in conn.query(sql::VERIFY_HISTORY_READ, &[]).await? {
        let job: i64 = row.try_get("job_id")?;
        let change = Change {
            attempt: row.try_get("attempt")?,
            from: row.try_get("from_state")?,
            to: row.try_get("to_state")?,
            token: row.try_get("token")?,
        };
        match histories.last_mut() {
            Some((id, changes)) if *id == job => changes.push(change),
            _ => histories.push((job, vec![change])),
        }
    }
    let slack_ms = i64::try_from(slack.as_millis()).unwrap_or(i64::MAX);
    let mut now: HashMap<i64, String> = HashMap::new();
    let mut report = Report {
        jobs: histories.len(),
        ..Report::default()
    };
    for row in conn.query(sql::VERIFY_JOBS_NOW, &[&slack_ms]).await? {
        let id: i64 = row.try_get("id")?;
        if row.try_get::<_, bool>("abandoned")? {
            report.stuck.push(Finding {
                job: id,
                what: "running, but its worker is gone or silent past its rescue_after".into(),
            });
        }
        now.insert(id, row.try_get("state")?);
    }
    for (job, changes) in &histories {
        judge(*job, changes, now.get(job), &mut report);
    }
    Ok(report)
}

/// One job's recorded path against the state machine and the row as it is now.
fn judge(job: i64, changes: &[Change], now: Option<&String>, report: &mut Report) {
    let illegal = |what: String| Finding { job, what };
    let mut at: Option<&Option<String>> = None;
    let mut ended: HashSet<(i32, Option<chrono::DateTime<chrono::Utc>>)> = HashSet::new();
    for change in changes {
        // the first change may start mid-life (the mode was switched on after the insert)
        if let Some(last) = at {
            if *last != change.from {
                report.illegal_transitions.push(illegal(format!(
                    "the path breaks: it was {}, the next change starts from {} (a change was not recorded)",
                    name(last),
                    name(&change.from)
                )));
            }
        }
        if !JobState::may_become(state(&change.from), state(&change.to)) {
            report.illegal_transitions.push(illegal(format!(
                "{} → {} (attempt {}) is not a path of the state machine",
                name(&change.from),
                name(&change.to),
                change.attempt
            )));
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
    let last = at.and_then(|to| to.as_ref());
    match (now, last) {
        (Some(state), Some(recorded)) if state != recorded => {
            report.illegal_transitions.push(illegal(format!(
                "the row is {state}, its history ends {recorded} (a change was not recorded)"
            )));
        }
        (Some(state), None) => report.illegal_transitions.push(illegal(format!(
            "the row is {state}, its history ends with its deletion"
        ))),
        (None, Some(recorded)) => report.lost.push(illegal(format!(
            "the row is gone without a recorded deletion; its history ends {recorded}"
        ))),
        _ => {}
    }
}

fn state(name: &Option<String>) -> Option<JobState> {
    // a state this build cannot name is no state of its machine
    name.as_deref()
        .map(|n| n.parse().unwrap_or(JobState::Unknown))
}

fn name(state: &Option<String>) -> &str {
    state.as_deref().unwrap_or("(none)")
}
