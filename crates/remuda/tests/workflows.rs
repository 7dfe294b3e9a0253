//! Workflows on a real PostgreSQL: result passing, joins, conditions, maps, pause, resume,
//! cancel, retry of only what failed, sub-workflows, sleeps, signals, idempotent starts.

mod common;

use common::{fast_config, setup, start, Running};
use remuda::workflow::{
    Condition, NodeSpec, NodeState, OnError, Workflow, WorkflowSpec, WorkflowState, WorkflowStatus,
};
use remuda::{Client, Error, JobContext, Task, TaskError, TaskOptions, Worker};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Returns what it was given: its args and its workflow context. Fails (permanently) with
/// the code in `args.fail` unless the test's switch is on; holds in `args.hold` until asked
/// to stop.
#[derive(Clone, Default)]
struct Step {
    fixed: Arc<AtomicBool>,
    runs: Arc<AtomicUsize>,
    /// Runs after this many (0: none) wait until the gate opens.
    gate_after: Arc<AtomicUsize>,
    gate_open: Arc<AtomicBool>,
    gate: Arc<tokio::sync::Notify>,
}

impl Step {
    /// Opens the gate for the runs waiting at it and those to come.
    fn open_gate(&self) {
        self.gate_open.store(true, Ordering::SeqCst);
        self.gate.notify_waiters();
    }
}

impl Task for Step {
    const KIND: &'static str = "step";
    type Args = Value;
    type Output = Value;

    fn options() -> TaskOptions {
        TaskOptions::default().max_attempts(1)
    }

    async fn run(&self, ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let gate_after = self.gate_after.load(Ordering::SeqCst);
        if gate_after > 0 && n > gate_after {
            loop {
                let opened = self.gate.notified();
                if self.gate_open.load(Ordering::SeqCst) {
                    break;
                }
                opened.await;
            }
        }
        if args.get("hold").is_some() || args.pointer("/item/hold").is_some() {
            ctx.cancelled().await;
            return Err(TaskError::new("STOPPED", "asked to stop"));
        }
        let fails = match args.get("fail") {
            Some(code) => Some(code.as_str().unwrap_or("FAILED").to_string()),
            None => args
                .get("fail_item")
                .filter(|bad| args.get("item") == Some(*bad))
                .map(|_| "BAD_ITEM".to_string()),
        };
        if let Some(code) = fails {
            if !self.fixed.load(Ordering::SeqCst) {
                return Err(TaskError::permanent(&code, "told to fail"));
            }
        }
        let workflow = ctx.workflow.expect("a workflow job knows its run");
        Ok(json!({"node": workflow.node, "args": args, "context": workflow.context}))
    }
}

fn worker(client: &Client, step: &Step) -> Running {
    start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(step.clone()),
    )
}

fn node(args: Value) -> NodeSpec {
    NodeSpec::task("step", args)
}

/// A map over the list at `pointer` in node `over`'s result.
fn map_over(over: &str, pointer: &str) -> remuda::workflow::MapSpec {
    remuda::workflow::MapSpec {
        over: over.into(),
        pointer: pointer.into(),
    }
}

async fn run_to_end(client: &Client, wf: &Workflow, input: Value) -> WorkflowStatus {
    let run = client.start_workflow(wf, &input).await.expect("started");
    client
        .wait_workflow(run.id, WAIT)
        .await
        .expect("the run ends")
}

/// Waits until `node` of run `id` is in `state`.
async fn node_reaches(client: &Client, id: i64, node: &str, state: NodeState) {
    common::until(WAIT, || async {
        let run = client.workflow(id).await.ok().flatten();
        run.map(|w| w.nodes[node].state) == Some(state)
    })
    .await;
}

fn state_of(run: &WorkflowStatus, node: &str) -> NodeState {
    run.nodes[node].state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_diamond_passes_each_result_to_its_dependents() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("diamond");
    wf.node("top", {
        let mut n = node(json!({"n": 1}));
        n.args_from("params", "$input");
        n
    });
    wf.node("left", {
        let mut n = node(json!({"side": "l"}));
        n.args_from("up", "top");
        n
    });
    wf.node("right", {
        let mut n = node(json!({"side": "r"}));
        n.args_from("up", "top").context_from("top");
        n
    });
    let bottom = wf.node("bottom", {
        let mut n = node(json!({}));
        n.args_from("l", "left").args_from("r", "right");
        n
    });
    let wf = wf.output(&bottom);
    let run = run_to_end(&client, &wf, json!({"source": "a"})).await;
    assert_eq!(run.state, WorkflowState::Completed, "{run:#?}");
    let out = run.output.expect("the output node's result");
    assert_eq!(out["node"], "bottom");
    assert_eq!(out["args"]["l"]["ok"]["node"], "left");
    assert_eq!(
        out["args"]["l"]["ok"]["args"]["up"]["ok"]["args"]["params"],
        json!({"source": "a"})
    );
    assert_eq!(
        out["args"]["r"]["ok"]["context"]["top"]["ok"]["args"]["n"], 1,
        "{out:#}"
    );
    assert_eq!(step.runs.load(Ordering::SeqCst), 4);
    for n in run.nodes.values() {
        assert_eq!(n.state, NodeState::Completed);
        assert_eq!(n.attempt, 1);
    }
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn any_and_quorum_joins_run_on_enough_successes_and_skip_when_out_of_reach() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("joins");
    wf.node("bad", node(json!({"fail": "NOPE"})));
    wf.node("good1", node(json!({})));
    wf.node("good2", node(json!({})));
    let mut any = node(json!({}));
    any.waits_for("bad").waits_for("good1").join_any();
    wf.node("any", any);
    let mut two = node(json!({}));
    two.waits_for("bad")
        .waits_for("good1")
        .waits_for("good2")
        .quorum(2);
    two.args_from("b", "bad");
    wf.node("two_of_three", two);
    let mut three = node(json!({}));
    three
        .waits_for("bad")
        .waits_for("good1")
        .waits_for("good2")
        .quorum(3);
    wf.node("three_of_three", three);
    let mut none = node(json!({}));
    none.waits_for("bad").join_any();
    wf.node("any_of_bad", none);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(
        run.state,
        WorkflowState::Failed,
        "bad failed and nothing allows it"
    );
    assert_eq!(state_of(&run, "any"), NodeState::Completed);
    assert_eq!(state_of(&run, "two_of_three"), NodeState::Completed);
    assert_eq!(state_of(&run, "three_of_three"), NodeState::Skipped);
    assert_eq!(state_of(&run, "any_of_bad"), NodeState::Skipped);
    assert_eq!(
        run.nodes["three_of_three"].reason.as_deref(),
        Some("dependency")
    );
    assert_eq!(run.error.as_ref().expect("first error")["code"], "NOPE");
    assert_eq!(run.error.as_ref().expect("first error")["node"], "bad");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conditions_skip_nodes_and_the_skip_cascades_unless_failures_are_allowed() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("conditions");
    wf.node("check", node(json!({"go": false})));
    let mut gated = node(json!({}));
    gated.waits_for("check").run_if(Condition::result_contains(
        "check",
        json!({"args": {"go": true}}),
    ));
    wf.node("gated", gated);
    let mut after_gated = node(json!({}));
    after_gated.waits_for("gated");
    wf.node("after_gated", after_gated);
    let mut tolerant = node(json!({}));
    tolerant
        .waits_for("gated")
        .allow_failed_deps()
        .args_from("g", "gated");
    wf.node("tolerant", tolerant);
    let mut opposite = node(json!({}));
    opposite
        .waits_for("check")
        .skip_if(Condition::state("check", "completed"));
    wf.node("opposite", opposite);
    let mut runs_when_skipped = node(json!({}));
    runs_when_skipped
        .waits_for("gated")
        .allow_failed_deps()
        .run_if(Condition::state("gated", "skipped"));
    wf.node("on_skip", runs_when_skipped);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(
        run.state,
        WorkflowState::Completed,
        "skips are not failures: {run:#?}"
    );
    assert_eq!(state_of(&run, "gated"), NodeState::Skipped);
    assert_eq!(run.nodes["gated"].reason.as_deref(), Some("condition"));
    assert_eq!(state_of(&run, "after_gated"), NodeState::Skipped);
    assert_eq!(
        run.nodes["after_gated"].reason.as_deref(),
        Some("dependency")
    );
    assert_eq!(state_of(&run, "tolerant"), NodeState::Completed);
    assert_eq!(
        run.nodes["tolerant"].result.as_ref().expect("result")["ok"]["args"]["g"],
        Value::Null,
        "a skipped node has no result to pass"
    );
    assert_eq!(state_of(&run, "opposite"), NodeState::Skipped);
    assert_eq!(state_of(&run, "on_skip"), NodeState::Completed);
    running.shutdown().await;
}

