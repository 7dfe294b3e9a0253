//! Runs and nodes as stored: their states, what `status` and `list` show, and what a node's
//! task learns of its run.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowState {
    /// Nodes start as their dependencies allow.
    Running,
    /// No node starts (running ones finish) until it is resumed.
    Paused,
    /// Final: its success policy held (by default: no node failed).
    Completed,
    /// Final until retried: a node failed, or its deadline passed.
    Failed,
    /// Final until retried: it was cancelled.
    Cancelled,
}

/// Where a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Waiting for its dependencies (or for its run to resume).
    Pending,
    /// Started: its job exists, its timer runs, its signal or sub-workflow is awaited.
    Running,
    /// Final: it succeeded; its result is kept for its dependents.
    Completed,
    /// Final: it failed (its job's last error, a map element, a timeout).
    Failed,
    /// Final: its condition did not hold, or a dependency failed.
    Skipped,
    /// Final: its run was cancelled, or its job was.
    Cancelled,
}

macro_rules! named_states {
    ($t:ty, $what:literal, [$($v:ident => $s:literal),*]) => {
        impl $t {
            /// The lowercase name, as stored and shown.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok(Self::$v),)*
                    _ => Err(format!(concat!("unknown ", $what, " state {:?}: expected one of {}"),
                                     s, [$($s),*].join(", "))),
                }
            }
        }
    };
}

named_states!(WorkflowState, "workflow", [Running => "running", Paused => "paused",
    Completed => "completed", Failed => "failed", Cancelled => "cancelled"]);
named_states!(NodeState, "node", [Pending => "pending", Running => "running",
    Completed => "completed", Failed => "failed", Skipped => "skipped", Cancelled => "cancelled"]);

impl WorkflowState {
    /// True once the run has ended (a retry can still revive a failed or cancelled one).
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// A run's state machine (`None`: started, or deleted), the one definition the history
    /// checker holds recorded runs against:
    /// - started `running` (or `paused`, under a paused parent);
    /// - `running` → `paused`, and any end; `paused` → `running`, and any end (cancel, the
    ///   deadline; a run whose last node ended while it was paused ends so);
    /// - `failed` or `cancelled` → `running` or `paused` (a retry);
    /// - deleted once ended (retention, with its nodes).
    pub fn may_become(from: Option<Self>, to: Option<Self>) -> bool {
        use WorkflowState::*;
        match (from, to) {
            (None, Some(to)) => matches!(to, Running | Paused),
            (Some(from), None) => from.is_final(),
            (Some(Running), Some(to)) => to != Running,
            (Some(Paused), Some(to)) => to != Paused,
            (Some(Failed | Cancelled), Some(to)) => matches!(to, Running | Paused),
            _ => false,
        }
    }
}

impl NodeState {
    /// True once the node is decided (a run's retry can still run a failed or cancelled
    /// node again, and what it skipped).
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// A node's state machine (`None`: created with its run, or deleted with it), the one
    /// definition the history checker holds recorded nodes against:
    /// - created `pending`;
    /// - `pending` → `running` (started), `skipped` (its condition, a failed dependency),
    ///   `failed` (it could not start), `cancelled` (its run's cancel);
    /// - `running` → `completed`, `failed`, `cancelled`;
    /// - `failed`, `cancelled` or `skipped` → `pending` or `running` (a run's retry);
    /// - deleted with its run.
    pub fn may_become(from: Option<Self>, to: Option<Self>) -> bool {
        use NodeState::*;
        match (from, to) {
            (None, Some(to)) => to == Pending,
            (Some(_), None) => true,
            (Some(Pending), Some(to)) => matches!(to, Running | Skipped | Failed | Cancelled),
            (Some(Running), Some(to)) => matches!(to, Completed | Failed | Cancelled),
            (Some(Failed | Cancelled | Skipped), Some(to)) => matches!(to, Pending | Running),
            _ => false,
        }
    }
}

/// A run as `remuda workflow status` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkflowStatus {
    /// The run's id.
    pub id: i64,
    /// Its definition's name.
    pub name: String,
    /// Where it is.
    pub state: WorkflowState,
    /// The input it was started with.
    pub input: Value,
    /// The output node's ok result, once it completed.
    pub output: Option<Value>,
    /// The first failure (`node`, `code`, `message`), or why it was stopped.
    pub error: Option<Value>,
    /// The run that started it, for a sub-workflow.
    pub parent_id: Option<i64>,
    /// The fair-share group its jobs take (`None`: none).
    pub group: Option<String>,
    /// When it was started.
    pub created_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Its nodes by id.
    pub nodes: BTreeMap<String, NodeStatus>,
}

impl WorkflowStatus {
    /// The nodes in the graph's order (dependencies before their dependents), not by name.
    pub fn nodes_in_order(&self) -> Vec<(&String, &NodeStatus)> {
        let mut nodes: Vec<_> = self.nodes.iter().collect();
        nodes.sort_by_key(|(_, n)| n.position);
        nodes
    }
}

/// A node as `status` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeStatus {
    /// `task`, `map`, `sleep`, `signal` or `workflow`.
    #[serde(rename = "type")]
    pub node_type: String,
    /// Its place in the graph's topological order (the order the definition lists nodes in,
    /// dependencies first): [`WorkflowStatus::nodes_in_order`] lists them so.
    pub position: i32,
    /// The nodes it waits for (the graph's edges).
    pub deps: Vec<String>,
    /// Where it is.
    pub state: NodeState,
    /// Why it was skipped or cancelled: `condition`, `dependency`, `cancel`.
    pub reason: Option<String>,
    /// Its latest job (task nodes).
    pub job_id: Option<i64>,
    /// How many times it was started.
    pub attempt: i32,
    /// Its tagged result (`{"ok": …}` or `{"err": …}`): for a map, `{"ok": [each element's
    /// value]}`, or an error whose `data` lists each element's tagged result.
    pub result: Option<Value>,
    /// Its error (`code`, `message`, `data`), when it failed.
    pub error: Option<Value>,
    /// When it last started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// A map's elements: how many jobs in each state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<BTreeMap<String, i64>>,
    /// A sub-workflow node's run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<i64>,
}

/// A run as `remuda workflow list` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkflowSummary {
    /// The run's id.
    pub id: i64,
    /// Its definition's name.
    pub name: String,
    /// Where it is.
    pub state: WorkflowState,
    /// The run that started it, for a sub-workflow.
    pub parent_id: Option<i64>,
    /// When it was started.
    pub created_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// How many of its nodes are in each state.
    pub nodes: BTreeMap<String, i64>,
}

/// What a node's task knows of its run ([`crate::JobContext::workflow`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowContext {
    /// The run's id.
    pub id: i64,
    /// The node's id.
    pub node: String,
    /// A map element's index in its list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
    /// The tagged results of the node's `context_from` nodes, by node id.
    #[serde(default)]
    pub context: BTreeMap<String, Value>,
}
