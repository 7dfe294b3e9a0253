//! `remuda bench --workflow wide|chain|map --nodes N`: one workflow run of no-op tasks on one
//! worker, beside a plain drain of as many jobs measured in the same run.
//! * `wide`: a root, N − 2 nodes waiting for it, a sink waiting for them all: nodes/s.
//! * `chain`: N nodes each waiting for the one before: the step latency (a node's job
//!   finished → the next node's job started) p50 and p99.
//! * `map`: a root whose result holds a list of N elements, a map node with one job per
//!   element, a sink receiving the list of their results: elements/s.

use super::{percentile_of, KIND};
use crate::error::{CliError, CliResult};
use crate::executors::Noop;
use crate::output::print_json;
use remuda::workflow::{MapSpec, NodeSpec, Workflow};
use remuda::{Client, Database, NewJob, TaskOptions, Worker, WorkerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The workflow's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// Fan-out then fan-in.
    Wide,
    /// A line of nodes.
    Chain,
    /// One map node over a list.
    Map,
}

fn definition(shape: Shape, nodes: usize) -> Workflow {
    let mut wf = Workflow::new(&format!("bench_{shape:?}").to_lowercase());
    let task = |args: Value| NodeSpec::task(KIND, args);
    match shape {
        Shape::Wide => {
            wf.node("root", task(json!({})));
            let mut sink = task(json!({}));
            for i in 0..nodes.saturating_sub(2) {
                let mut n = task(json!({"i": i}));
                n.waits_for("root");
                wf.node(&format!("n{i}"), n);
                sink.waits_for(&format!("n{i}"));
            }
            wf.node("sink", sink);
        }
        Shape::Chain => {
            wf.node("n0", task(json!({})));
            for i in 1..nodes {
                let mut n = task(json!({"i": i}));
                n.waits_for(&format!("n{}", i - 1));
                wf.node(&format!("n{i}"), n);
            }
        }
        Shape::Map => {
            wf.node(
                "root",
                task(json!({"items": (0..nodes).collect::<Vec<_>>()})),
            );
            let mut each = task(json!({}));
            each.map = Some(MapSpec {
                over: "root".into(),
                pointer: "/items".into(),
            });
            wf.node("each", each);
            let mut sink = task(json!({}));
            sink.args_from("all", "each");
            wf.node("sink", sink);
        }
    }
    wf
}

pub(super) async fn with_worker<T>(
    db: &Database,
    run: impl AsyncFnOnce(&Client) -> CliResult<T>,
) -> CliResult<T> {
    with_worker_config(db, WorkerConfig::default(), run).await
}

/// [`with_worker`] with the worker's settings (its concurrency is the bench's 2000).
pub(super) async fn with_worker_config<T>(
    db: &Database,
    config: WorkerConfig,
    run: impl AsyncFnOnce(&Client) -> CliResult<T>,
) -> CliResult<T> {
    with_task_worker(db, config, Arc::new(Noop), run).await
}

/// Runs `run` beside one worker of `config` (2 000 slots) running `task` for the bench's kind.
pub(super) async fn with_task_worker<T>(
    db: &Database,
    config: WorkerConfig,
    task: Arc<dyn remuda::DynTask>,
    run: impl AsyncFnOnce(&Client) -> CliResult<T>,
) -> CliResult<T> {
    let worker = Worker::new(Client::new(db.sibling(8)))
        .config(WorkerConfig {
            concurrency: 2000,
            ..config
        })
        .register_dyn(KIND, TaskOptions::default(), task);
    let stop = CancellationToken::new();
    let token = stop.clone();
    let handle = tokio::spawn(worker.run(async move { token.cancelled().await }));
    let client = Client::new(db.clone());
    // the worker is up (registered, listening) before the clock starts
    tokio::time::sleep(Duration::from_millis(500)).await;
    let out = run(&client).await;
    stop.cancel();
    match handle.await {
        Ok(Ok(_)) => out,
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(CliError::Usage(format!("the bench worker panicked: {e}"))),
    }
}