/// A node a condition looks at is read, not joined: it must have ended, in whatever state,
/// and only the condition judges that state. (The engine once counted it as a dependency that
/// must complete, so a fallback that runs "if the first try failed" was skipped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_condition_on_a_failed_or_skipped_upstream_node_holds_and_runs_its_node() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("fallback");
    wf.node("first_try", node(json!({"fail": "DOWN"})));
    let mut recover = node(json!({}));
    recover.waits_for("first_try").allow_failed_deps();
    wf.node("recover", recover);
    // join all: waits for recover only; first_try is upstream through it
    let mut alert = node(json!({}));
    alert
        .waits_for("recover")
        .run_if(Condition::state("first_try", "failed"));
    wf.node("alert", alert);
    // a quorum whose condition looks at a skipped node upstream through another
    wf.node("skipped", {
        let mut n = node(json!({}));
        n.waits_for("first_try");
        n
    });
    let mut after_skip = node(json!({}));
    after_skip.waits_for("skipped");
    wf.node("after_skip", after_skip);
    let mut either = node(json!({}));
    either
        .waits_for("recover")
        .waits_for("after_skip")
        .quorum(1)
        .run_if(Condition::state("skipped", "skipped"));
    wf.node("either", either);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(state_of(&run, "recover"), NodeState::Completed);
    assert_eq!(state_of(&run, "skipped"), NodeState::Skipped);
    assert_eq!(state_of(&run, "alert"), NodeState::Completed, "{run:#?}");
    assert_eq!(state_of(&run, "either"), NodeState::Completed, "{run:#?}");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_map_of_a_thousand_with_a_failing_element_is_retried_element_only() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("map");
    wf.node(
        "list",
        node(json!({"items": (0..1000).collect::<Vec<_>>()})),
    );
    let mut each = node(json!({"fail_item": 500}));
    each.map = Some(map_over("list", "/args/items"));
    wf.node("each", each);
    let mut gather = node(json!({}));
    gather.args_from("all", "each");
    let gather = wf.node("gather", gather);
    let wf = wf.output(&gather);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    let each = &run.nodes["each"];
    assert_eq!(each.state, NodeState::Failed);
    let children = each.children.as_ref().expect("a map counts its elements");
    assert_eq!(children.get("completed"), Some(&999));
    assert_eq!(children.get("failed"), Some(&1));
    let error = each.error.as_ref().expect("the element's error");
    assert_eq!(error["code"], "BAD_ITEM");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("1 of 1000 elements failed; element 500: ")),
        "{error}"
    );
    let elements = error["data"]
        .as_array()
        .expect("each element's tagged result");
    assert_eq!(
        (elements.len(), &elements[500]["err"]["code"]),
        (1000, &json!("BAD_ITEM"))
    );
    assert_eq!(elements[499]["ok"]["args"]["item"], 499);
    assert_eq!(state_of(&run, "gather"), NodeState::Skipped);
    assert_eq!(step.runs.load(Ordering::SeqCst), 1 + 1000);

    step.fixed.store(true, Ordering::SeqCst);
    assert_eq!(
        client.retry_workflow(run.id).await.expect("retry"),
        WorkflowState::Failed
    );
    let run = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(run.state, WorkflowState::Completed, "{:?}", run.error);
    assert_eq!(
        step.runs.load(Ordering::SeqCst),
        1 + 1000 + 1 + 1,
        "only the failed element and gather ran again"
    );
    // a map's result is tagged as every node's: the elements' values, in order
    let all = run.output.expect("output")["args"]["all"]["ok"].clone();
    let all = all.as_array().expect("the list of the elements' values");
    assert_eq!(all.len(), 1000);
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r["args"]["index"], i, "in order");
        assert_eq!(r["args"]["item"], i);
    }
    assert_eq!(
        run.nodes["list"].attempt, 1,
        "completed nodes keep their results"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_run_starts_nothing_until_resumed() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let mut wf = Workflow::new("pausable");
    wf.node("first", node(json!({})));
    let mut second = node(json!({}));
    second.waits_for("first");
    wf.node("second", second);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    assert_eq!(
        client.pause_workflow(run.id).await.expect("pause"),
        WorkflowState::Running
    );
    // first's job was waiting for a worker: held, it does not run either
    let running = worker(&client, &step);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        step.runs.load(Ordering::SeqCst),
        0,
        "no job of a paused run runs"
    );
    let paused = client
        .workflow(run.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(paused.state, WorkflowState::Paused);
    assert_eq!(
        paused.nodes["second"].state,
        NodeState::Pending,
        "nothing starts while paused"
    );
    assert_eq!(
        client.resume_workflow(run.id).await.expect("resume"),
        WorkflowState::Paused
    );
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed);
    assert_eq!(step.runs.load(Ordering::SeqCst), 2);
    assert!(matches!(
        client.resume_workflow(run.id).await,
        Err(Error::WorkflowWrongState { .. })
    ));
    running.shutdown().await;
}

