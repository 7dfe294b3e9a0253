//! The workflow engine against its model (`remuda::verify::model`, written from the guide's
//! rules apart from the SQL): random definitions (every node type, every join, conditions,
//! maps, sub-workflows, `allow_failed_deps`, success policies, outputs) with random outcomes
//! and random job lengths, run by a real worker on PostgreSQL, each run's every decision and
//! value compared with the model's. A case that differs is shrunk (nodes removed one at a
//! time while it still differs) and shown whole.
//!
//! `REMUDA_MODEL_CASES` (default 300) and `REMUDA_MODEL_SEED` (default: new, printed) for
//! longer runs: `REMUDA_MODEL_CASES=5000 cargo nextest run -p remuda --test workflow_model`.

mod common;

use common::{fast_config, setup, start};
use remuda::verify::model::{decide, differences, value_differences, Outcome, World};
use remuda::verify::{check, set_history};
use remuda::workflow::{Condition, Join, MapSpec, NodeSpec, Nodes, SubWorkflow, WorkflowSpec};
use remuda::{JobContext, Task, TaskError, TaskOptions, Worker, WorkerConfig};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The one task of every case: it waits `delay_ms`, then returns `value` or fails with
/// `fail`; as a map element it returns its `item`, or fails with `E_AT_<index>` when its
/// index is in `fail_at`.
struct Act;

impl Task for Act {
    const KIND: &'static str = "act";
    type Args = Value;
    type Output = Value;

    fn options() -> TaskOptions {
        TaskOptions::default().max_attempts(1)
    }

    async fn run(&self, _ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        let delay = args["delay_ms"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        if let Some(index) = args["index"].as_i64() {
            let fail_at = args["fail_at"].as_array().cloned().unwrap_or_default();
            if fail_at.contains(&json!(index)) {
                return Err(TaskError::permanent(format!("E_AT_{index}"), "told to"));
            }
            return Ok(args["item"].clone());
        }
        if let Some(code) = args["fail"].as_str() {
            return Err(TaskError::permanent(code, "told to"));
        }
        Ok(args["value"].clone())
    }
}

/// What the model is told: each node's args (sub-workflows' nodes too) and the signals sent.
struct Case {
    spec: WorkflowSpec,
    signalled: BTreeSet<String>,
}

struct Told<'a> {
    args: BTreeMap<String, Value>,
    signalled: &'a BTreeSet<String>,
}

fn all_args(spec: &WorkflowSpec, into: &mut BTreeMap<String, Value>) {
    for (id, node) in &spec.nodes.0 {
        into.insert(id.clone(), node.args.clone().unwrap_or(Value::Null));
        if let Some(SubWorkflow::Inline(child)) = &node.workflow {
            all_args(child, into);
        }
    }
}

impl World for Told<'_> {
    fn outcome(&self, node: &str, _kind: &str, element: Option<(usize, &Value)>) -> Outcome {
        let args = &self.args[node];
        if let Some((index, item)) = element {
            let fail_at = args["fail_at"].as_array().cloned().unwrap_or_default();
            return if fail_at.contains(&json!(index)) {
                Outcome::Err(format!("E_AT_{index}"))
            } else {
                Outcome::Ok(item.clone())
            };
        }
        match args["fail"].as_str() {
            Some(code) => Outcome::Err(code.into()),
            None => Outcome::Ok(args["value"].clone()),
        }
    }

    fn signalled(&self, node: &str, _signal: &str) -> Option<Value> {
        self.signalled.contains(node).then(|| json!({ "to": node }))
    }
}

fn pick<'a, T>(rng: &mut fastrand::Rng, items: &'a [T]) -> &'a T {
    &items[rng.usize(..items.len())]
}

fn act(rng: &mut fastrand::Rng, value: Value, fails: bool) -> NodeSpec {
    let mut args = json!({ "value": value, "delay_ms": rng.u64(0..15) });
    if fails {
        args["fail"] = json!(pick(rng, &["E1", "E2"]));
    }
    NodeSpec::task("act", args)
}

/// The nodes a node's edges reach, transitively: where a condition may look.
fn upstream(nodes: &[(String, NodeSpec)], node: &NodeSpec) -> Vec<String> {
    let mut found: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = edges(node);
    while let Some(id) = todo.pop() {
        if found.insert(id.clone()) {
            if let Some((_, up)) = nodes.iter().find(|(n, _)| *n == id) {
                todo.extend(edges(up));
            }
        }
    }
    found.into_iter().collect()
}

fn edges(node: &NodeSpec) -> Vec<String> {
    let mut out = node.waits_for.clone();
    out.extend(node.args_from.values().cloned());
    out.extend(node.context_from.iter().cloned());
    out.extend(node.map.iter().map(|m| m.over.clone()));
    out
}

