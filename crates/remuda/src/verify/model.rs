//! A model of the workflow engine, written from the rules the guide states (docs/workflows.md:
//! "Edges, joins and conditions", "Runs", "Results"), apart from the SQL that implements them:
//! given a definition and what each job would return, it decides every node and the run's
//! end. A run's final decisions do not depend on the order its jobs ended in, so the model
//! decides the nodes one after another in an order where each comes after what it reads;
//! whatever order real workers finished in, the run must end as the model says.
//!
//! Modelled: task, map, sleep, signal and inline sub-workflow nodes; `all`, `any` and
//! `quorum` joins; `allow_failed_deps`; `run_if` / `skip_if`; `success` policies; `output`;
//! `on_error = "fail"`. Not modelled (a run using them is not compared): `on_error =
//! "pause"`, deadlines, timeouts, and sub-workflows named by path.

use crate::workflow::{Condition, Join, NodeSpec, OnError, SubWorkflow, WorkflowSpec};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What one job returns: an ok value, or an error code.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The task returned this value.
    Ok(Value),
    /// The task failed for good with this code.
    Err(String),
}

/// What the world does to a run: each job's outcome, and which signals arrive.
pub trait World {
    /// The outcome of the job of task node `node` (a map element: `index` and `item`) running
    /// `kind` with `args`.
    fn outcome(&self, node: &str, kind: &str, element: Option<(usize, &Value)>) -> Outcome;
    /// The payload of the signal that signal node `node` receives, if it arrives (else, with
    /// a timeout, the node fails with `SIGNAL_TIMEOUT`; a signal node that is never signalled
    /// and has no timeout keeps its run running).
    fn signalled(&self, node: &str, signal: &str) -> Option<Value>;
}

/// A node's end in the model.
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    /// Ran and completed with this value.
    Completed(Value),
    /// Ran and failed with this code.
    Failed(String),
    /// Never ran.
    Skipped,
    /// Started and waits for ever (a signal that never comes, without a timeout).
    Waiting,
    /// Never starts: what it waits for or reads never ends.
    Pending,
}

impl Decided {
    /// The node state's name, as the engine names it.
    pub fn state(&self) -> &'static str {
        match self {
            Decided::Completed(_) => "completed",
            Decided::Failed(_) => "failed",
            Decided::Skipped => "skipped",
            Decided::Waiting => "running",
            Decided::Pending => "pending",
        }
    }

    fn is_final(&self) -> bool {
        !matches!(self, Decided::Waiting | Decided::Pending)
    }
}

/// A run's end in the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRun {
    /// Each node's decision, by id.
    pub nodes: BTreeMap<String, Decided>,
    /// `completed`, `failed`, or `running` (a node waits for ever).
    pub state: &'static str,
    /// The output node's ok value (`null` when there is none or it did not complete), also
    /// for a run that failed.
    pub output: Value,
}

/// Why the model cannot say how a definition ends.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not modelled: {0}")]
pub struct NotModelled(pub String);

/// Decides every node of `spec` and the run's end.
pub fn decide(spec: &WorkflowSpec, world: &dyn World) -> Result<ModelRun, NotModelled> {
    if spec.on_error == OnError::Pause {
        return Err(NotModelled("on_error = \"pause\"".into()));
    }
    if spec.deadline.is_some() {
        return Err(NotModelled("a run deadline".into()));
    }
    let mut nodes: BTreeMap<String, Decided> = BTreeMap::new();
    let mut pending: Vec<&(String, NodeSpec)> = spec.nodes.0.iter().collect();
    while !pending.is_empty() {
        let ready = pending
            .iter()
            .position(|(_, node)| reads(node).iter().all(|d| nodes.contains_key(*d)))
            .ok_or_else(|| NotModelled("a cycle or an unknown node".into()))?;
        let (id, node) = pending.remove(ready);
        let decided = decide_node(id, node, &nodes, world)?;
        nodes.insert(id.clone(), decided);
    }
    let state = run_state(spec, &nodes);
    let output = match spec.output.as_ref().and_then(|o| nodes.get(o)) {
        Some(Decided::Completed(value)) => value.clone(),
        _ => Value::Null,
    };
    Ok(ModelRun {
        nodes,
        state,
        output,
    })
}

/// Every node a node reads or waits for: it is decided after all of them.
fn reads(node: &NodeSpec) -> Vec<&str> {
    let mut out: Vec<&str> = dependencies(node);
    for c in node.run_if.iter().chain(&node.skip_if) {
        if !out.contains(&c.node.as_str()) {
            out.push(&c.node);
        }
    }
    out
}