/// A job held by a paused run keeps the rest of its start deadline for after the pause: the
/// leader's expiry passes it over while it is held, and its release moves the deadline by the
/// time it was held, so the node does not fail for the pause. A minute of pause is written
/// rather than slept: the job looks held a minute ago, with 2 s of its deadline left then.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_held_by_a_paused_run_keeps_the_rest_of_its_deadline_for_after_the_pause() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let mut wf = Workflow::new("held_deadline");
    let mut first = node(json!({}));
    first.deadline = Some("30s".into());
    wf.node("first", first);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    client.pause_workflow(run.id).await.expect("pause");
    let conn = client.database().conn().await.expect("conn");
    let held = conn
        .execute(
            "UPDATE remuda.jobs_live
             SET expires_at = now() - interval '58 seconds',
                 workflow = workflow || jsonb_build_object('held_at', now() - interval '60 seconds')
             WHERE workflow_id = $1 AND workflow ? 'held_run_at'",
            &[&run.id],
        )
        .await
        .expect("a minute held");
    assert_eq!(held, 1, "the node's job is held");
    let since = chrono::Utc::now();
    let running = worker(&client, &step);
    // the leader's expiry runs while the run is paused, and passes the held job over
    let expiry_ran = async {
        loop {
            let status = client.maintenance_status().await.expect("status");
            if status
                .duties
                .iter()
                .any(|d| d.duty == "expiry" && d.started_at > since && d.ok)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, expiry_ran)
        .await
        .expect("an expiry round");
    let state: String = conn
        .query_one(
            "SELECT state::text FROM remuda.jobs WHERE workflow_id = $1",
            &[&run.id],
        )
        .await
        .expect("job")
        .get(0);
    assert_eq!(state, "scheduled", "held, not expired");
    client.resume_workflow(run.id).await.expect("resume");
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed, "{done:?}");
    assert_eq!(step.runs.load(Ordering::SeqCst), 1);
    running.shutdown().await;
}

/// The jobs of map `each` of run `id`, by state.
async fn elements(client: &Client, id: i64) -> std::collections::BTreeMap<String, i64> {
    let conn = client.database().conn().await.expect("conn");
    conn.query(
        "SELECT CASE WHEN workflow ? 'held_run_at' THEN 'held' ELSE state::text END, count(*)
         FROM remuda.jobs WHERE workflow_id = $1 AND workflow ? 'index' GROUP BY 1",
        &[&id],
    )
    .await
    .expect("elements")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// A map of 10 000 elements paused half-way starts no element more: those its worker had
/// claimed finish, the others are held until resume, and every element runs once. Half-way
/// is forced: the elements after the 5 000th wait at a gate until the pause is in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_map_paused_half_way_starts_nothing_more_until_resumed() {
    let (_db, client) = setup().await;
    let step = Step::default();
    step.gate_after.store(5_001, Ordering::SeqCst);
    let mut wf = Workflow::new("big map");
    wf.node(
        "list",
        node(json!({"items": (0..10_000).collect::<Vec<_>>()})),
    );
    let mut each = node(json!({}));
    each.map = Some(map_over("list", "/args/items"));
    wf.node("each", each);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start");
    let running = worker(&client, &step);
    common::until(WAIT, || async {
        elements(&client, run.id)
            .await
            .get("completed")
            .copied()
            .unwrap_or(0)
            >= 5_000
    })
    .await;
    client.pause_workflow(run.id).await.expect("pause");
    step.open_gate();
    // what was claimed before the pause ends; then nothing moves
    common::until(WAIT, || async {
        !elements(&client, run.id).await.contains_key("running")
    })
    .await;
    let at_pause = elements(&client, run.id).await;
    let started = at_pause.get("completed").copied().unwrap_or(0);
    assert!(started < 10_000, "{at_pause:?}");
    assert_eq!(
        at_pause.get("held").copied().unwrap_or(0),
        10_000 - started,
        "{at_pause:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        elements(&client, run.id).await,
        at_pause,
        "nothing started while paused"
    );
    client.resume_workflow(run.id).await.expect("resume");
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed);
    assert_eq!(
        step.runs.load(Ordering::SeqCst),
        10_001,
        "each element ran once"
    );
    running.shutdown().await;
}

/// A run whose map `each` over node `list` has its three elements waiting for a worker
/// (`list` ended by hand, no worker up).
async fn three_elements_waiting(client: &Client) -> i64 {
    let mut wf = Workflow::new("three elements");
    let mut each = node(json!({}));
    each.map = Some(map_over("list", "/args/items"));
    wf.node("list", node(json!({"items": [1, 2, 3]})));
    wf.node("each", each);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start")
        .id;
    let list = json!({"ok": {"args": {"items": [1, 2, 3]}}});
    end_node(client, run, "list", "completed", list).await;
    run
}

