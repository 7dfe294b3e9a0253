//! `remuda bench --steps K`: jobs that each record K durable steps (`JobContext::step`, one
//! row and one fenced statement each), drained by one worker, beside a plain drain of as many
//! jobs in the same run. Reports steps/s and the drain's jobs/s against the plain one.

use super::workflows::{drain, plain_drain, with_task_worker};
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use futures_util::future::BoxFuture;
use remuda::{Database, DynTask, JobContext, Jsonb, TaskError, WorkerConfig};
use serde_json::{json, Value};
use std::sync::Arc;

/// Records its number of steps, named `s1`, `s2`, … and returns nothing.
struct Steps(usize);

impl DynTask for Steps {
    fn run(
        self: Arc<Self>,
        ctx: JobContext,
        _args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>> {
        Box::pin(async move {
            for n in 1..=self.0 {
                ctx.step(&format!("s{n}"), || async { Ok(()) }).await?;
            }
            Ok(Jsonb("null".into()))
        })
    }
}

/// Runs the step bench and prints its report.
pub async fn run(db: Database, jobs: usize, steps: usize, json_out: bool) -> CliResult<Value> {
    if steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    let plain = plain_drain(&db, jobs).await?;
    let task = Arc::new(Steps(steps));
    let with_steps = with_task_worker(&db, WorkerConfig::default(), task, async |client| {
        drain(&db, client, jobs).await
    })
    .await?;
    let recorded: i64 = db
        .conn()
        .await?
        .query_one("SELECT count(*) FROM remuda.steps", &[])
        .await
        .map_err(remuda::Error::from)?
        .get(0);
    let expected = (jobs * steps) as i64;
    if recorded != expected {
        return Err(CliError::Usage(format!(
            "the bench recorded {recorded} steps, not {expected}"
        )));
    }
    let steps_per_sec = with_steps * steps as f64;
    let report = json!({
        "jobs": jobs,
        "steps_per_job": steps,
        "steps_per_sec": steps_per_sec.round(),
        "jobs_per_sec": with_steps.round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio_to_plain": (with_steps / plain * 1000.0).round() / 1000.0,
        "step_ratio_to_plain": (steps_per_sec / plain * 1000.0).round() / 1000.0,
    });
    if json_out {
        print_json(&report);
    } else {
        crate::out!(
            "{jobs} jobs of {steps} step{}: {} steps/s, {} jobs/s; plain drain {} jobs/s (ratio {})",
            if steps == 1 { "" } else { "s" },
            report["steps_per_sec"],
            report["jobs_per_sec"],
            report["plain_drain_jobs_per_sec"],
            report["ratio_to_plain"]
        );
    }
    Ok(report)
}
