//! One W3C trace from the enqueue to the task: a job keeps the context it was enqueued with,
//! each attempt runs as a child of it under a span of its own, what a task enqueues continues
//! the attempt's trace, a workflow's node jobs (task nodes, map elements, sub-workflows) take
//! the run's, and every way in keeps it or refuses a malformed one saying why.

mod common;

use common::{fast_config, setup, start};
use remuda::trace::{attempt_span_id, scope};
use remuda::workflow::{MapSpec, NodeSpec, Workflow, WorkflowState};
use remuda::{Client, JobContext, NewJob, Task, TaskError, TaskOptions, TraceContext, Worker};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn enqueuer() -> TraceContext {
    TraceContext::parse(TP, Some("vendor=abc")).expect("a valid context")
}

/// Each attempt's number and trace context, as the task saw them.
type Seen = Arc<Mutex<Vec<(i32, Option<TraceContext>)>>>;

/// Records the trace of each attempt, fails its first, and on its second enqueues a `leaf`.
#[derive(Clone, Default)]
struct Parent {
    seen: Seen,
    client: Arc<Mutex<Option<Client>>>,
}

impl Task for Parent {
    const KIND: &'static str = "parent";
    type Args = Value;
    type Output = i64;

    fn options() -> TaskOptions {
        TaskOptions::default()
            .max_attempts(2)
            .backoff(remuda::Backoff::Fixed {
                delay: Duration::from_millis(10),
                jitter: false,
            })
    }

    async fn run(&self, ctx: JobContext, _args: Value) -> Result<i64, TaskError> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push((ctx.attempt, ctx.trace.clone()));
        }
        if ctx.attempt == 1 {
            return Err(TaskError::new("AGAIN", "the first attempt fails"));
        }
        let client = self.client.lock().ok().and_then(|c| c.clone());
        let client = client.ok_or_else(|| TaskError::new("NO_CLIENT", "no client"))?;
        client
            .insert(
                NewJob::new("leaf", &json!({}))
                    .map_err(|e| TaskError::new("BAD", e.to_string()))?,
            )
            .await
            .map_err(|e| TaskError::new("ENQUEUE", e.to_string()))
    }
}

/// Returns its args (a workflow's node).
struct Echo;

impl Task for Echo {
    const KIND: &'static str = "echo";
    type Args = Value;
    type Output = Value;

    async fn run(&self, _ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        Ok(args)
    }
}

