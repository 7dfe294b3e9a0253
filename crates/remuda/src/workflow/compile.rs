//! Checking a definition whole and compiling it into the snapshot a run stores: nodes in
//! topological order, each with its dependencies and dependents, durations in
//! milliseconds, sub-workflows compiled in place. Every problem is listed, with where it is.

use super::spec::{Condition, Join, NodeSpec, SubWorkflow, WorkflowSpec};
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};

/// The arg source that means the run's input.
pub const INPUT: &str = "$input";

/// What is wrong with a definition: every problem found, each saying where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid workflow definition: {}", .problems.join("; "))]
pub struct SpecErrors {
    /// The problems, one sentence each.
    pub problems: Vec<String>,
}

/// Checks `spec` and compiles it: the JSON a run stores and advances by.
pub fn compile(spec: &WorkflowSpec) -> Result<Value, SpecErrors> {
    let mut problems = Vec::new();
    let compiled = compile_into(spec, "", &mut problems);
    if problems.is_empty() {
        Ok(compiled)
    } else {
        Err(SpecErrors { problems })
    }
}

fn compile_into(spec: &WorkflowSpec, at: &str, problems: &mut Vec<String>) -> Value {
    let mut say = |text: String| problems.push(format!("{at}{text}"));
    if spec.name.trim().is_empty() {
        say("the workflow has no name: set `name`".into());
    }
    if spec.nodes.0.is_empty() {
        say("the workflow has no nodes: add a [nodes.ID] table".into());
    }
    let mut seen = HashSet::new();
    for (id, _) in &spec.nodes.0 {
        if id.trim().is_empty() {
            say("a node has an empty id: name each node ([nodes.NAME] in a spec file)".into());
        } else if id.starts_with('$') {
            say(format!(
                "node id {id:?} starts with $, which marks remuda's own references: rename the node"
            ));
        }
        if !seen.insert(id.as_str()) {
            say(format!(
                "node {id} is defined twice: node ids must be unique"
            ));
        }
    }
    let known: HashMap<&str, &NodeSpec> =
        spec.nodes.0.iter().map(|(i, n)| (i.as_str(), n)).collect();
    let deps: Vec<Vec<String>> = spec
        .nodes
        .0
        .iter()
        .map(|(_, n)| dependencies(n, true))
        .collect();
    // what is upstream of a node without its conditions' edges: a condition must look at a
    // node that is upstream by the others
    let edges: Vec<Vec<String>> = spec
        .nodes
        .0
        .iter()
        .map(|(_, n)| dependencies(n, false))
        .collect();
    for (id, node) in &spec.nodes.0 {
        // a node without a usable id was said above: what it holds is checked once renamed
        if !id.trim().is_empty() && !id.starts_with('$') {
            check_node(id, node, &known, &mut say);
        }
    }
    for name in spec.output.iter() {
        if !known.contains_key(name.as_str()) {
            say(format!("output names node {name}, which does not exist"));
        }
    }
    for case in spec.success.iter().flatten() {
        for name in case {
            if !known.contains_key(name.as_str()) {
                say(format!(
                    "the success policy names node {name}, which does not exist"
                ));
            }
        }
    }
    let deadline_ms = duration_ms(
        spec.deadline.as_deref(),
        "the workflow's deadline",
        &mut say,
    );
    let notify = spec
        .notify
        .as_ref()
        .and_then(|target| match target.validate() {
            Ok(()) => Some(target.stored()),
            Err(e) => {
                say(format!("notify: {e}"));
                None
            }
        });
    // each node's place in the declaration, by id
    let index: HashMap<&str, usize> = spec
        .nodes
        .0
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (id.as_str(), i))
        .collect();
    let order = topological(spec, &deps, &index, &mut say);
    let ancestors = ancestors(&edges, &index, &order);
    for (i, (id, node)) in spec.nodes.0.iter().enumerate() {
        for (what, cond) in [("run_if", &node.run_if), ("skip_if", &node.skip_if)] {
            let Some(cond) = cond else { continue };
            if known.contains_key(cond.node.as_str()) && !ancestors[i].contains(cond.node.as_str())
            {
                say(format!(
                    "node {id}: {what} looks at node {}, which is not upstream of it: add it to waits_for",
                    cond.node
                ));
            }
        }
    }
    let mut nodes = Vec::new();
    for &i in &order {
        let (id, node) = &spec.nodes.0[i];
        let dependents: Vec<&str> = order
            .iter()
            .filter(|&&j| deps[j].contains(id))
            .map(|&j| spec.nodes.0[j].0.as_str())
            .collect();
        let child_at = format!("{at}node {id} (sub-workflow): ");
        let child = match &node.workflow {
            Some(SubWorkflow::Inline(child)) => Some(compile_into(child, &child_at, problems)),
            _ => None,
        };
        nodes.push(compiled_node(id, node, &deps[i], &dependents, child));
    }
    let mut out = Map::new();
    out.insert("name".into(), json!(spec.name));
    out.insert("on_error".into(), json!(spec.on_error));
    if let Some(output) = &spec.output {
        out.insert("output".into(), json!(output));
    }
    if let Some(success) = &spec.success {
        out.insert("success".into(), json!(success));
    }
    if let Some(ms) = deadline_ms {
        out.insert("deadline_ms".into(), json!(ms));
    }
    if let Some(target) = notify {
        out.insert("notify".into(), target);
    }
    out.insert("nodes".into(), Value::Array(nodes));
    Value::Object(out)
}

