use super::spec::{Condition, NodeSpec, WorkflowSpec};
use super::{compile, Workflow};
use serde_json::json;

fn spec(value: serde_json::Value) -> WorkflowSpec {
    serde_json::from_value(value).expect("a spec")
}

#[test]
fn nodes_compile_in_dependency_order_with_their_dependents() {
    let compiled = compile(&spec(json!({
        "name": "order",
        "nodes": {
            "last": {"kind": "k", "waits_for": ["middle"], "args_from": {"x": "first"}},
            "middle": {"kind": "k", "context_from": ["first"]},
            "first": {"kind": "k", "args_from": {"p": "$input"}}
        }
    })))
    .expect("valid");
    let ids: Vec<&str> = compiled["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["first", "middle", "last"]);
    assert_eq!(
        compiled["nodes"][0]["dependents"],
        json!(["middle", "last"])
    );
    assert_eq!(compiled["nodes"][2]["deps"], json!(["middle", "first"]));
    assert_eq!(
        compiled["nodes"][0]["deps"],
        json!([]),
        "$input is not a node"
    );
}

#[test]
fn every_mistake_is_listed_with_where_it_is() {
    let problems = compile(&spec(json!({
        "name": "",
        "nodes": {
            "a": {"kind": "k", "map": {"over": "b", "pointer": "items"}},
            "b": {"sleep": "soon"},
            "c": {"signal": "go", "args": [1], "args_from": {"x": "b"}},
            "d": {"kind": "k", "join": "any"},
            "e": {"workflow": "child.toml"},
            "f": {"kind": "k", "waits_for": ["f"], "max_attempts": 0},
            "g": {"kind": "k", "run_if": {"node": "a"}}
        }
    })))
    .expect_err("invalid")
    .problems;
    let all = problems.join("\n");
    for part in [
        "no name",
        "map.pointer \"items\" is not a JSON pointer",
        "node b: sleep: invalid duration",
        "node c: args must be a JSON object",
        "node d: join = \"any\" needs dependencies",
        "sub-workflow \"child.toml\" was not loaded",
        "node f: waits_for names the node itself",
        "node f: max_attempts must be at least 1",
        "node g: run_if needs exactly one of",
        "node g: run_if looks at node a, which is not upstream",
    ] {
        assert!(all.contains(part), "{part:?} missing from:\n{all}");
    }
}

#[test]
fn duplicate_node_ids_are_reported_not_replaced() {
    let mut wf = Workflow::new("dupes");
    wf.node("a", NodeSpec::task("k", json!({})));
    wf.node("a", NodeSpec::task("k", json!({})));
    let problems = wf.compile().expect_err("invalid").problems;
    assert_eq!(
        problems,
        ["node a is defined twice: node ids must be unique"]
    );
}

#[test]
fn a_sub_workflows_mistakes_say_which_node_holds_it() {
    let mut child = Workflow::new("child");
    child.node("x", NodeSpec::task("k", json!({}))).id();
    let mut bad = NodeSpec::task("k", json!({}));
    bad.run_if(Condition::state("x", "done"));
    child.node("y", bad);
    let mut parent = Workflow::new("parent");
    parent.sub_workflow("inner", &child, |_| {});
    let problems = parent.compile().expect_err("invalid").problems;
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("node inner (sub-workflow): node y: run_if.state \"done\"")),
        "{problems:?}"
    );
}

#[test]
fn a_spec_round_trips_through_json_unchanged() {
    let original = spec(json!({
        "name": "etl",
        "on_error": "pause",
        "output": "b",
        "nodes": {
            "a": {"kind": "k", "args": {"s": 1}, "timeout": "30s"},
            "b": {"kind": "k", "waits_for": ["a"], "join": "quorum", "min_success": 1,
                  "skip_if": {"node": "a", "error_code": "X"}}
        }
    }));
    let again: WorkflowSpec =
        serde_json::from_value(serde_json::to_value(&original).expect("json")).expect("reads back");
    assert_eq!(again, original);
    assert_eq!(compile(&again), compile(&original));
}

#[test]
fn an_empty_node_id_is_one_clear_problem() {
    let problems = compile(&spec(json!({
        "name": "e",
        "nodes": {"": {"kind": ""}, "b": {"kind": "b", "waits_for": [""]}}
    })))
    .expect_err("refused")
    .problems;
    assert_eq!(
        problems,
        ["a node has an empty id: name each node ([nodes.NAME] in a spec file)"],
        "{problems:#?}"
    );
    let problems = compile(&spec(json!({"name": "e", "nodes": {"$x": {"kind": "k"}}})))
        .expect_err("refused")
        .problems;
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].contains("starts with $"), "{problems:#?}");
}
