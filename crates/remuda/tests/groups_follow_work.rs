//! A tenant's fair-share group follows its work: a task is told its job's group, and the
//! jobs it enqueues and the workflows it starts without a group of their own take it; a
//! workflow run's node jobs (map elements and sub-workflows too) take the run's group; a
//! schedule's fired jobs take the schedule's; a run started again keeps its group.

mod common;

use common::{fast_config, setup, start};
use remuda::group::scope;
use remuda::schedule::{Declared, Pattern, Schedule};
use remuda::workflow::{MapSpec, NodeSpec, Workflow, WorkflowState};
use remuda::{Client, JobContext, NewJob, Task, TaskError, Worker};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Records the group it was told, then enqueues a job without a group, one with its own,
/// and starts a one-node workflow: what it made, as ids.
#[derive(Clone, Default)]
struct Fanout {
    told: Arc<Mutex<Vec<Option<String>>>>,
    client: Arc<Mutex<Option<Client>>>,
}

impl Task for Fanout {
    const KIND: &'static str = "fanout";
    type Args = Value;
    type Output = Value;

    async fn run(&self, ctx: JobContext, _args: Value) -> Result<Value, TaskError> {
        if let Ok(mut told) = self.told.lock() {
            told.push(ctx.group.clone());
        }
        let client = self.client.lock().ok().and_then(|c| c.clone());
        let client = client.ok_or_else(|| TaskError::new("NO_CLIENT", "no client"))?;
        let bad = |e: remuda::Error| TaskError::new("ENQUEUE", e.to_string());
        let leaf = || NewJob::new("leaf", &json!({})).map_err(bad);
        let plain = client.insert(leaf()?).await.map_err(bad)?;
        let own = client.insert(leaf()?.group("other")).await.map_err(bad)?;
        let mut wf = Workflow::new("from_a_task");
        wf.node("only", NodeSpec::task("leaf", json!({})));
        let run = client
            .start_workflow(&wf, &json!(null))
            .await
            .map_err(bad)?;
        Ok(json!({"plain": plain, "own": own, "run": run.id}))
    }
}

/// Returns its args.
struct Echo;

impl Task for Echo {
    const KIND: &'static str = "echo";
    type Args = Value;
    type Output = Value;

    async fn run(&self, _ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        Ok(args)
    }
}

async fn group_of(client: &Client, id: i64) -> Option<String> {
    client.job(id).await.expect("job").expect("exists").group
}

