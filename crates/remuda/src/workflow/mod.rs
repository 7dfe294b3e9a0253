//! Workflows: DAGs of nodes run as jobs in the same PostgreSQL, advanced in the transaction
//! that writes each node's end (the finalization seam's `workflow` hook, migration 11).
//!
//! ```text
//!   node:  pending ──(dependencies decided: run)──► running ──► completed | failed
//!             │                                        └──(cancel)──► cancelled
//!             └──(dependency failed, condition unmet)──► skipped
//!   run:   running ⇄ paused (pause / resume; on_error = pause) ──► completed | failed | cancelled
//!                   failed | cancelled ──(retry: only what did not complete)──► running
//! ```
//! A definition ([`WorkflowSpec`], from a spec file or the [`Workflow`] builder) is checked
//! whole and compiled ([`compile()`]); each run stores the compiled snapshot and its hash.
//! Node kinds: tasks (one job), maps (one job per element of an upstream list), sleeps
//! (durable timers), signals (wait for [`Client::signal_workflow`](crate::Client::signal_workflow)) and sub-workflows.

mod builder;
mod compile;
mod spec;
mod status;
mod store;
#[cfg(test)]
mod tests;

pub use builder::{NodeRef, Workflow};
pub use compile::{compile, SpecErrors, INPUT};
pub use spec::{Condition, Join, MapSpec, NodeSpec, Nodes, OnError, SubWorkflow, WorkflowSpec};
pub use status::{
    NodeState, NodeStatus, WorkflowContext, WorkflowState, WorkflowStatus, WorkflowSummary,
};
pub use store::{Started, WorkflowFilter, WorkflowHandle};

/// The flag bit of a workflow node's job (see migration 8): its ends go through the seam.
pub const NODE_FLAG: i32 = 2;