/// A random definition of 1 to 6 nodes, and the signal nodes that will be signalled.
fn random_case(rng: &mut fastrand::Rng, n: usize) -> Case {
    let mut nodes: Vec<(String, NodeSpec)> = Vec::new();
    let mut lists: Vec<String> = Vec::new();
    let mut signalled = BTreeSet::new();
    for i in 0..rng.usize(1..=6) {
        let id = format!("n{i}");
        let roll = rng.u32(..100);
        let mut node = match roll {
            0..=9 => {
                lists.push(id.clone());
                let items: Vec<Value> = (0..rng.usize(0..4)).map(|k| json!(k * 10)).collect();
                act(rng, json!({ "items": items, "tag": "list" }), false)
            }
            10..=21 if !lists.is_empty() => {
                let fail_at: Vec<usize> = (0..3).filter(|_| rng.u32(..100) < 20).collect();
                let mut node = NodeSpec::task(
                    "act",
                    json!({ "fail_at": fail_at, "delay_ms": rng.u64(0..10) }),
                );
                node.map = Some(MapSpec {
                    over: pick(rng, &lists).clone(),
                    pointer: "/items".into(),
                });
                node
            }
            22..=29 => NodeSpec {
                sleep: Some("30ms".into()),
                ..NodeSpec::default()
            },
            30..=37 => {
                let delivered = rng.u32(..100) < 80;
                if delivered {
                    signalled.insert(id.clone());
                }
                NodeSpec {
                    signal: Some(format!("sig_{id}")),
                    timeout: (!delivered).then(|| "300ms".into()),
                    ..NodeSpec::default()
                }
            }
            38..=45 => {
                let child: Vec<(String, NodeSpec)> = (0..rng.usize(1..=2))
                    .map(|j| {
                        let fails = rng.u32(..100) < 25;
                        (format!("{id}c{j}"), act(rng, json!({ "child": j }), fails))
                    })
                    .collect();
                NodeSpec {
                    workflow: Some(SubWorkflow::Inline(Box::new(WorkflowSpec {
                        name: "child".into(),
                        nodes: Nodes(child),
                        ..WorkflowSpec::default()
                    }))),
                    ..NodeSpec::default()
                }
            }
            _ => {
                let tag = *pick(rng, &["x", "y"]);
                let fails = rng.u32(..100) < 25;
                act(rng, json!({ "n": i, "tag": tag }), fails)
            }
        };
        if i > 0 {
            connect(rng, &nodes, &mut node);
        }
        nodes.push((id, node));
    }
    let ids: Vec<String> = nodes.iter().map(|(id, _)| id.clone()).collect();
    let mut spec = WorkflowSpec {
        name: format!("model_{}", n % 7),
        nodes: Nodes(nodes),
        ..WorkflowSpec::default()
    };
    if rng.u32(..100) < 15 {
        let cases = (0..rng.usize(1..=2))
            .map(|_| {
                (0..rng.usize(1..=2))
                    .map(|_| pick(rng, &ids).clone())
                    .collect()
            })
            .collect();
        spec.success = Some(cases);
    }
    if rng.u32(..100) < 40 {
        spec.output = Some(pick(rng, &ids).clone());
    }
    Case { spec, signalled }
}

/// Edges to earlier nodes, a join, `allow_failed_deps` and a condition, at random.
fn connect(rng: &mut fastrand::Rng, before: &[(String, NodeSpec)], node: &mut NodeSpec) {
    for _ in 0..rng.usize(0..=2) {
        let dep = pick(rng, before).0.clone();
        if !node.waits_for.contains(&dep) {
            node.waits_for.push(dep);
        }
    }
    if node.workflow.is_none() && rng.u32(..100) < 15 {
        node.args_from
            .insert("up".into(), pick(rng, before).0.clone());
    }
    if rng.u32(..100) < 10 {
        node.context_from.push(pick(rng, before).0.clone());
    }
    let counted = node.waits_for.len();
    if node.map.is_none() {
        match rng.u32(..100) {
            0..=14 if counted >= 2 => node.join = Join::Any,
            15..=29 if counted >= 2 => {
                node.join = Join::Quorum;
                node.min_success = Some(rng.usize(1..=counted) as i64);
            }
            _ => {}
        }
        node.allow_failed_deps = rng.u32(..100) < 20;
    }
    let up = upstream(before, node);
    if !up.is_empty() && rng.u32(..100) < 25 {
        let on = pick(rng, &up).clone();
        let condition = match rng.u32(..3) {
            0 => {
                let state: &&str = pick(rng, &["completed", "failed", "skipped"]);
                Condition::state(&on, state)
            }
            1 => {
                let code: &&str = pick(rng, &["E1", "E2"]);
                Condition::error_code(&on, code)
            }
            _ => Condition::result_contains(&on, json!({ "tag": pick(rng, &["x", "y"]) })),
        };
        if rng.bool() {
            node.run_if = Some(condition);
        } else {
            node.skip_if = Some(condition);
        }
    }
}

