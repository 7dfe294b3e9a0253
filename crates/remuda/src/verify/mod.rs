//! Verification mode and its checker. With the mode on ([`set_history`]), every state change
//! of every job is recorded in `remuda.history` by a trigger on the job table, the one place
//! every statement writes, and every change of a workflow run or node in
//! `remuda.run_history` the same way; off (the default), the triggers are not there and no
//! path pays anything. [`check`] holds that history and the tables against the state
//! machines ([`crate::JobState::may_become`], [`crate::workflow::WorkflowState::may_become`],
//! [`crate::workflow::NodeState::may_become`], their one definitions) and reports what must
//! never happen:
//!
//! - `illegal_transitions`: a change that is not a path of the state machine, or a recorded
//!   path with a gap (the state a change starts from is not where the last one ended, or the
//!   row is not where its history ends): a transition written around the one place;
//! - `accepted_twice`: one claim (attempt and fencing token) ended twice: an outcome
//!   accepted after another for the same run;
//! - `lost`: a job whose row is gone without a recorded deletion;
//! - `stuck`: a running job whose worker is gone, or silent past its `rescue_after` plus the
//!   slack given; a running run whose nodes have all ended; a timer overdue past the slack.

mod history;
pub mod model;
#[cfg(test)]
mod model_tests;
mod path;
mod report;
mod runs;

pub use history::set_history;
pub use report::{Finding, Report};

/// Holds the history and the tables against the state machines. `slack` is how long past its
/// own `rescue_after` a silent worker's running job may wait for its rescue before it counts
/// as stuck.
pub async fn check(db: &crate::db::Database, slack: std::time::Duration) -> crate::Result<Report> {
    let conn = db.conn().await?;
    let mut report = Report::default();
    history::check_jobs(&conn, slack, &mut report).await?;
    runs::check(&conn, slack, &mut report).await?;
    Ok(report)
}