/// A pause racing a claim, both ways: a claim that locked an element first makes the pause
/// wait for it, and that element runs; a pause first leaves the claim nothing to take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_racing_a_claim_holds_all_but_the_element_claimed_first() {
    let (_db, client) = setup().await;
    const CLAIM_ONE: &str = "UPDATE remuda.jobs SET state = 'running', started_at = now(),
                                 attempt = attempt + 1
                             WHERE id = (SELECT id FROM remuda.jobs
                                         WHERE workflow_id = $1 AND state = 'available'
                                         ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)";
    for claim_first in [true, false] {
        let run = three_elements_waiting(&client).await;
        let mut claimer = client.database().conn().await.expect("conn");
        let tx = claimer.transaction().await.expect("begin");
        let pause = |client: Client| tokio::spawn(async move { client.pause_workflow(run).await });
        let claimed = if claim_first {
            let claimed = tx.execute(CLAIM_ONE, &[&run]).await.expect("claim");
            let pausing = pause(client.clone());
            // the pause waits for the claim's lock on the element
            common::until(WAIT, || async {
                let conn = client.database().conn().await.expect("conn");
                let waiting: i64 = conn
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity
                         WHERE wait_event_type = 'Lock' AND query LIKE '%workflow_pause%'",
                        &[],
                    )
                    .await
                    .expect("activity")
                    .get(0);
                waiting > 0
            })
            .await;
            tx.commit().await.expect("commit the claim");
            pausing.await.expect("join").expect("pause");
            claimed
        } else {
            pause(client.clone()).await.expect("join").expect("pause");
            let claimed = tx.execute(CLAIM_ONE, &[&run]).await.expect("claim");
            tx.commit().await.expect("commit");
            claimed
        };
        let held = elements(&client, run).await;
        let expected: std::collections::BTreeMap<String, i64> = if claim_first {
            assert_eq!(claimed, 1);
            [("held".to_string(), 2), ("running".to_string(), 1)].into()
        } else {
            assert_eq!(claimed, 0, "nothing left to claim");
            [("held".to_string(), 3)].into()
        };
        assert_eq!(held, expected, "claim first: {claim_first}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_mid_run_stops_running_jobs_and_pending_nodes() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("cancellable");
    wf.node("quick", node(json!({})));
    let mut slow = node(json!({"hold": true}));
    slow.waits_for("quick");
    wf.node("slow", slow);
    let mut last = node(json!({}));
    last.waits_for("slow");
    wf.node("last", last);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    node_reaches(&client, run.id, "slow", NodeState::Running).await;
    assert_eq!(
        client.cancel_workflow(run.id).await.expect("cancel"),
        WorkflowState::Running
    );
    let run = client.wait_workflow(run.id, WAIT).await.expect("ended");
    assert_eq!(run.state, WorkflowState::Cancelled);
    assert_eq!(state_of(&run, "quick"), NodeState::Completed);
    assert_eq!(state_of(&run, "slow"), NodeState::Cancelled);
    assert_eq!(state_of(&run, "last"), NodeState::Cancelled);
    let job = client
        .job(run.nodes["slow"].job_id.expect("slow had a job"))
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(job.state, remuda::JobState::Cancelled);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_error_pause_holds_the_failure_until_resume_runs_it_again() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("careful");
    wf.on_error(OnError::Pause);
    wf.node("flaky", node(json!({"fail": "NOT_YET"})));
    let mut after = node(json!({}));
    after.waits_for("flaky");
    wf.node("after", after);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    common::until(WAIT, || async {
        client
            .workflow(run.id)
            .await
            .ok()
            .flatten()
            .map(|w| w.state)
            == Some(WorkflowState::Paused)
    })
    .await;
    let paused = client
        .workflow(run.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(state_of(&paused, "flaky"), NodeState::Failed);
    assert_eq!(
        state_of(&paused, "after"),
        NodeState::Pending,
        "the failure is held back"
    );
    step.fixed.store(true, Ordering::SeqCst);
    client.resume_workflow(run.id).await.expect("resume");
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed, "{:?}", done.error);
    assert_eq!(done.nodes["flaky"].attempt, 2);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_sub_workflow_is_retried_running_only_its_failed_nodes() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut child = Workflow::new("child");
    child.node("fine", node(json!({})));
    let mut broken = node(json!({"fail": "CHILD_BROKE"}));
    broken.waits_for("fine");
    let broken = child.node("broken", broken);
    let child = child.output(&broken);
    let mut parent = Workflow::new("parent");
    parent.node("prepare", node(json!({"x": 1})));
    parent.sub_workflow("child", &child, |n| {
        n.args_from("input", "prepare");
    });
    let mut report = node(json!({}));
    report.args_from("summary", "child");
    parent.node("report", report);
    let run = run_to_end(&client, &parent, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    let sub = &run.nodes["child"];
    assert_eq!(sub.state, NodeState::Failed);
    assert_eq!(
        sub.error.as_ref().expect("error")["code"],
        "WORKFLOW_FAILED"
    );
    let summary = &sub.error.as_ref().expect("error")["data"];
    assert_eq!(summary["completed"], 1);
    assert_eq!(summary["failed"], 1);
    assert_eq!(summary["error"]["code"], "CHILD_BROKE");
    let child_id = sub.workflow_id.expect("the child's run");
    let child_run = client
        .workflow(child_id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(child_run.parent_id, Some(run.id));
    assert_eq!(
        child_run.input["input"]["ok"]["args"]["x"], 1,
        "the node's args are the child's input"
    );
    let runs_before = step.runs.load(Ordering::SeqCst);
    assert_eq!(runs_before, 3);

    step.fixed.store(true, Ordering::SeqCst);
    client.retry_workflow(run.id).await.expect("retry");
    let run = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(run.state, WorkflowState::Completed, "{:?}", run.error);
    assert_eq!(
        step.runs.load(Ordering::SeqCst),
        runs_before + 2,
        "broken and report ran again, nothing else"
    );
    let child_run = client
        .workflow(child_id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        child_run.state,
        WorkflowState::Completed,
        "the same child run was retried"
    );
    assert_eq!(child_run.nodes["fine"].attempt, 1);
    assert_eq!(child_run.nodes["broken"].attempt, 2);
    let report = run.nodes["report"].result.as_ref().expect("result");
    assert_eq!(report["ok"]["args"]["summary"]["ok"]["state"], "completed");
    assert_eq!(
        report["ok"]["args"]["summary"]["ok"]["output"]["node"],
        "broken"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sleep_node_survives_a_worker_restart() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let mut wf = Workflow::new("sleepy");
    wf.node("before", node(json!({})));
    wf.sleep("nap", Duration::from_secs(2), |n| {
        n.waits_for("before");
    });
    let mut after = node(json!({}));
    after.waits_for("nap");
    wf.node("after", after);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    let first = worker(&client, &step);
    node_reaches(&client, run.id, "nap", NodeState::Running).await;
    first.shutdown().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let asleep = client
        .workflow(run.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        asleep.nodes["nap"].state,
        NodeState::Running,
        "no worker, no leader: the timer waits"
    );
    let second = worker(&client, &step);
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed);
    let nap = &done.nodes["nap"];
    let slept = nap.finished_at.expect("ended") - nap.started_at.expect("started");
    assert!(slept >= chrono::Duration::seconds(2), "slept {slept}");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn signals_complete_their_nodes_with_the_payload_or_time_out() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("approval");
    wf.signal::<Value>("approve", "approve", None, |_| {});
    let mut ship = node(json!({}));
    ship.args_from("approval", "approve");
    let ship = wf.node("ship", ship);
    let wf = wf.output(&ship);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    node_reaches(&client, run.id, "approve", NodeState::Running).await;
    assert_eq!(
        run.signal("approve", &json!({"by": "ann"}))
            .await
            .expect("signal"),
        1
    );
    let out: Value = run.wait(WAIT).await.expect("completes");
    assert_eq!(out["args"]["approval"]["ok"]["by"], "ann");
    assert!(matches!(
        client.signal_workflow(run.id, "approve", &json!(1)).await,
        Err(Error::WorkflowWrongState { .. })
    ));

    let mut wf = Workflow::new("impatient");
    wf.signal::<Value>(
        "approve",
        "approve",
        Some(Duration::from_millis(500)),
        |_| {},
    );
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    assert_eq!(
        run.nodes["approve"].error.as_ref().expect("error")["code"],
        "SIGNAL_TIMEOUT"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idempotency_key_returns_the_same_run_and_refuses_a_changed_definition() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("keyed");
    wf.node("only", node(json!({"v": 1})));
    let first = client
        .start_workflow_keyed(&wf, &json!(null), Some("k1"))
        .await
        .expect("started");
    let again = client
        .start_workflow_keyed(&wf, &json!(null), Some("k1"))
        .await
        .expect("found");
    assert_eq!(again.id, first.id);
    assert!(!first.existed);
    assert!(again.existed);
    let mut changed = Workflow::new("keyed");
    changed.node("only", node(json!({"v": 2})));
    match client
        .start_workflow_keyed(&changed, &json!(null), Some("k1"))
        .await
    {
        Err(Error::WorkflowDrift { id, key }) => {
            assert_eq!(id, first.id);
            assert_eq!(key, "k1");
        }
        other => panic!("expected drift, got {:?}", other.map(|h| h.id)),
    }
    let runs = client.workflows(&Default::default()).await.expect("list");
    assert_eq!(runs.len(), 1, "one run for the key");
    assert_eq!(runs[0].nodes.get("running"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_definition_with_five_mistakes_reports_all_five_and_writes_nothing() {
    let (_db, client) = setup().await;
    let spec: WorkflowSpec = serde_json::from_value(json!({
        "name": "broken",
        "nodes": {
            "a": {"kind": "step", "waits_for": ["c"]},
            "b": {"kind": "step", "waits_for": ["ghost"]},
            "c": {"kind": "step", "waits_for": ["a"]},
            "d": {"kind": "step", "run_if": {"node": "b", "state": "completed"}},
            "e": {"kind": "step", "waits_for": ["b"], "join": "quorum", "min_success": 2},
            "f": {"kind": "step", "sleep": "1s"}
        }
    }))
    .expect("parses");
    match client.start_workflow_spec(&spec, &json!(null), None).await {
        Err(Error::InvalidWorkflow(problems)) => {
            assert_eq!(problems.len(), 5, "{problems:#?}");
            let all = problems.join("\n");
            for part in [
                "cycle: a → c → a",
                "ghost",
                "run_if looks at node b",
                "min_success = 2",
                "kind and sleep",
            ] {
                assert!(all.contains(part), "{part:?} in {all}");
            }
        }
        other => panic!("expected the problems, got {other:?}"),
    }
    assert!(client
        .workflows(&Default::default())
        .await
        .expect("list")
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runs_jobs_are_kept_while_the_run_is_and_pruned_after_it() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("kept");
    wf.node("a", node(json!({})));
    let mut b = node(json!({}));
    b.waits_for("a");
    wf.node("b", b);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Completed);
    running.shutdown().await;
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET finished_at = now() - interval '2 days'",
        &[],
    )
    .await
    .expect("age the jobs");
    let retention = remuda::maintenance::Retention::default();
    let pruned = client.prune(&retention, false).await.expect("prune");
    assert_eq!(
        (pruned.completed, pruned.workflows),
        (0, 0),
        "the run is young: its jobs stay"
    );
    conn.execute(
        "UPDATE remuda.workflows SET finished_at = now() - interval '2 days'",
        &[],
    )
    .await
    .expect("age the run");
    let pruned = client.prune(&retention, false).await.expect("prune");
    assert_eq!(
        (pruned.completed, pruned.workflows),
        (2, 1),
        "the run, then its jobs"
    );
    assert!(client.workflow(run.id).await.expect("read").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sub_workflow_that_ends_as_it_starts_leaves_each_sibling_started_once() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut instant = Workflow::new("instant");
    instant.sleep("nap", Duration::ZERO, |_| {});
    let mut wf = Workflow::new("parent");
    wf.node("a", node(json!({"items": [1, 2]})));
    wf.sub_workflow("s", &instant, |n| {
        n.waits_for("a");
    });
    let mut x = node(json!({}));
    x.waits_for("a").waits_for("s").join_any();
    x.map = Some(map_over("a", "/args/items"));
    wf.node("x", x);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Completed, "{:?}", run.error);
    assert_eq!(run.nodes["x"].attempt, 1, "started once");
    assert_eq!(
        run.nodes["x"]
            .children
            .as_ref()
            .expect("elements")
            .get("completed"),
        Some(&2)
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retrying_a_parent_whose_child_fails_again_at_once_is_counted_right() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut child = Workflow::new("child");
    child.node("u", node(json!({})));
    let mut m = node(json!({}));
    m.map = Some(map_over("u", "/not_there"));
    child.node("m", m);
    let mut wf = Workflow::new("parent");
    wf.sub_workflow("c", &child, |_| {});
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    client
        .retry_workflow(run.id)
        .await
        .expect("a retry is taken");
    let again = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(again.state, WorkflowState::Failed);
    assert_eq!(
        again.nodes["c"].error.as_ref().expect("error")["data"]["error"]["code"],
        "MAP_NOT_A_LIST"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_map_cancelled_mid_run_then_retried_completes_every_element_once() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("map_cancel");
    wf.node(
        "list",
        node(json!({"items": [{"v": 1}, {"hold": true}, {"hold": true}]})),
    );
    let mut each = node(json!({}));
    each.map = Some(map_over("list", "/args/items"));
    wf.node("each", each);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("started");
    common::until(WAIT, || async {
        let run = client.workflow(run.id).await.ok().flatten();
        run.and_then(|w| w.nodes["each"].children.clone())
            .and_then(|c| c.get("running").copied())
            == Some(2)
    })
    .await;
    client.cancel_workflow(run.id).await.expect("cancel");
    let cancelled = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(cancelled.state, WorkflowState::Cancelled);
    // the held elements' args still say hold: the retried jobs are the same jobs, so let the
    // task pass them this time
    step.fixed.store(true, Ordering::SeqCst);
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET args = args - 'hold' || '{\"item\": {}}' WHERE workflow_id = $1 AND args ? 'item' AND args -> 'item' ? 'hold'",
        &[&run.id],
    )
    .await
    .expect("unhold");
    client.retry_workflow(run.id).await.expect("retry");
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed, "{:?}", done.error);
    assert_eq!(
        done.nodes["each"]
            .children
            .as_ref()
            .expect("elements")
            .get("completed"),
        Some(&3)
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_job_is_retried_through_its_run_not_alone_and_repeated_waits_count_once() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("twice");
    wf.node("a", node(json!({"fail": "NO"})));
    let mut b = node(json!({}));
    b.waits_for("a").waits_for("a").join_any();
    wf.node("b", b);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    assert_eq!(
        state_of(&run, "b"),
        NodeState::Skipped,
        "a repeated wait is one dependency"
    );
    let job = run.nodes["a"].job_id.expect("a's job");
    match client.retry(job).await {
        Err(Error::InvalidInput(message)) => {
            assert!(message.contains("workflow retry"), "{message}")
        }
        other => panic!("a node's job retried alone: {other:?}"),
    }
    assert_eq!(
        client
            .retry_many(remuda::JobState::Failed, None, None)
            .await
            .expect("redrive"),
        0,
        "a redrive leaves node jobs to their runs"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_queue_is_full_fails_and_its_upstream_completes() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "tiny",
            &remuda::QueueChange {
                max_depth: Some(Some(1)),
                ..Default::default()
            },
        )
        .await
        .expect("limit");
    client
        .insert(
            remuda::NewJob::new("other", &json!({}))
                .expect("job")
                .queue("tiny"),
        )
        .await
        .expect("fills the queue");
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("full");
    wf.node("first", node(json!({})));
    let mut second = node(json!({}));
    second.waits_for("first").queue("tiny");
    wf.node("second", second);
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    assert_eq!(
        state_of(&run, "first"),
        NodeState::Completed,
        "the completion is not refused"
    );
    assert_eq!(
        run.nodes["second"].error.as_ref().expect("error")["code"],
        "QUEUE_FULL"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_past_its_deadline_fails_and_a_retry_gets_the_whole_deadline_again() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut wf = Workflow::new("deadline");
    wf.deadline(Duration::from_secs(1));
    wf.signal::<Value>("go", "go", None, |_| {});
    let run = run_to_end(&client, &wf, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    assert_eq!(
        run.error.as_ref().expect("error")["code"],
        "DEADLINE_EXCEEDED"
    );
    assert_eq!(state_of(&run, "go"), NodeState::Cancelled);
    client.retry_workflow(run.id).await.expect("retry");
    node_reaches(&client, run.id, "go", NodeState::Running).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = client
        .workflow(run.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        again.state,
        WorkflowState::Running,
        "not failed again at once: {:?}",
        again.error
    );
    client
        .signal_workflow(run.id, "go", &json!(true))
        .await
        .expect("signal");
    let done = client.wait_workflow(run.id, WAIT).await.expect("ends");
    assert_eq!(done.state, WorkflowState::Completed, "{:?}", done.error);
    running.shutdown().await;
}

/// Ends the job of `node` of run `id` by hand, as the completer would: `state` with
/// `result`, through the finalization seam. Forces the order in which nodes end.
async fn end_node(client: &Client, id: i64, node: &str, state: &str, result: Value) {
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "WITH done AS (
             UPDATE remuda.jobs SET state = $3::text::remuda.job_state, finished_at = now(), result = $4
             WHERE workflow_id = $1 AND workflow ->> 'node' = $2 AND state IN ('available', 'running')
             RETURNING id, queue, kind, flags, counted, attempt)
         SELECT remuda.transitioned(array_agg(ROW(d.id, d.queue, d.kind, d.flags, d.counted,
                    'available', $3::text::remuda.job_state, d.attempt)::remuda.transition))
         FROM done d",
        &[&id, &node, &state, &result],
    )
    .await
    .expect("end the node's job");
}

/// The args of the current job of `node` of run `id`, if it has one.
async fn job_args(client: &Client, id: i64, node: &str) -> Option<Value> {
    let status = client.workflow(id).await.expect("status").expect("run");
    let job = status.nodes[node].job_id?;
    Some(client.job(job).await.expect("job").expect("exists").args)
}

/// `join = "any"` decides a node only once every node it reads has ended: with b ending
/// first, c (run_if on a) and d (args from a) wait for a, whichever way a then ends; with
/// a ending first they are decided at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_any_waits_for_the_nodes_it_reads_in_either_completion_order() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("reads");
    wf.node("a", node(json!({})));
    wf.node("b", node(json!({})));
    let mut c = node(json!({}));
    c.waits_for("a")
        .waits_for("b")
        .join_any()
        .run_if(Condition::state("a", "completed"));
    wf.node("c", c);
    let mut d = node(json!({}));
    d.waits_for("a")
        .waits_for("b")
        .join_any()
        .args_from("x", "a");
    wf.node("d", d);
    for (first, a_ends) in [("b", "completed"), ("b", "failed"), ("a", "completed")] {
        let run = client
            .start_workflow(&wf, &json!(null))
            .await
            .expect("start")
            .id;
        let a_result = if a_ends == "completed" {
            json!({"ok": "from a"})
        } else {
            json!({"err": {"code": "NOPE", "message": "no", "data": null}})
        };
        let (first_result, second) = if first == "a" {
            (a_result.clone(), "b")
        } else {
            (json!({"ok": "from b"}), "a")
        };
        end_node(&client, run, first, "completed", first_result).await;
        let status = client.workflow(run).await.expect("status").expect("run");
        if first == "b" {
            for n in ["c", "d"] {
                assert_eq!(
                    status.nodes[n].state,
                    NodeState::Pending,
                    "{n} waits for a: {status:?}"
                );
            }
            end_node(&client, run, second, a_ends, a_result.clone()).await;
        }
        let status = client.workflow(run).await.expect("status").expect("run");
        let c_state = if a_ends == "completed" {
            NodeState::Running
        } else {
            NodeState::Skipped
        };
        assert_eq!(
            status.nodes["c"].state, c_state,
            "after {first} first: {status:?}"
        );
        assert_eq!(status.nodes["d"].state, NodeState::Running, "{status:?}");
        let args = job_args(&client, run, "d").await.expect("d has a job");
        assert_eq!(args["x"], a_result, "d took a's end, not a null");
    }
}

/// A run that a duty cannot advance (here a trigger of the operator's refuses it) is set
/// aside: it fails with ADVANCE_FAILED, the failure is recorded, and the other runs of the
/// same timer batch go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_timers_cannot_advance_is_set_aside_and_the_others_wake() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("naps");
    let nap = NodeSpec {
        sleep: Some("200ms".into()),
        ..NodeSpec::default()
    };
    wf.node("nap", nap);
    let stuck = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start")
        .id;
    let woken = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start")
        .id;
    let conn = client.database().conn().await.expect("conn");
    conn.batch_execute(&format!(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'run {stuck} refused' USING ERRCODE = 'RH002'; END $$;
         CREATE TRIGGER refuse BEFORE UPDATE ON remuda.workflow_nodes FOR EACH ROW
             WHEN (NEW.workflow_id = {stuck} AND NEW.state = 'completed') EXECUTE FUNCTION refuse();"
    ))
    .await
    .expect("trigger");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ended: i32 = conn
        .query_one("SELECT remuda.workflow_timers(100)", &[])
        .await
        .expect("timers run")
        .get(0);
    assert!(ended >= 1, "{ended}");
    let woken = client.workflow(woken).await.expect("status").expect("run");
    assert_eq!(woken.state, WorkflowState::Completed, "{woken:?}");
    let stuck_run = client.workflow(stuck).await.expect("status").expect("run");
    assert_eq!(stuck_run.state, WorkflowState::Failed, "{stuck_run:?}");
    assert_eq!(
        stuck_run.error.as_ref().expect("error")["code"],
        "ADVANCE_FAILED"
    );
    let recorded: String = conn
        .query_one(
            "SELECT message FROM remuda.failures WHERE source = 'workflow_timers' AND subject = $1",
            &[&format!("run {stuck}")],
        )
        .await
        .expect("recorded")
        .get(0);
    assert!(recorded.contains("refused"), "{recorded}");
}

/// A definition that could not run as written is refused where it comes in: at compile (a
/// node's queue), and by `remuda.start_workflow` for what reaches it from any language
/// (unknown deps, a cycle, dependents that do not match, a bad queue or notify target).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_that_could_not_run_are_refused_at_compile_and_at_start_workflow() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("checked");
    let mut bad = node(json!({}));
    bad.queue = Some(String::new());
    wf.node("bad", bad);
    let Err(refused) = client.start_workflow(&wf, &json!(null)).await else {
        panic!("a node with an empty queue must be refused");
    };
    assert!(
        refused
            .to_string()
            .contains("node bad: the queue name is empty"),
        "{refused}"
    );

    let mut good = Workflow::new("checked");
    good.node("a", node(json!({})));
    let mut b = node(json!({}));
    b.waits_for("a");
    good.node("b", b);
    let compiled = remuda::workflow::compile(good.spec()).expect("compiles");
    let conn = client.database().conn().await.expect("conn");
    let start = |def: Value| {
        let conn = &conn;
        async move {
            conn.query_one("SELECT remuda.start_workflow($1)", &[&def])
                .await
                .map(|_| ())
                .map_err(|e| remuda::Error::Db(e).to_string())
        }
    };
    start(compiled.clone())
        .await
        .expect("the compiled definition starts");
    let with = |pointer: &str, value: Value| {
        let mut def = compiled.clone();
        *def.pointer_mut(pointer).expect(pointer) = value;
        def
    };
    let mut swapped = compiled.clone();
    swapped["nodes"].as_array_mut().expect("nodes").reverse();
    let mut notify = compiled.clone();
    notify["notify"] = json!({"webhook": "", "on": ["failed"]});
    let mut success = compiled.clone();
    success["success"] = json!(["a"]);
    let mut output = compiled.clone();
    output["output"] = json!("zzz");
    let mut queue = compiled.clone();
    queue["nodes"][1]["queue"] = json!("");
    // only nodes its conditions look at may be read without being joined
    let mut read_only_text = compiled.clone();
    read_only_text["nodes"][1]["read_only"] = json!("a");
    let mut read_only_joined = compiled.clone();
    read_only_joined["nodes"][1]["read_only"] = json!(["a"]);
    let cases = [
        (with("/nodes/1/deps", json!(["a", "zzz"])), "node b: deps [\"a\", \"zzz\"] name a node that does not exist"),
        (swapped, "node b: deps [\"a\"] name a node that does not exist or does not come before it (a cycle)"),
        (with("/nodes/0/dependents", json!([])), "node a: dependents [] are not the nodes that depend on it"),
        (queue, "the queue name is empty"),
        (success, "is not a list of lists of its node ids"),
        (output, "output \"zzz\" names no node"),
        (notify, "notify"),
        (read_only_text, "read_only must list nodes among its deps that its conditions look at"),
        (read_only_joined, "read_only must list nodes among its deps that its conditions look at"),
    ];
    for (def, says) in cases {
        let err = start(def).await.expect_err(says);
        assert!(err.contains(says), "{says:?} in {err}");
    }
}

/// The backend pids that block session `pid`, polled until they are `blockers`.
async fn blocked_by(client: &Client, pid: i32, blockers: &[i32]) {
    let deadline = std::time::Instant::now() + WAIT;
    let conn = client.database().conn().await.expect("conn");
    loop {
        let row = conn
            .query_one(
                "SELECT pg_blocking_pids($1), (SELECT state || ' ' || COALESCE(wait_event, '') || ' ' || query
                                               FROM pg_stat_activity WHERE pid = $1)",
                &[&pid],
            )
            .await
            .expect("pg_blocking_pids");
        let now: Vec<i32> = row.get(0);
        if now == blockers {
            return;
        }
        let doing: Option<String> = row.get(1);
        assert!(
            std::time::Instant::now() < deadline,
            "session {pid} is blocked by {now:?}, not {blockers:?}: {doing:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A run's cancel reads each job's state under the job's lock: a map element started by a
/// completion that committed while the cancel waited, and claimed by a worker while the
/// cancel waited again, is cancelled as the running job it is, so its worker is told
/// (the seam sees it leave `running`). The interleaving is forced with row locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_sees_a_job_claimed_while_it_waited_as_running() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("claimed");
    wf.node("list", node(json!({})));
    let mut each = node(json!({}));
    each.map = Some(map_over("list", "/items"));
    wf.node("each", each);
    let mut later = node(json!({}));
    later.waits_for("each");
    wf.node("later", later);
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start")
        .id;
    let setup = client.database().conn().await.expect("conn");
    setup
        .batch_execute(
            "CREATE TABLE seen (id bigint, old_state text, new_state text);
             CREATE FUNCTION see(changed remuda.transition[]) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO seen SELECT c.id, c.old_state, c.new_state FROM unnest(changed) c $$;
             INSERT INTO remuda.transition_hooks (name, function) VALUES ('see', 'see(remuda.transition[])');",
        )
        .await
        .expect("hook");
    let session = || async {
        let conn = client.database().conn().await.expect("conn");
        let pid: i32 = conn
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .expect("pid")
            .get(0);
        conn.batch_execute("BEGIN").await.expect("begin");
        (conn, pid)
    };
    // D: holds node `later`, which the cancel updates and the completion does not touch
    let (holder, d_pid) = session().await;
    holder
        .execute(
            "SELECT 1 FROM remuda.workflow_nodes WHERE workflow_id = $1 AND node = 'later' FOR UPDATE",
            &[&run],
        )
        .await
        .expect("lock a node");
    // C: the list node ends, its map's three elements start; not committed yet
    let (completion, c_pid) = session().await;
    completion
        .execute(
            "WITH done AS (
                 SELECT f.* FROM remuda.finish_jobs(
                     ARRAY(SELECT id FROM remuda.jobs_live WHERE workflow_id = $1 FOR UPDATE),
                     '{completed}', ARRAY['{\"ok\": {\"items\": [1, 2, 3]}}'::jsonb], '{NULL}',
                     '{NULL}', '{NULL}', '{NULL}') f)
             SELECT remuda.transitioned(array_agg(ROW(d.id, d.queue, d.kind, d.flags, d.counted,
                        'available', 'completed', d.attempt)::remuda.transition)) FROM done d",
            &[&run],
        )
        .await
        .expect("complete the list");
    // S: the cancel, waiting for C; then, past its first lock, for D
    let (stop, s_pid) = session().await;
    let cancel = tokio::spawn(async move {
        let result = stop
            .execute("SELECT remuda.workflow_cancel($1)", &[&run])
            .await;
        stop.batch_execute("COMMIT")
            .await
            .expect("commit the cancel");
        result
    });
    blocked_by(&client, s_pid, &[c_pid]).await;
    completion
        .batch_execute("COMMIT")
        .await
        .expect("commit the completion");
    blocked_by(&client, s_pid, &[d_pid]).await;
    // K: a worker claims the first element while S waits
    let (claim, k_pid) = session().await;
    let claimed: i64 = claim
        .query_one(
            "UPDATE remuda.jobs SET state = 'running', started_at = now(), attempt = 1,
                 worker_id = 'w-1'
             WHERE id = (SELECT min(id) FROM remuda.jobs WHERE workflow_id = $1 AND workflow ? 'index')
             RETURNING id",
            &[&run],
        )
        .await
        .expect("claim")
        .get(0);
    holder
        .batch_execute("COMMIT")
        .await
        .expect("release the node");
    blocked_by(&client, s_pid, &[k_pid]).await;
    claim
        .batch_execute("COMMIT")
        .await
        .expect("commit the claim");
    cancel.await.expect("join").expect("cancel");
    let old: String = setup
        .query_one(
            "SELECT old_state FROM seen WHERE id = $1 AND new_state = 'cancelled'",
            &[&claimed],
        )
        .await
        .expect("the claimed element was cancelled through the seam")
        .get(0);
    assert_eq!(
        old, "running",
        "its worker is told only if it is seen running"
    );
    let status = client.workflow(run).await.expect("status").expect("run");
    assert_eq!(status.state, WorkflowState::Cancelled);
}

/// A workflow's job belongs to its run, for one job and many alike: an operator's cancel or
/// retry of it is refused, naming the run, and leaves it as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflows_job_is_cancelled_and_retried_only_through_its_run() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("owned");
    wf.node("only", node(json!({})));
    let run = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start")
        .id;
    let status = client.workflow(run).await.expect("status").expect("run");
    let job = status.nodes["only"].job_id.expect("a job");
    for refused in [client.cancel(job).await, client.retry(job).await] {
        let err = refused.expect_err("refused");
        assert!(
            err.to_string()
                .contains(&format!("belongs to workflow run {run}")),
            "{err}"
        );
    }
    let all = remuda::JobFilter::default();
    let bulk = client
        .act_on_matching(&all, remuda::BulkAction::Cancel, None, false)
        .await
        .expect("bulk cancel");
    assert_eq!((bulk.matched, bulk.changed), (1, 0));
    let still = client.job(job).await.expect("job").expect("exists");
    assert_eq!(still.state, remuda::JobState::Available);
    client
        .cancel_workflow(run)
        .await
        .expect("the run cancels it");
    let gone = client.job(job).await.expect("job").expect("exists");
    assert_eq!(gone.state, remuda::JobState::Cancelled);
}

/// Pruning keeps a finished run while a sub-workflow under it, retried on its own, still
/// runs; once that ends, both go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finished_run_is_kept_while_a_sub_workflow_retried_alone_runs() {
    let (_db, client) = setup().await;
    let step = Step::default();
    let running = worker(&client, &step);
    let mut child = Workflow::new("child");
    child.node("broken", node(json!({"fail": "CHILD_BROKE"})));
    let mut parent = Workflow::new("parent");
    parent.sub_workflow("child", &child, |_| {});
    let run = run_to_end(&client, &parent, json!(null)).await;
    assert_eq!(run.state, WorkflowState::Failed);
    running.shutdown().await;
    let child_id = run.nodes["child"].workflow_id.expect("the child's run");
    // retried alone with no worker up: it stays running
    client
        .retry_workflow(child_id)
        .await
        .expect("retry the child");
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.workflows SET finished_at = now() - interval '40 days' WHERE id = $1",
        &[&run.id],
    )
    .await
    .expect("age the parent");
    let retention = remuda::maintenance::Retention::default();
    let pruned = client.prune(&retention, false).await.expect("prune");
    assert_eq!(pruned.workflows, 0, "the parent stays while its child runs");
    let child_run = client
        .workflow(child_id)
        .await
        .expect("read")
        .expect("the child is kept");
    assert_eq!(child_run.state, WorkflowState::Running);
    step.fixed.store(true, Ordering::SeqCst);
    let running = worker(&client, &step);
    let ended = client
        .wait_workflow(child_id, WAIT)
        .await
        .expect("the child ends");
    assert_eq!(ended.state, WorkflowState::Completed);
    running.shutdown().await;
    // (the worker's own retention may have pruned them already)
    client.prune(&retention, false).await.expect("prune");
    assert!(
        client.workflow(run.id).await.expect("read").is_none(),
        "then the parent goes"
    );
    assert!(
        client.workflow(child_id).await.expect("read").is_none(),
        "and its child with it"
    );
}