/// A node's dependencies, as the guide names them: what it waits for, takes args or
/// context from, or maps over.
fn dependencies(node: &NodeSpec) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let named = node
        .waits_for
        .iter()
        .chain(node.args_from.values().filter(|s| *s != "$input"))
        .chain(&node.context_from)
        .chain(node.map.iter().map(|m| &m.over));
    for name in named {
        if !out.contains(&name.as_str()) {
            out.push(name);
        }
    }
    out
}

fn decide_node(
    id: &str,
    node: &NodeSpec,
    nodes: &BTreeMap<String, Decided>,
    world: &dyn World,
) -> Result<Decided, NotModelled> {
    if node.timeout.is_some() && node.signal.is_none() || node.deadline.is_some() {
        return Err(NotModelled(format!("node {id}: a timeout or deadline")));
    }
    let deps = dependencies(node);
    match joined(node, &deps, nodes) {
        Some(true) => {}
        Some(false) => return Ok(Decided::Skipped),
        None => return Ok(Decided::Pending),
    }
    for (condition, wanted) in node
        .run_if
        .iter()
        .map(|c| (c, true))
        .chain(node.skip_if.iter().map(|c| (c, false)))
    {
        let upstream = &nodes[&condition.node];
        if !upstream.is_final() {
            return Ok(Decided::Pending);
        }
        if holds(condition, upstream) != wanted {
            return Ok(Decided::Skipped);
        }
    }
    run(id, node, nodes, world)
}

/// Whether a node's join lets it run (`None`: not decided, ever, because what it needs never
/// ends). `all` decides once every dependency has ended; `any` and `quorum` as soon as
/// enough of the nodes they count completed, or once that cannot happen, the nodes they
/// only take args or context from (joined as by `all`) having ended. With
/// `allow_failed_deps` a node runs once its dependencies have ended, whatever their ends.
fn joined(node: &NodeSpec, deps: &[&str], nodes: &BTreeMap<String, Decided>) -> Option<bool> {
    let completed = |d: &&str| matches!(nodes[*d], Decided::Completed(_));
    let ended = |d: &&str| nodes[*d].is_final();
    let counted: Vec<&str> = if node.waits_for.is_empty() {
        deps.to_vec()
    } else {
        node.waits_for.iter().map(String::as_str).collect()
    };
    let needed = match node.join {
        _ if node.allow_failed_deps => return deps.iter().all(ended).then_some(true),
        Join::All => return deps.iter().all(ended).then(|| deps.iter().all(completed)),
        Join::Any => 1,
        Join::Quorum => node.min_success.unwrap_or(1).max(1) as usize,
    };
    let others: Vec<&str> = deps
        .iter()
        .copied()
        .filter(|d| !counted.contains(d))
        .collect();
    if !others.iter().all(ended) {
        return None;
    }
    if !others.iter().all(completed) {
        return Some(false);
    }
    let ok = counted.iter().filter(|d| completed(d)).count();
    let open = counted.iter().filter(|d| !ended(d)).count();
    if ok >= needed {
        Some(true)
    } else if ok + open < needed {
        Some(false)
    } else {
        None
    }
}

fn holds(condition: &Condition, upstream: &Decided) -> bool {
    if let Some(state) = &condition.state {
        return upstream.state() == state;
    }
    if let Some(code) = &condition.error_code {
        return matches!(upstream, Decided::Failed(c) if c == code);
    }
    if let Some(wanted) = &condition.result_contains {
        return matches!(upstream, Decided::Completed(v) if contains(v, wanted));
    }
    false
}

/// PostgreSQL's jsonb `@>`: objects contain their sub-objects, arrays any of their elements'
/// containers, scalars themselves; and at the top level only, an array contains a scalar it
/// holds.
pub fn contains(value: &Value, wanted: &Value) -> bool {
    match (value, wanted) {
        (Value::Array(have), scalar) if !scalar.is_object() && !scalar.is_array() => {
            have.contains(scalar)
        }
        _ => nested_contains(value, wanted),
    }
}

fn nested_contains(value: &Value, wanted: &Value) -> bool {
    match (value, wanted) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(k, w)| have.get(k).is_some_and(|h| nested_contains(h, w))),
        (Value::Array(have), Value::Array(want)) => want.iter().all(|w| {
            have.iter()
                .any(|h| nested_contains(h, w) && (h.is_array() == w.is_array()))
        }),
        (a, b) => a == b,
    }
}

