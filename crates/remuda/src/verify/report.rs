//! What the checker reports.

use serde::Serialize;

/// One thing the checker found: the job, or the run (and node), and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The job's id, for a job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<i64>,
    /// The run's id, for a run or one of its nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<i64>,
    /// The node, for a node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What was found, for people.
    pub what: String,
}

impl Finding {
    pub(super) fn of_job(job: i64, what: String) -> Finding {
        Finding {
            job: Some(job),
            run: None,
            node: None,
            what,
        }
    }

    /// What it is about: `job 5`, `run 3`, `run 3 node b`.
    pub fn subject(&self) -> String {
        match (self.job, self.run, &self.node) {
            (Some(job), _, _) => format!("job {job}"),
            (None, Some(run), Some(node)) => format!("run {run} node {node}"),
            (None, Some(run), None) => format!("run {run}"),
            _ => "?".into(),
        }
    }
}

/// What the checker found, by class; every class must be empty.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Jobs with a recorded history.
    pub jobs: usize,
    /// Workflow runs with a recorded history.
    pub workflows: usize,
    /// Changes the state machine does not allow, and gaps in a recorded path.
    pub illegal_transitions: Vec<Finding>,
    /// Claims whose run ended more than once.
    pub accepted_twice: Vec<Finding>,
    /// Jobs gone without a recorded deletion.
    pub lost: Vec<Finding>,
    /// Running jobs whose worker is gone or silent past its rescue_after and the slack; running
    /// runs whose nodes have all ended; timers overdue past the slack.
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