/// A node's direct dependencies: what it waits for, takes args or context from, maps over,
/// or looks at in a condition, each once, in the order first named.
fn dependencies(node: &NodeSpec, with_conditions: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let named = node
        .waits_for
        .iter()
        .chain(node.args_from.values().filter(|s| *s != INPUT))
        .chain(&node.context_from)
        .chain(node.map.iter().map(|m| &m.over))
        // a condition is judged once its node has ended
        .chain(
            node.run_if
                .iter()
                .chain(&node.skip_if)
                .filter(|_| with_conditions)
                .map(|c| &c.node),
        );
    for name in named {
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

/// The nodes an any or quorum join counts: those it waits for (all it takes args or context
/// from or maps over when it names none; never the nodes only its conditions look at). The
/// others, which it only takes args or context from, must end first.
fn join_on(node: &NodeSpec) -> Vec<String> {
    if node.waits_for.is_empty() {
        return dependencies(node, false);
    }
    let mut once: Vec<String> = Vec::new();
    for name in &node.waits_for {
        if !once.contains(name) {
            once.push(name.clone());
        }
    }
    once
}

fn node_type(node: &NodeSpec) -> Result<&'static str, String> {
    let given: Vec<&str> = [
        node.kind.as_ref().map(|_| "kind"),
        node.sleep.as_ref().map(|_| "sleep"),
        node.signal.as_ref().map(|_| "signal"),
        node.workflow.as_ref().map(|_| "workflow"),
    ]
    .into_iter()
    .flatten()
    .collect();
    match given.as_slice() {
        ["kind"] if node.map.is_some() => Ok("map"),
        ["kind"] => Ok("task"),
        [_] if node.map.is_some() => Err("map needs a kind (the task each element runs)".into()),
        ["sleep"] => Ok("sleep"),
        ["signal"] => Ok("signal"),
        ["workflow"] => Ok("workflow"),
        [] => Err("give it one of kind, sleep, signal or workflow".into()),
        many => Err(format!("it has {}: give only one", many.join(" and "))),
    }
}

fn check_node(
    id: &str,
    node: &NodeSpec,
    known: &HashMap<&str, &NodeSpec>,
    say: &mut impl FnMut(String),
) {
    if let Err(e) = node_type(node) {
        say(format!("node {id}: {e}"));
    }
    // the rules a job's names follow: a node's job that broke them could not be started
    for (what, name) in [("kind", &node.kind), ("queue", &node.queue)] {
        if let Some(Err(e)) = name.as_deref().map(|n| crate::names::check_name(what, n)) {
            say(format!("node {id}: {e}"));
        }
    }
    let mut refer = |what: &str, name: &str| {
        if name == id {
            say(format!("node {id}: {what} names the node itself"));
        } else if !known.contains_key(name) {
            say(format!(
                "node {id}: {what} names node {name}, which does not exist"
            ));
        }
    };
    for name in &node.waits_for {
        refer("waits_for", name);
    }
    for (arg, name) in &node.args_from {
        if name != INPUT {
            refer(&format!("args_from.{arg}"), name);
        }
    }
    for name in &node.context_from {
        refer("context_from", name);
    }
    if let Some(map) = &node.map {
        refer("map.over", &map.over);
    }
    for (what, cond) in [("run_if", &node.run_if), ("skip_if", &node.skip_if)] {
        if let Some(cond) = cond {
            refer(what, &cond.node);
        }
    }
    check_rest(id, node, say);
}

fn check_rest(id: &str, node: &NodeSpec, say: &mut impl FnMut(String)) {
    let deps = join_on(node);
    match (node.join, node.min_success) {
        (Join::Quorum, None) => say(format!("node {id}: join = \"quorum\" needs min_success")),
        (Join::Quorum, Some(n)) if n < 1 || n as usize > deps.len() => say(format!(
            "node {id}: min_success = {n}, but it waits for {} nodes: use 1 to {}",
            deps.len(),
            deps.len()
        )),
        (Join::Any, _) if deps.is_empty() => {
            say(format!("node {id}: join = \"any\" needs dependencies"))
        }
        (Join::All | Join::Any, Some(_)) => say(format!(
            "node {id}: min_success is only for join = \"quorum\""
        )),
        _ => {}
    }
    for (what, cond) in [("run_if", &node.run_if), ("skip_if", &node.skip_if)] {
        if let Some(cond) = cond {
            check_condition(id, what, cond, say);
        }
    }
    if let Some(args) = &node.args {
        if !args.is_object() && (!node.args_from.is_empty() || node.map.is_some()) {
            say(format!(
                "node {id}: args must be a JSON object to take args_from or map elements, not {args}"
            ));
        }
    }
    if node.max_attempts.is_some_and(|n| n < 1) {
        say(format!("node {id}: max_attempts must be at least 1"));
    }
    if let Some(map) = &node.map {
        if !map.pointer.is_empty() && !map.pointer.starts_with('/') {
            say(format!(
                "node {id}: map.pointer {:?} is not a JSON pointer: start it with / (or leave it empty for the whole result)",
                map.pointer
            ));
        }
    }
    if node.signal.as_deref().is_some_and(|s| s.trim().is_empty()) {
        say(format!("node {id}: the signal name is empty"));
    }
    if let Some(SubWorkflow::Path(path)) = &node.workflow {
        say(format!(
            "node {id}: sub-workflow {path:?} was not loaded (load the spec from its file)"
        ));
    }
    let at = format!("node {id}");
    duration_ms(node.timeout.as_deref(), &format!("{at}: timeout"), say);
    duration_ms(node.deadline.as_deref(), &format!("{at}: deadline"), say);
    duration_ms(node.sleep.as_deref(), &format!("{at}: sleep"), say);
}

fn check_condition(id: &str, what: &str, cond: &Condition, say: &mut impl FnMut(String)) {
    let tests = [
        cond.state.is_some(),
        cond.error_code.is_some(),
        cond.result_contains.is_some(),
    ];
    if tests.iter().filter(|t| **t).count() != 1 {
        say(format!(
            "node {id}: {what} needs exactly one of state, error_code or result_contains"
        ));
    }
    if let Some(state) = &cond.state {
        if !["completed", "failed", "skipped", "cancelled"].contains(&state.as_str()) {
            say(format!(
                "node {id}: {what}.state {state:?} is not a node's final state: use completed, failed, skipped or cancelled"
            ));
        }
    }
}

fn duration_ms(text: Option<&str>, what: &str, say: &mut impl FnMut(String)) -> Option<i64> {
    let text = text?;
    match crate::duration::parse(text) {
        Ok(d) if d.as_millis() == 0 && !what.ends_with("sleep") => {
            say(format!(
                "{what}: {text:?} is under a millisecond: give at least 1ms"
            ));
            None
        }
        Ok(d) => Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        Err(e) => {
            say(format!("{what}: {e}"));
            None
        }
    }
}

/// The nodes in an order where each comes after its dependencies (declaration order among
/// equals). A cycle is reported with its path, and its nodes are placed last.
fn topological(
    spec: &WorkflowSpec,
    deps: &[Vec<String>],
    index: &HashMap<&str, usize>,
    say: &mut impl FnMut(String),
) -> Vec<usize> {
    let edges: Vec<Vec<usize>> = deps
        .iter()
        .enumerate()
        .map(|(me, d)| {
            d.iter()
                .filter_map(|n| index.get(n.as_str()).copied())
                .filter(|&j| j != me)
                .collect()
        })
        .collect();
    let mut placed = vec![false; edges.len()];
    let mut order = Vec::with_capacity(edges.len());
    loop {
        let ready: Vec<usize> = (0..edges.len())
            .filter(|&i| !placed[i] && edges[i].iter().all(|&d| placed[d]))
            .collect();
        if ready.is_empty() {
            break;
        }
        for i in ready {
            placed[i] = true;
            order.push(i);
        }
    }
    let left: Vec<usize> = (0..edges.len()).filter(|&i| !placed[i]).collect();
    if let Some(cycle) = find_cycle(&edges, &placed) {
        let path: Vec<&str> = cycle.iter().map(|&i| spec.nodes.0[i].0.as_str()).collect();
        say(format!(
            "the nodes form a cycle: {} (each waits for the next; a workflow must be acyclic)",
            path.join(" → ")
        ));
    }
    order.extend(left);
    order
}

/// A cycle among the nodes not placed, as the path `a, b, …, a` (a waits for b).
fn find_cycle(edges: &[Vec<usize>], placed: &[bool]) -> Option<Vec<usize>> {
    let start = (0..edges.len()).find(|&i| !placed[i])?;
    let mut path = vec![start];
    let mut on_path = vec![false; edges.len()];
    on_path[start] = true;
    loop {
        let last = *path.last()?;
        let next = *edges[last].iter().find(|&&d| !placed[d])?;
        if on_path[next] {
            let from = path.iter().position(|&p| p == next)?;
            let mut cycle = path[from..].to_vec();
            cycle.push(next);
            return Some(cycle);
        }
        on_path[next] = true;
        path.push(next);
    }
}

/// Per node, every node upstream of it.
fn ancestors<'a>(
    deps: &'a [Vec<String>],
    index: &HashMap<&str, usize>,
    order: &[usize],
) -> Vec<BTreeSet<&'a str>> {
    let mut up: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); deps.len()];
    for &i in order {
        let mut mine = BTreeSet::new();
        for d in &deps[i] {
            if let Some(&j) = index.get(d.as_str()) {
                if j != i {
                    mine.insert(d.as_str());
                    mine.extend(up[j].iter().copied());
                }
            }
        }
        up[i] = mine;
    }
    up
}