pub(super) async fn plain_drain(db: &Database, jobs: usize) -> CliResult<f64> {
    with_worker(db, async |client| drain(db, client, jobs).await).await
}

/// Enqueues `jobs` jobs of the bench's kind and waits until every job is completed: jobs/s.
pub(super) async fn drain(db: &Database, client: &Client, jobs: usize) -> CliResult<f64> {
    {
        let batch: Vec<NewJob> = (0..jobs)
            .map(|i| NewJob::from_json(KIND, remuda::Jsonb(format!("{{\"i\":{i}}}"))))
            .collect();
        let conn = db.conn().await?;
        let started = Instant::now();
        client.insert_many(&batch).await?;
        loop {
            let left: i64 = conn
                .query_one(
                    "SELECT count(*) FROM remuda.jobs WHERE state <> 'completed'",
                    &[],
                )
                .await
                .map_err(remuda::Error::from)?
                .get(0);
            if left == 0 {
                return Ok(jobs as f64 / started.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Runs the workflow bench and prints its report.
pub async fn run(db: Database, shape: Shape, nodes: usize, json_out: bool) -> CliResult<Value> {
    if nodes < 3 {
        return Err(CliError::Usage("--nodes must be at least 3".into()));
    }
    let plain = plain_drain(&db, nodes).await?;
    let wf = definition(shape, nodes);
    let (secs, run_id) = with_worker(&db, async |client| {
        let started = Instant::now();
        let run = client.start_workflow(&wf, &json!(null)).await?;
        let status = client
            .wait_workflow(run.id, Duration::from_secs(3600))
            .await?;
        if status.state != remuda::workflow::WorkflowState::Completed {
            return Err(CliError::Usage(format!(
                "the bench run {}: {:?}",
                status.state, status.error
            )));
        }
        Ok((started.elapsed().as_secs_f64(), run.id))
    })
    .await?;
    let conn = db.conn().await?;
    let counted = nodes;
    let mut report = json!({
        "workflow": format!("{shape:?}").to_lowercase(),
        "nodes": counted,
        "seconds": secs,
        "plain_drain_jobs_per_sec": plain.round(),
    });
    if shape == Shape::Chain {
        let rows = conn
            .query(
                "SELECT extract(epoch FROM next.started_at - prev.finished_at)::float8 * 1000
                 FROM remuda.jobs prev
                 JOIN remuda.jobs next ON next.workflow_id = prev.workflow_id
                  AND (next.workflow ->> 'node') = 'n' || (substr(prev.workflow ->> 'node', 2)::int + 1)
                 WHERE prev.workflow_id = $1 ORDER BY 1",
                &[&run_id],
            )
            .await
            .map_err(remuda::Error::from)?;
        let steps: Vec<f64> = rows.iter().map(|r| r.get::<_, f64>(0)).collect();
        report["step_ms"] = json!({
            "p50": percentile_of(&steps, 0.5),
            "p99": percentile_of(&steps, 0.99),
            "samples": steps.len(),
        });
    } else {
        let rate = counted as f64 / secs;
        report["nodes_per_sec"] = json!(rate.round());
        report["ratio_to_plain"] = json!((rate / plain * 1000.0).round() / 1000.0);
    }
    if json_out {
        print_json(&report);
    } else {
        crate::out!(
            "remuda bench --workflow {}: {} nodes in {:.3} s",
            report["workflow"],
            counted,
            secs
        );
        if let Some(rate) = report["nodes_per_sec"].as_f64() {
            crate::out!("  nodes              {rate:>10.0} nodes/s");
        }
        if let Some(step) = report.get("step_ms") {
            crate::out!(
                "  step latency       p50 {:.2} ms, p99 {:.2} ms",
                step["p50"].as_f64().unwrap_or(0.0),
                step["p99"].as_f64().unwrap_or(0.0)
            );
        }
        crate::out!("  plain drain        {plain:>10.0} jobs/s (as many no-op jobs, same run)");
    }
    Ok(report)
}