fn run(
    id: &str,
    node: &NodeSpec,
    nodes: &BTreeMap<String, Decided>,
    world: &dyn World,
) -> Result<Decided, NotModelled> {
    if node.sleep.is_some() {
        return Ok(Decided::Completed(Value::Null));
    }
    if let Some(signal) = &node.signal {
        return Ok(if let Some(payload) = world.signalled(id, signal) {
            Decided::Completed(payload)
        } else if node.timeout.is_some() {
            Decided::Failed("SIGNAL_TIMEOUT".into())
        } else {
            Decided::Waiting
        });
    }
    if let Some(child) = &node.workflow {
        let SubWorkflow::Inline(child) = child else {
            return Err(NotModelled(format!(
                "node {id}: a sub-workflow named by path"
            )));
        };
        let ended = decide(child, world)?;
        return Ok(match ended.state {
            "completed" => {
                Decided::Completed(json!({ "state": "completed", "output": ended.output }))
            }
            "failed" => Decided::Failed("WORKFLOW_FAILED".into()),
            _ => Decided::Waiting,
        });
    }
    let kind = node.kind.as_deref().unwrap_or_default();
    let Some(map) = &node.map else {
        return Ok(decided(world.outcome(id, kind, None)));
    };
    let Decided::Completed(over) = &nodes[&map.over] else {
        return Ok(Decided::Failed("MAP_NOT_A_LIST".into()));
    };
    let Some(Value::Array(items)) = over.pointer(&map.pointer) else {
        return Ok(Decided::Failed("MAP_NOT_A_LIST".into()));
    };
    let mut values = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match world.outcome(id, kind, Some((index, item))) {
            Outcome::Ok(value) => values.push(value),
            Outcome::Err(code) => return Ok(Decided::Failed(code)),
        }
    }
    Ok(Decided::Completed(Value::Array(values)))
}

/// How a run as it stands differs from the model's decisions: its state, and each node's;
/// empty when they agree.
pub fn differences(model: &ModelRun, run: &crate::workflow::WorkflowStatus) -> Vec<String> {
    let mut wrong = Vec::new();
    let state = run.state.as_str();
    if model.state != state {
        wrong.push(format!(
            "the run is {state}, the model says {}",
            model.state
        ));
    }
    for (node, decided) in &model.nodes {
        let actual = run.nodes.get(node).map(|n| n.state.as_str());
        if actual != Some(decided.state()) {
            let expected = match decided {
                Decided::Failed(code) => format!("failed ({code})"),
                other => other.state().to_string(),
            };
            wrong.push(format!(
                "node {node} is {}, the model says {expected}",
                actual.unwrap_or("missing")
            ));
        }
    }
    wrong
}

/// How the values of a run differ from the model's: each completed node's ok value and each
/// failed node's error code (a sub-workflow's summary is not compared: the model does not
/// count its nodes), and the run's output. For worlds whose values are known exactly.
pub fn value_differences(
    spec: &WorkflowSpec,
    model: &ModelRun,
    run: &crate::workflow::WorkflowStatus,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (node, decided) in &model.nodes {
        let Some(status) = run.nodes.get(node) else {
            continue;
        };
        if status.node_type == "workflow" {
            continue;
        }
        let actual = status.result.clone().unwrap_or(Value::Null);
        match decided {
            Decided::Completed(value) if actual.get("ok") != Some(value) => wrong.push(format!(
                "node {node} returned {actual}, the model says {{\"ok\":{value}}}"
            )),
            Decided::Failed(code) if actual.pointer("/err/code") != Some(&json!(code)) => wrong
                .push(format!(
                    "node {node} ended with {actual}, the model says error {code}"
                )),
            _ => {}
        }
    }
    let output_node = spec.output.as_ref().and_then(|o| run.nodes.get(o));
    let compared = output_node.is_some_and(|n| n.node_type != "workflow");
    let actual = run.output.clone().unwrap_or(Value::Null);
    if compared && model.state != "running" && actual != model.output {
        wrong.push(format!(
            "the run's output is {actual}, the model says {}",
            model.output
        ));
    }
    wrong
}

fn decided(outcome: Outcome) -> Decided {
    match outcome {
        Outcome::Ok(value) => Decided::Completed(value),
        Outcome::Err(code) => Decided::Failed(code),
    }
}

/// The run's end once its nodes are decided: a success policy completes it when every node
/// of any one case completed; without one, it completes when no node failed.
fn run_state(spec: &WorkflowSpec, nodes: &BTreeMap<String, Decided>) -> &'static str {
    if nodes.values().any(|d| !d.is_final()) {
        return "running";
    }
    let completed = |id: &String| matches!(nodes.get(id), Some(Decided::Completed(_)));
    let ok = match &spec.success {
        Some(cases) => cases.iter().any(|case| case.iter().all(completed)),
        None => !nodes.values().any(|d| matches!(d, Decided::Failed(_))),
    };
    if ok {
        "completed"
    } else {
        "failed"
    }
}
