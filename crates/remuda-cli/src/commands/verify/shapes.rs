//! The random workflow definitions of a verification run, and what their jobs return: the
//! world the workflow model decides each run in. The kinds are the run's command tasks
//! (`record`, `flaky`, `slow`, `fail`, `items`; see `tasks.rs`), whose outcomes do not
//! depend on timing: `flaky` fails its first attempt and completes the next.

use remuda::verify::model::{Outcome, World};
use remuda::workflow::{Join, MapSpec, NodeSpec, Nodes, SubWorkflow, WorkflowSpec};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A definition, and the signals the run will be sent: node → payload (a node left out is
/// never signalled and fails at its timeout).
pub struct Shape {
    pub spec: WorkflowSpec,
    pub signals: BTreeMap<String, (String, Value)>,
}

/// What the run's kinds return.
pub struct Kinds<'a> {
    pub signals: &'a BTreeMap<String, (String, Value)>,
}

impl World for Kinds<'_> {
    fn outcome(&self, _node: &str, kind: &str, _element: Option<(usize, &Value)>) -> Outcome {
        match kind {
            "fail" => Outcome::Err("EXIT_4".into()),
            "items" => Outcome::Ok(json!({ "items": [0, 1, 2] })),
            _ => Outcome::Ok(Value::Null),
        }
    }

    fn signalled(&self, node: &str, _signal: &str) -> Option<Value> {
        self.signals.get(node).map(|(_, payload)| payload.clone())
    }
}

fn task_kind(rng: &mut fastrand::Rng) -> &'static str {
    match rng.u32(..100) {
        0..=49 => "record",
        50..=64 => "flaky",
        65..=74 => "slow",
        75..=89 => "fail",
        _ => "items",
    }
}

/// A random definition of 2 to 7 nodes: tasks, maps over an `items` node, sleeps, signals
/// and small inline sub-workflows, joined in every way, some allowing failed dependencies.
pub fn random(rng: &mut fastrand::Rng, n: u64) -> Shape {
    let count = rng.usize(2..=7);
    let mut nodes: Vec<(String, NodeSpec)> = Vec::new();
    let mut signals = BTreeMap::new();
    for i in 0..count {
        let id = format!("n{i}");
        let mut node = pick_node(rng, &nodes, &id, &mut signals);
        if i > 0 {
            let wanted = rng.usize(0..=2.min(i));
            for _ in 0..wanted {
                let dep = nodes[rng.usize(..i)].0.clone();
                if !node.waits_for.contains(&dep)
                    && node.map.as_ref().map(|m| &m.over) != Some(&dep)
                {
                    node.waits_for.push(dep);
                }
            }
            join(rng, &mut node);
        }
        nodes.push((id, node));
    }
    Shape {
        spec: WorkflowSpec {
            name: format!("verify_{}", n % 5),
            nodes: Nodes(nodes),
            ..WorkflowSpec::default()
        },
        signals,
    }
}

fn pick_node(
    rng: &mut fastrand::Rng,
    before: &[(String, NodeSpec)],
    id: &str,
    signals: &mut BTreeMap<String, (String, Value)>,
) -> NodeSpec {
    let items: Vec<&String> = before
        .iter()
        .filter(|(_, n)| n.kind.as_deref() == Some("items") && n.map.is_none())
        .map(|(id, _)| id)
        .collect();
    match rng.u32(..100) {
        0..=11 if !items.is_empty() => {
            let mut node = NodeSpec::task(["record", "flaky", "fail"][rng.usize(..3)], json!({}));
            node.map = Some(MapSpec {
                over: items[rng.usize(..items.len())].clone(),
                pointer: "/items".into(),
            });
            node
        }
        12..=21 => NodeSpec {
            sleep: Some(["300ms", "1s"][rng.usize(..2)].into()),
            ..NodeSpec::default()
        },
        22..=31 => {
            let name = format!("go_{id}");
            let delivered = rng.u32(..100) < 85;
            if delivered {
                signals.insert(id.to_string(), (name.clone(), json!({ "node": id })));
            }
            NodeSpec {
                signal: Some(name),
                timeout: (!delivered).then(|| "2s".to_string()),
                ..NodeSpec::default()
            }
        }
        32..=36 => {
            let child: Vec<(String, NodeSpec)> = (0..rng.usize(1..=2))
                .map(|j| {
                    let kind = match task_kind(rng) {
                        "items" => "record",
                        kind => kind,
                    };
                    (format!("c{j}"), NodeSpec::task(kind, json!({})))
                })
                .collect();
            NodeSpec {
                workflow: Some(SubWorkflow::Inline(Box::new(WorkflowSpec {
                    name: "verify_child".into(),
                    nodes: Nodes(child),
                    ..WorkflowSpec::default()
                }))),
                ..NodeSpec::default()
            }
        }
        _ => NodeSpec::task(task_kind(rng), json!({})),
    }
}

/// A join for a node that waits for others: mostly all, sometimes any or a quorum, and
/// sometimes running despite failed dependencies.
fn join(rng: &mut fastrand::Rng, node: &mut NodeSpec) {
    let counted =
        node.waits_for.len() + usize::from(node.map.is_some() && node.waits_for.is_empty());
    match rng.u32(..100) {
        0..=14 if counted >= 2 && node.map.is_none() => node.join = Join::Any,
        15..=29 if counted >= 2 && node.map.is_none() => {
            node.join = Join::Quorum;
            node.min_success = Some(rng.usize(1..=counted) as i64);
        }
        30..=49 if node.map.is_none() => node.allow_failed_deps = true,
        _ => {}
    }
}