async fn stored_trace(client: &Client, id: i64) -> Option<TraceContext> {
    client.job(id).await.expect("job").expect("exists").trace
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_runs_as_a_child_of_the_enqueuers_span_and_what_it_enqueues_continues_it() {
    let (_db, client) = setup().await;
    let parent = Parent::default();
    *parent.client.lock().expect("lock") = Some(client.clone());
    let id = client
        .insert(
            NewJob::new("parent", &json!({}))
                .expect("job")
                .trace(enqueuer()),
        )
        .await
        .expect("enqueue");
    assert_eq!(stored_trace(&client, id).await, Some(enqueuer()));
    let running = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(parent.clone()),
    );
    let done = client
        .wait(id, Duration::from_secs(30))
        .await
        .expect("done");
    running.shutdown().await;
    assert_eq!(done.state, remuda::JobState::Completed, "{done:?}");

    let seen = parent.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "two attempts");
    let (first, second) = (seen[0].1.clone(), seen[1].1.clone());
    let first = first.expect("the first attempt has a trace");
    let second = second.expect("the second attempt has a trace");
    for t in [&first, &second] {
        assert_eq!(t.trace_id(), enqueuer().trace_id(), "one trace");
        assert_ne!(t.parent_id(), enqueuer().parent_id(), "a span of its own");
        assert!(t.sampled());
        assert_eq!(t.tracestate.as_deref(), Some("vendor=abc"));
    }
    assert_ne!(
        first.parent_id(),
        second.parent_id(),
        "each attempt its span"
    );
    // the span id follows from the job, the attempt and the claim, wherever it is computed
    let started = done.started_at.expect("started");
    assert_eq!(second.parent_id(), attempt_span_id(id, 2, started));

    // the job enqueued by the second attempt continues the trace under that attempt's span
    let leaf: i64 = serde_json::from_value(match done.result {
        Some(remuda::JobResult::Ok(v)) => v,
        other => panic!("no result: {other:?}"),
    })
    .expect("the leaf's id");
    let leaf = stored_trace(&client, leaf)
        .await
        .expect("the leaf continues the trace");
    assert_eq!(leaf, second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflows_node_jobs_map_elements_and_sub_workflows_take_the_runs_trace() {
    let (_db, client) = setup().await;
    let mut child = Workflow::new("child");
    child.node("inner", NodeSpec::task("echo", json!({})));
    let mut wf = Workflow::new("traced");
    wf.node("list", NodeSpec::task("echo", json!({"items": [1, 2, 3]})));
    let mut each = NodeSpec::task("echo", json!({}));
    each.map = Some(MapSpec {
        over: "list".into(),
        pointer: "/items".into(),
    });
    wf.node("each", each);
    wf.sub_workflow("sub", &child, |_| {});
    let run = scope(Some(enqueuer()), client.start_workflow(&wf, &json!(null)))
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
    let rows = conn
        .query(
            "SELECT j.traceparent, j.tracestate, count(*) FROM remuda.jobs j
             JOIN remuda.workflows w ON w.id = j.workflow_id
             WHERE w.id = $1 OR w.parent_id = $1 GROUP BY 1, 2",
            &[&run.id],
        )
        .await
        .expect("node jobs");
    let traces: Vec<(Option<String>, Option<String>, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    // list, three elements, and the sub-workflow's inner node
    assert_eq!(
        traces,
        [(Some(TP.to_string()), Some("vendor=abc".to_string()), 5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_in_keeps_the_trace_and_a_malformed_one_is_refused() {
    let (_db, client) = setup().await;
    let job = || NewJob::new("leaf", &json!({})).expect("job");
    let one = client.insert(job().trace(enqueuer())).await.expect("one");
    let unique = client
        .insert(job().trace(enqueuer()).unique_key("u"))
        .await
        .expect("unique");
    let formed = client
        .insert(
            job()
                .trace(enqueuer())
                .unique_key("d")
                .debounce(Duration::from_secs(60)),
        )
        .await
        .expect("formed");
    // COPY, and the current context for a job that gives none
    scope(
        Some(enqueuer()),
        client.insert_bulk(&[job().queue("copied")]),
    )
    .await
    .expect("copy");
    for id in [one, unique, formed] {
        assert_eq!(
            stored_trace(&client, id).await,
            Some(enqueuer()),
            "job {id}"
        );
    }
    let conn = client.database().conn().await.expect("conn");
    let copied: Option<String> = conn
        .query_one(
            "SELECT traceparent FROM remuda.jobs WHERE queue = 'copied'",
            &[],
        )
        .await
        .expect("copied")
        .get(0);
    assert_eq!(copied.as_deref(), Some(TP));
    let sql: i64 = conn
        .query_one(
            "SELECT remuda.enqueue('leaf', traceparent => $1, tracestate => 'vendor=abc')",
            &[&TP],
        )
        .await
        .expect("sql")
        .get(0);
    assert_eq!(stored_trace(&client, sql).await, Some(enqueuer()));

    // malformed: refused before anything is written, saying what is wrong
    let bad = "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01";
    let refused = TraceContext::parse(bad, None).expect_err("an all-zero span id");
    assert!(refused.to_string().contains("parent span id"), "{refused}");
    let forged = TraceContext {
        traceparent: "not a traceparent".into(),
        tracestate: None,
    };
    let refused = client
        .insert(job().trace(forged))
        .await
        .expect_err("a forged context");
    assert!(refused.to_string().contains("traceparent"), "{refused}");
    let refused = conn
        .query_one("SELECT remuda.enqueue('leaf', traceparent => $1)", &[&bad])
        .await
        .expect_err("SQL refuses it too");
    assert!(
        format!("{refused:?}").contains("not a W3C trace context"),
        "{refused:?}"
    );
    let total: i64 = conn
        .query_one("SELECT count(*) FROM remuda.jobs", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(total, 5, "nothing written by the refusals");
}
