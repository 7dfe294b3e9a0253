//! The workflow model against the guide's rules, one rule per test.

use super::model::{contains, decide, Decided, Outcome, World};
use crate::workflow::{Condition, Join, MapSpec, NodeSpec, Nodes, SubWorkflow, WorkflowSpec};
use serde_json::{json, Value};

/// Kind `fail` fails with `BOOM`, `odd` fails on odd map elements, `items` returns three
/// items, anything else returns its kind; signals named `yes` arrive.
struct Rules;

impl World for Rules {
    fn outcome(&self, _node: &str, kind: &str, element: Option<(usize, &Value)>) -> Outcome {
        match (kind, element) {
            ("fail", _) => Outcome::Err("BOOM".into()),
            ("odd", Some((i, _))) if i % 2 == 1 => Outcome::Err(format!("ODD_{i}")),
            ("items", _) => Outcome::Ok(json!({ "items": ["a", "b", "c", "d"] })),
            (kind, _) => Outcome::Ok(json!(kind)),
        }
    }

    fn signalled(&self, _node: &str, signal: &str) -> Option<Value> {
        (signal == "yes").then(|| json!({ "said": "yes" }))
    }
}

fn spec(nodes: Vec<(&str, NodeSpec)>) -> WorkflowSpec {
    WorkflowSpec {
        name: "w".into(),
        nodes: Nodes(
            nodes
                .into_iter()
                .map(|(id, n)| (id.to_string(), n))
                .collect(),
        ),
        ..WorkflowSpec::default()
    }
}

fn task(kind: &str, waits_for: &[&str]) -> NodeSpec {
    let mut node = NodeSpec::task(kind, json!({}));
    node.waits_for = waits_for.iter().map(|s| s.to_string()).collect();
    node
}

