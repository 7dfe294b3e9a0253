//! Runs and nodes in the history, against their state machines
//! ([`WorkflowState::may_become`], [`NodeState::may_become`]) and their rows now.

use super::path::{ending, step, Ending};
use super::report::{Finding, Report};
use crate::db::Conn;
use crate::workflow::{NodeState, WorkflowState};
use crate::{sql, Result};
use std::collections::HashMap;
use std::time::Duration;

/// A run (node `None`) or one of its nodes.
type Subject = (i64, Option<String>);
/// One recorded change: from and to (`None`: created, deleted).
type Change = (Option<String>, Option<String>);

/// Judges every recorded run and node, adding what it finds to `report`; a timer overdue by
/// more than `slack` is stuck.
pub(super) async fn check(conn: &Conn, slack: Duration, report: &mut Report) -> Result<()> {
    let mut histories: Vec<(Subject, Vec<Change>)> = Vec::new();
    for row in conn.query(sql::VERIFY_RUN_HISTORY_READ, &[]).await? {
        let subject: Subject = (row.try_get("run_id")?, row.try_get("node")?);
        let change = (row.try_get("from_state")?, row.try_get("to_state")?);
        match histories.last_mut() {
            Some((last, changes)) if *last == subject => changes.push(change),
            _ => histories.push((subject, vec![change])),
        }
    }
    let mut now: HashMap<Subject, String> = HashMap::new();
    for row in conn.query(sql::VERIFY_RUNS_NOW, &[]).await? {
        now.insert(
            (row.try_get("run_id")?, row.try_get("node")?),
            row.try_get("state")?,
        );
    }
    report.workflows = histories.iter().filter(|((_, n), _)| n.is_none()).count();
    for ((run, node), changes) in &histories {
        let finding = |what: String| Finding {
            job: None,
            run: Some(*run),
            node: node.clone(),
            what,
        };
        let mut at: Option<&Option<String>> = None;
        for (from, to) in changes {
            let wrong = match node {
                None => step(at, from, to, WorkflowState::may_become),
                Some(_) => step(at, from, to, NodeState::may_become),
            };
            if let Some(what) = wrong {
                report.illegal_transitions.push(finding(what));
            }
            at = Some(to);
        }
        let last = at.and_then(|to| to.as_ref());
        match ending(now.get(&(*run, node.clone())), last) {
            Some(Ending::Gap(what)) => report.illegal_transitions.push(finding(what)),
            Some(Ending::Lost(what)) => report.lost.push(finding(what)),
            None => {}
        }
    }
    let slack_ms = i64::try_from(slack.as_millis()).unwrap_or(i64::MAX);
    for row in conn.query(sql::VERIFY_RUNS_STUCK, &[&slack_ms]).await? {
        report.stuck.push(Finding {
            job: None,
            run: Some(row.try_get("run_id")?),
            node: row.try_get("node")?,
            what: row.try_get("what")?,
        });
    }
    Ok(())
}