async fn run_group(client: &Client, run: i64) -> Option<String> {
    let conn = client.database().conn().await.expect("conn");
    conn.query_one(
        "SELECT group_key FROM remuda.workflows WHERE id = $1",
        &[&run],
    )
    .await
    .expect("run")
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_told_its_group_and_what_it_enqueues_or_starts_takes_it() {
    let (_db, client) = setup().await;
    let fanout = Fanout::default();
    *fanout.client.lock().expect("lock") = Some(client.clone());
    let grouped = client
        .insert(
            NewJob::new("fanout", &json!({}))
                .expect("job")
                .group("acme"),
        )
        .await
        .expect("grouped");
    let ungrouped = client
        .insert(NewJob::new("fanout", &json!({})).expect("job"))
        .await
        .expect("ungrouped");
    let running = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(fanout.clone()),
    );
    let mut made = Vec::new();
    for id in [grouped, ungrouped] {
        let done = client
            .wait(id, Duration::from_secs(30))
            .await
            .expect("done");
        let Some(remuda::JobResult::Ok(out)) = done.result else {
            panic!("job {id} did not complete: {done:?}");
        };
        made.push(out);
    }
    running.shutdown().await;
    let mut told = fanout.told.lock().expect("lock").clone();
    told.sort();
    assert_eq!(
        told,
        [None, Some("acme".to_string())],
        "each task told its group"
    );
    let id = |v: &Value, k: &str| v[k].as_i64().expect("an id");
    let (from_acme, from_none) = (&made[0], &made[1]);
    assert_eq!(
        group_of(&client, id(from_acme, "plain")).await.as_deref(),
        Some("acme"),
        "a job enqueued without a group takes the task's"
    );
    assert_eq!(
        group_of(&client, id(from_acme, "own")).await.as_deref(),
        Some("other"),
        "a job's own group wins"
    );
    assert_eq!(
        run_group(&client, id(from_acme, "run")).await.as_deref(),
        Some("acme")
    );
    assert_eq!(group_of(&client, id(from_none, "plain")).await, None);
    assert_eq!(run_group(&client, id(from_none, "run")).await, None);
    // and the run's node job took the run's group
    let conn = client.database().conn().await.expect("conn");
    let node_group: Option<String> = conn
        .query_one(
            "SELECT group_key FROM remuda.jobs WHERE workflow_id = $1",
            &[&id(from_acme, "run")],
        )
        .await
        .expect("node job")
        .get(0);
    assert_eq!(node_group.as_deref(), Some("acme"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_node_jobs_map_elements_and_sub_workflows_take_its_group() {
    let (_db, client) = setup().await;
    let mut child = Workflow::new("child");
    child.node("inner", NodeSpec::task("echo", json!({})));
    let mut wf = Workflow::new("grouped");
    wf.node("list", NodeSpec::task("echo", json!({"items": [1, 2, 3]})));
    let mut each = NodeSpec::task("echo", json!({}));
    each.map = Some(MapSpec {
        over: "list".into(),
        pointer: "/items".into(),
    });
    wf.node("each", each);
    wf.sub_workflow("sub", &child, |_| {});
    let run = scope(
        Some("acme".into()),
        client.start_workflow(&wf, &json!(null)),
    )
    .await
    .expect("started");
    let running = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(Echo),
    );
    let status = client
        .wait_workflow(run.id, Duration::from_secs(30))
        .await
        .expect("the run ends");
    running.shutdown().await;
    assert_eq!(status.state, WorkflowState::Completed, "{status:?}");
    let conn = client.database().conn().await.expect("conn");
    let groups: Vec<(Option<String>, i64)> = conn
        .query(
            "SELECT j.group_key, count(*) FROM remuda.jobs j
             JOIN remuda.workflows w ON w.id = j.workflow_id
             WHERE w.id = $1 OR w.parent_id = $1 GROUP BY 1",
            &[&run.id],
        )
        .await
        .expect("node jobs")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    // list, three elements, and the sub-workflow's inner node
    assert_eq!(groups, [(Some("acme".to_string()), 5)]);
    let runs: Vec<Option<String>> = conn
        .query(
            "SELECT group_key FROM remuda.workflows WHERE id = $1 OR parent_id = $1",
            &[&run.id],
        )
        .await
        .expect("runs")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(runs, [Some("acme".to_string()), Some("acme".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_its_jobs_in_its_group_and_a_bad_group_is_refused() {
    let (_db, client) = setup().await;
    let every = Pattern::every("1h").expect("pattern");
    let schedule = Schedule::new("report", "leaf", every.clone()).group("acme");
    assert!(matches!(
        client.set_schedule(&schedule).await.expect("declared"),
        Declared::Created(_)
    ));
    let info = client
        .schedule("report")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(info.group.as_deref(), Some("acme"));
    let fired = client.trigger_schedule("report").await.expect("triggered");
    assert_eq!(group_of(&client, fired).await.as_deref(), Some("acme"));
    // the group is part of the definition: taking it away is a change
    let ungrouped = Schedule::new("report", "leaf", every.clone());
    assert!(matches!(
        client.set_schedule(&ungrouped).await.expect("declared"),
        Declared::Changed(_)
    ));
    assert_eq!(
        client.set_schedule(&ungrouped).await.expect("declared"),
        Declared::Unchanged
    );
    let refused = client
        .set_schedule(&Schedule::new("bad", "leaf", every).group("a\nb"))
        .await
        .expect_err("a newline in a group");
    assert!(
        refused.to_string().contains("control character"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_start_takes_a_group_and_refuses_a_bad_one() {
    let (_db, client) = setup().await;
    let mut wf = Workflow::new("sql_started");
    wf.node("only", NodeSpec::task("leaf", json!({})));
    let compiled = wf.compile().expect("compiles");
    let conn = client.database().conn().await.expect("conn");
    let run: i64 = conn
        .query_one(
            "SELECT remuda.start_workflow($1, group_key => 'acme')",
            &[&compiled],
        )
        .await
        .expect("started")
        .get(0);
    assert_eq!(run_group(&client, run).await.as_deref(), Some("acme"));
    let node: Option<String> = conn
        .query_one(
            "SELECT group_key FROM remuda.jobs WHERE workflow_id = $1",
            &[&run],
        )
        .await
        .expect("node job")
        .get(0);
    assert_eq!(node.as_deref(), Some("acme"));
    let refused = conn
        .query_one(
            "SELECT remuda.start_workflow($1, group_key => E'a\\tb')",
            &[&compiled],
        )
        .await
        .expect_err("a tab in a group");
    assert!(
        format!("{refused:?}").contains("control character"),
        "{refused:?}"
    );
    let refused = scope(
        Some(String::new()),
        client.start_workflow(&wf, &json!(null)),
    )
    .await
    .err()
    .expect("an empty group");
    assert!(refused.to_string().contains("group"), "{refused}");
    for refused in [
        scope(
            Some("a\nb".into()),
            client.insert(NewJob::new("leaf", &json!({})).expect("job")),
        )
        .await
        .err(),
        scope(
            Some("a\nb".into()),
            client.insert_bulk(&[NewJob::new("leaf", &json!({})).expect("job")]),
        )
        .await
        .err(),
    ] {
        let refused = refused.expect("a current group with a newline");
        assert!(
            refused.to_string().contains("control character"),
            "{refused}"
        );
    }
    // started again (the dashboard's "run again"), a run works for the same group
    let again = client
        .start_workflow_like(run, &json!(null), None)
        .await
        .expect("started again");
    assert_eq!(run_group(&client, again.id).await.as_deref(), Some("acme"));
}