fn states(spec: &WorkflowSpec) -> (Vec<(String, &'static str)>, &'static str) {
    let run = decide(spec, &Rules).expect("modelled");
    let nodes = run
        .nodes
        .iter()
        .map(|(id, d)| (id.clone(), d.state()))
        .collect();
    (nodes, run.state)
}

fn state_of(spec: &WorkflowSpec, node: &str) -> Decided {
    decide(spec, &Rules).expect("modelled").nodes[node].clone()
}

#[test]
fn a_failed_dependency_skips_its_dependents_down_the_chain_and_fails_the_run() {
    let s = spec(vec![
        ("a", task("fail", &[])),
        ("b", task("ok", &["a"])),
        ("c", task("ok", &["b"])),
        ("d", task("ok", &[])),
    ]);
    let (nodes, run) = states(&s);
    assert_eq!(
        nodes,
        vec![
            ("a".into(), "failed"),
            ("b".into(), "skipped"),
            ("c".into(), "skipped"),
            ("d".into(), "completed")
        ]
    );
    assert_eq!(run, "failed");
}

#[test]
fn allow_failed_deps_runs_a_node_after_a_failure() {
    let mut b = task("ok", &["a"]);
    b.allow_failed_deps = true;
    let s = spec(vec![("a", task("fail", &[])), ("b", b)]);
    assert_eq!(state_of(&s, "b"), Decided::Completed(json!("ok")));
}

#[test]
fn any_runs_on_one_completion_and_skips_when_none_can_complete() {
    let mut any = task("ok", &["a", "b"]);
    any.join = Join::Any;
    let s = spec(vec![
        ("a", task("fail", &[])),
        ("b", task("ok", &[])),
        ("j", any.clone()),
    ]);
    assert_eq!(state_of(&s, "j").state(), "completed");
    let s = spec(vec![
        ("a", task("fail", &[])),
        ("b", task("fail", &[])),
        ("j", any),
    ]);
    assert_eq!(state_of(&s, "j"), Decided::Skipped);
}

#[test]
fn a_quorum_counts_completions_among_the_nodes_it_waits_for() {
    let mut q = task("ok", &["a", "b", "c"]);
    q.join = Join::Quorum;
    q.min_success = Some(2);
    let s = spec(vec![
        ("a", task("fail", &[])),
        ("b", task("ok", &[])),
        ("c", task("ok", &[])),
        ("q", q.clone()),
    ]);
    assert_eq!(state_of(&s, "q").state(), "completed");
    let s = spec(vec![
        ("a", task("fail", &[])),
        ("b", task("fail", &[])),
        ("c", task("ok", &[])),
        ("q", q),
    ]);
    assert_eq!(state_of(&s, "q"), Decided::Skipped);
}

#[test]
fn conditions_skip_a_node_and_its_dependents_but_do_not_fail_the_run() {
    let mut only_if_failed = task("ok", &["a"]);
    only_if_failed.allow_failed_deps = true;
    only_if_failed.run_if = Some(Condition::state("a", "failed"));
    let mut unless_ok = task("ok", &["a"]);
    unless_ok.skip_if = Some(Condition::result_contains("a", json!("ok")));
    let s = spec(vec![
        ("a", task("ok", &[])),
        ("b", only_if_failed),
        ("c", unless_ok),
        ("d", task("ok", &["b"])),
    ]);
    let (nodes, run) = states(&s);
    assert_eq!(
        nodes,
        vec![
            ("a".into(), "completed"),
            ("b".into(), "skipped"),
            ("c".into(), "skipped"),
            ("d".into(), "skipped")
        ]
    );
    assert_eq!(run, "completed");
    let mut on_code = task("ok", &["a"]);
    on_code.allow_failed_deps = true;
    on_code.run_if = Some(Condition::error_code("a", "BOOM"));
    let s = spec(vec![("a", task("fail", &[])), ("b", on_code)]);
    assert_eq!(state_of(&s, "b").state(), "completed");
}

#[test]
fn a_map_returns_its_elements_values_in_order_or_its_first_failed_elements_code() {
    let mut each = task("each", &[]);
    each.map = Some(MapSpec {
        over: "list".into(),
        pointer: "/items".into(),
    });
    let s = spec(vec![("list", task("items", &[])), ("each", each.clone())]);
    assert_eq!(
        state_of(&s, "each"),
        Decided::Completed(json!(["each", "each", "each", "each"]))
    );
    each.kind = Some("odd".into());
    let s = spec(vec![("list", task("items", &[])), ("each", each)]);
    assert_eq!(state_of(&s, "each"), Decided::Failed("ODD_1".into()));
}

#[test]
fn a_success_policy_completes_a_run_despite_failures() {
    let mut s = spec(vec![("a", task("fail", &[])), ("b", task("ok", &[]))]);
    s.success = Some(vec![vec!["a".into()], vec!["b".into()]]);
    s.output = Some("b".into());
    let run = decide(&s, &Rules).expect("modelled");
    assert_eq!(run.state, "completed");
    assert_eq!(run.output, json!("ok"));
    s.success = Some(vec![vec!["a".into(), "b".into()]]);
    assert_eq!(decide(&s, &Rules).expect("modelled").state, "failed");
}

#[test]
fn a_signal_completes_with_its_payload_or_fails_at_its_timeout_or_waits() {
    let signal = |name: &str, timeout: Option<&str>| NodeSpec {
        signal: Some(name.into()),
        timeout: timeout.map(str::to_string),
        ..NodeSpec::default()
    };
    let s = spec(vec![
        ("yes", signal("yes", None)),
        ("late", signal("no", Some("1s"))),
    ]);
    let run = decide(&s, &Rules).expect("modelled");
    assert_eq!(
        run.nodes["yes"],
        Decided::Completed(json!({ "said": "yes" }))
    );
    assert_eq!(run.nodes["late"], Decided::Failed("SIGNAL_TIMEOUT".into()));
    let s = spec(vec![
        ("never", signal("no", None)),
        ("after", task("ok", &["never"])),
    ]);
    let run = decide(&s, &Rules).expect("modelled");
    assert_eq!(run.state, "running");
    assert_eq!(run.nodes["after"].state(), "pending");
}

#[test]
fn a_sub_workflow_fails_its_node_when_the_child_fails() {
    let child = |kind: &str| NodeSpec {
        workflow: Some(SubWorkflow::Inline(Box::new(spec(vec![(
            "x",
            task(kind, &[]),
        )])))),
        ..NodeSpec::default()
    };
    let s = spec(vec![("good", child("ok")), ("bad", child("fail"))]);
    let run = decide(&s, &Rules).expect("modelled");
    assert_eq!(run.nodes["good"].state(), "completed");
    assert_eq!(run.nodes["bad"], Decided::Failed("WORKFLOW_FAILED".into()));
    assert_eq!(run.state, "failed");
}

#[test]
fn pause_on_error_and_deadlines_are_not_modelled() {
    let mut s = spec(vec![("a", task("ok", &[]))]);
    s.on_error = crate::workflow::OnError::Pause;
    assert!(decide(&s, &Rules).is_err());
}

#[test]
fn containment_follows_jsonb() {
    assert!(contains(&json!({"a": 1, "b": [1, 2]}), &json!({"b": [2]})));
    assert!(contains(&json!([1, 2, 3]), &json!(2)));
    assert!(contains(&json!([[1, 2]]), &json!([[1]])));
    assert!(!contains(&json!({"a": 1}), &json!({"a": 2})));
    assert!(!contains(&json!([1, 2]), &json!([[1]])));
    assert!(!contains(&json!("a"), &json!(["a"])));
}

#[test]
fn an_any_join_runs_on_its_first_completion_even_if_another_never_ends() {
    let never = NodeSpec {
        signal: Some("no".into()),
        ..NodeSpec::default()
    };
    let mut any = task("ok", &["never", "b"]);
    any.join = Join::Any;
    let s = spec(vec![("never", never), ("b", task("ok", &[])), ("j", any)]);
    let run = decide(&s, &Rules).expect("modelled");
    assert_eq!(run.nodes["j"].state(), "completed");
    assert_eq!(run.nodes["never"].state(), "running");
    assert_eq!(run.state, "running");
}

#[test]
fn a_top_level_array_contains_its_scalars_but_a_nested_one_does_not() {
    assert!(contains(&json!([1, 2]), &json!(1)));
    assert!(!contains(&json!({"a": [1, 2]}), &json!({"a": 1})));
}