fn compiled_node(
    id: &str,
    node: &NodeSpec,
    deps: &[String],
    dependents: &[&str],
    child: Option<Value>,
) -> Value {
    // (a bad duration was reported by check_rest: here it is only left out)
    let ms = |text: Option<&str>, what: &str| duration_ms(text, what, &mut |_| {});
    let kind = node_type(node).unwrap_or("task");
    let mut out = Map::new();
    out.insert("id".into(), json!(id));
    out.insert("type".into(), json!(kind));
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            out.insert(key.into(), v);
        }
    };
    put("kind", node.kind.as_ref().map(|k| json!(k)));
    put("args", Some(node.args.clone().unwrap_or_else(|| json!({}))));
    put("queue", node.queue.as_ref().map(|q| json!(q)));
    put("priority", node.priority.map(|p| json!(p)));
    put("max_attempts", node.max_attempts.map(|m| json!(m)));
    let timeout = ms(node.timeout.as_deref(), "timeout");
    if kind == "signal" {
        put("signal", node.signal.as_ref().map(|s| json!(s)));
        put("signal_timeout_ms", timeout.map(|t| json!(t)));
    } else {
        put("timeout_ms", timeout.map(|t| json!(t)));
    }
    put(
        "deadline_ms",
        ms(node.deadline.as_deref(), "deadline").map(|t| json!(t)),
    );
    put(
        "sleep_ms",
        ms(node.sleep.as_deref(), "sleep").map(|t| json!(t)),
    );
    put("deps", Some(json!(deps)));
    put("dependents", Some(json!(dependents)));
    if !node.args_from.is_empty() {
        put("args_from", Some(json!(node.args_from)));
    }
    if !node.context_from.is_empty() {
        put("context_from", Some(json!(node.context_from)));
    }
    put("join", Some(json!(node.join.as_str())));
    if node.join != Join::All {
        put("join_on", Some(json!(join_on(node))));
    }
    // the nodes only a condition looks at: read (they must have ended), never joined (their
    // state is the condition's to judge, not a failed dependency)
    let edges = dependencies(node, false);
    let read_only: Vec<&String> = deps.iter().filter(|d| !edges.contains(d)).collect();
    if !read_only.is_empty() {
        put("read_only", Some(json!(read_only)));
    }
    put("min_success", node.min_success.map(|m| json!(m)));
    if node.allow_failed_deps {
        put("allow_failed_deps", Some(json!(true)));
    }
    put("run_if", node.run_if.as_ref().map(|c| json!(c)));
    put("skip_if", node.skip_if.as_ref().map(|c| json!(c)));
    put(
        "map",
        node.map
            .as_ref()
            .map(|m| json!({"over": m.over, "pointer": m.pointer})),
    );
    put("workflow", child);
    Value::Object(out)
}