/// Runs every case at once with one worker and returns, per case, what differs from the
/// model (empty when nothing).
async fn run_cases(client: &remuda::Client, cases: &[Case]) -> Vec<Vec<String>> {
    let mut runs = Vec::new();
    for case in cases {
        let started = client
            .start_workflow_spec(&case.spec, &json!({ "input": 1 }), None)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{e}: {}",
                    serde_json::to_string(&case.spec).unwrap_or_default()
                )
            });
        for node in &case.signalled {
            // a run that already ended (its signal node skipped) takes no signal
            match client
                .signal_workflow(started.id, &format!("sig_{node}"), &json!({ "to": node }))
                .await
            {
                Ok(_) | Err(remuda::Error::WorkflowWrongState { .. }) => {}
                Err(e) => panic!("signal: {e}"),
            }
        }
        runs.push(started.id);
    }
    let mut found = Vec::new();
    for (case, id) in cases.iter().zip(runs) {
        let status = client
            .wait_workflow(id, Duration::from_secs(120))
            .await
            .expect("every case ends");
        let world = Told {
            args: {
                let mut args = BTreeMap::new();
                all_args(&case.spec, &mut args);
                args
            },
            signalled: &case.signalled,
        };
        let model = decide(&case.spec, &world).expect("modelled");
        let mut wrong = differences(&model, &status);
        wrong.extend(value_differences(&case.spec, &model, &status));
        found.push(wrong);
    }
    found
}

/// Smaller definitions: each with one node removed and every reference to it dropped.
fn smaller(case: &Case) -> Vec<Case> {
    let ids: Vec<String> = case.spec.nodes.0.iter().map(|(id, _)| id.clone()).collect();
    let mut out = Vec::new();
    for gone in &ids {
        let mut spec = case.spec.clone();
        spec.nodes.0.retain(|(id, _)| id != gone);
        if spec.nodes.0.is_empty() {
            continue;
        }
        for (_, node) in &mut spec.nodes.0 {
            node.waits_for.retain(|d| d != gone);
            node.args_from.retain(|_, d| d != gone);
            node.context_from.retain(|d| d != gone);
            if node.map.as_ref().is_some_and(|m| &m.over == gone) {
                node.map = None;
            }
            for condition in [&mut node.run_if, &mut node.skip_if] {
                if condition.as_ref().is_some_and(|c| &c.node == gone) {
                    *condition = None;
                }
            }
            if node.join == Join::Quorum
                && node.min_success.unwrap_or(1) as usize > node.waits_for.len()
            {
                node.join = Join::All;
                node.min_success = None;
            }
            if node.join == Join::Any && node.waits_for.is_empty() {
                node.join = Join::All;
            }
        }
        if let Some(success) = &mut spec.success {
            for case in success.iter_mut() {
                case.retain(|id| id != gone);
            }
            success.retain(|case| !case.is_empty());
            if success.is_empty() {
                spec.success = None;
            }
        }
        if spec.output.as_ref() == Some(gone) {
            spec.output = None;
        }
        let mut signalled = case.signalled.clone();
        signalled.remove(gone);
        // (a condition may look at a node that was upstream only through the one removed)
        if remuda::workflow::compile(&spec).is_ok() {
            out.push(Case { spec, signalled });
        }
    }
    out
}

/// The smallest case found that still differs, and how.
async fn shrink(
    client: &remuda::Client,
    mut case: Case,
    mut wrong: Vec<String>,
) -> (Case, Vec<String>) {
    'smaller: loop {
        for candidate in smaller(&case) {
            let found = run_cases(client, std::slice::from_ref(&candidate)).await;
            if !found[0].is_empty() {
                case = candidate;
                wrong = found[0].clone();
                continue 'smaller;
            }
        }
        return (case, wrong);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workflows_run_by_real_workers_end_as_the_model_decides() {
    let count: usize = std::env::var("REMUDA_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let seed: u64 = std::env::var("REMUDA_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("{count} cases, seed {seed} (REMUDA_MODEL_SEED={seed} repeats them)");
    let (db, client) = setup().await;
    set_history(&db.database().expect("pool"), true)
        .await
        .expect("history on");
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: 64,
                ..fast_config()
            })
            .register(Act),
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let cases: Vec<Case> = (0..count).map(|n| random_case(&mut rng, n)).collect();
    let mut failures = Vec::new();
    for chunk in cases.chunks(100) {
        for (case, wrong) in chunk.iter().zip(run_cases(&client, chunk).await) {
            if !wrong.is_empty() {
                failures.push((case, wrong));
            }
        }
    }
    if let Some((case, wrong)) = failures.first() {
        let copy = Case {
            spec: case.spec.clone(),
            signalled: case.signalled.clone(),
        };
        let (small, why) = shrink(&client, copy, wrong.clone()).await;
        worker.shutdown().await;
        panic!(
            "{} of {count} cases differ from the model (seed {seed}); the first, shrunk to {} nodes:\n{}\nsignalled: {:?}\n{}",
            failures.len(),
            small.spec.nodes.0.len(),
            serde_json::to_string_pretty(&small.spec).unwrap_or_default(),
            small.signalled,
            why.join("\n")
        );
    }
    worker.shutdown().await;
    let report = check(&db.database().expect("pool"), Duration::from_secs(5))
        .await
        .expect("check");
    assert!(report.is_clean(), "{report:#?}");
}