/// A run cancelled while paused and then retried holds its jobs again at the next pause: what
/// a pause held is released by the cancel, not carried into the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_while_paused_then_retried_is_held_by_the_next_pause() {
    let (_db, client) = setup().await;
    let run = three_elements_waiting(&client).await;
    client.pause_workflow(run).await.expect("pause");
    assert_eq!(
        elements(&client, run).await,
        [("held".to_string(), 3)].into()
    );
    client.cancel_workflow(run).await.expect("cancel");
    assert_eq!(
        elements(&client, run).await,
        [("cancelled".to_string(), 3)].into()
    );
    client.retry_workflow(run).await.expect("retry");
    assert_eq!(
        elements(&client, run).await,
        [("available".to_string(), 3)].into()
    );
    client.pause_workflow(run).await.expect("pause again");
    assert_eq!(
        elements(&client, run).await,
        [("held".to_string(), 3)].into(),
        "held again"
    );
}

/// A run that a duty can neither advance nor stop is recorded and passed over from then on:
/// 31 such runs, more than one timer batch, hold back no healthy run behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_cannot_even_be_stopped_do_not_fill_the_timers_batch() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("naps");
    let nap = NodeSpec {
        sleep: Some("100ms".into()),
        ..NodeSpec::default()
    };
    wf.node("nap", nap);
    let mut stuck = Vec::new();
    for _ in 0..31 {
        stuck.push(
            client
                .start_workflow(&wf, &json!(null))
                .await
                .expect("start")
                .id,
        );
    }
    let healthy = client
        .start_workflow(&wf, &json!(null))
        .await
        .expect("start")
        .id;
    let ids = stuck
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let conn = client.database().conn().await.expect("conn");
    conn.batch_execute(&format!(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'RH003'; END $$;
         CREATE TRIGGER refuse_nodes BEFORE UPDATE ON remuda.workflow_nodes FOR EACH ROW
             WHEN (NEW.workflow_id IN ({ids}) AND NEW.state = 'completed') EXECUTE FUNCTION refuse();
         CREATE TRIGGER refuse_runs BEFORE UPDATE ON remuda.workflows FOR EACH ROW
             WHEN (NEW.id IN ({ids}) AND NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION refuse();"
    ))
    .await
    .expect("triggers");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..2 {
        conn.query_one("SELECT remuda.workflow_timers(30)", &[])
            .await
            .expect("timers run");
    }
    let run = client
        .workflow(healthy)
        .await
        .expect("status")
        .expect("run");
    assert_eq!(run.state, WorkflowState::Completed, "{run:?}");
    let unstoppable: i64 = conn
        .query_one(
            "SELECT count(*) FROM remuda.failures WHERE subject LIKE '% (stop)'",
            &[],
        )
        .await
        .expect("failures")
        .get(0);
    assert_eq!(unstoppable, 31);
    for id in stuck {
        let run = client.workflow(id).await.expect("status").expect("run");
        assert_eq!(
            run.state,
            WorkflowState::Running,
            "left as it was, recorded"
        );
    }
}
