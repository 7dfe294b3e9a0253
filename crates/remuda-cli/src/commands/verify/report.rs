//! The end of a verification run: the checker's findings, the runs against the workflow
//! model, jobs the feeder was told were enqueued and cannot be found, executions beyond the
//! outcomes they account for, and the report printed as text or JSON.

use super::load::Fed;
use super::shapes::Kinds;
use remuda::verify::model::{decide, differences};
use remuda::verify::Finding;
use remuda::Client;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The report of `remuda verify` (`--json`: one object with these fields).
#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    /// Jobs with a recorded history (the feeder's, the schedule's, the workflows').
    pub jobs: usize,
    /// Workflow runs with a recorded history (sub-workflows included).
    pub workflows: usize,
    /// Workers SIGKILLed.
    pub kills: usize,
    /// Workers frozen (SIGSTOP) past rescue_after, then woken (SIGCONT).
    pub stops: usize,
    /// Immediate restarts of the primary.
    pub db_restarts: usize,
    /// Primaries killed and their standby promoted.
    pub failovers: usize,
    /// Times every session of the run's database was ended by pg_terminate_backend.
    pub terminations: usize,
    /// Jobs or runs that are gone, or not final at the end.
    pub lost: usize,
    /// Changes the state machines do not allow, and gaps in a recorded path.
    pub illegal_transitions: usize,
    /// Claims whose outcome was accepted more than once.
    pub accepted_twice: usize,
    /// Runs that ended unlike the workflow model says.
    pub workflow_mismatches: usize,
    /// Jobs, runs or timers left where they should have moved.
    pub stuck: usize,
    /// Executions beyond the outcomes they account for.
    pub duplicate_runs: i64,
    /// What at-least-once allows: the jobs held by workers when they were killed, frozen or
    /// cut off by the database going away.
    pub duplicate_bound: i64,
    /// Executions of a task (every start, from the execution log).
    pub executions: i64,
    /// Failed jobs retried by hand.
    pub retried: usize,
    /// Failed workflow runs retried.
    pub retried_runs: usize,
    /// Workers whose graceful shutdown at the end did not exit 0.
    pub unclean_exits: usize,
    /// The seed that repeats the run's choices.
    pub seed: u64,
    /// Seconds of load and faults (the drain comes after).
    pub duration_secs: u64,
    /// What was found, one line each.
    pub findings: Vec<String>,
}

impl VerifyReport {
    /// Whether the run passes: nothing lost, illegal, accepted twice, mismatched or stuck,
    /// and duplicates within their bound.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.illegal_transitions == 0
            && self.accepted_twice == 0
            && self.workflow_mismatches == 0
            && self.stuck == 0
            && self.duplicate_runs <= self.duplicate_bound
    }

    /// Adds the checker's findings.
    pub fn add_check(&mut self, check: &remuda::verify::Report) {
        self.jobs = check.jobs;
        self.workflows = check.workflows;
        for (class, findings, count) in [
            (
                "illegal transition",
                &check.illegal_transitions,
                &mut self.illegal_transitions,
            ),
            (
                "accepted twice",
                &check.accepted_twice,
                &mut self.accepted_twice,
            ),
            ("lost", &check.lost, &mut self.lost),
            ("stuck", &check.stuck, &mut self.stuck),
        ] {
            *count += findings.len();
            self.findings.extend(findings.iter().map(|f| say(class, f)));
        }
    }
}

fn say(class: &str, finding: &Finding) -> String {
    format!("{class}: {}: {}", finding.subject(), finding.what)
}

/// Holds what the feeder was told against the tables: acknowledged jobs that are gone or not
/// final, and each run against the model.
pub async fn compare(client: &Client, fed: &Fed, report: &mut VerifyReport) -> remuda::Result<()> {
    let conn = client.database().conn().await?;
    let ids: Vec<i64> = fed.jobs.iter().copied().collect();
    let rows = conn
        .query(
            "SELECT i.id, j.state::text AS state FROM unnest($1::bigint[]) AS i(id)
             LEFT JOIN remuda.jobs j ON j.id = i.id
             WHERE j.id IS NULL OR NOT remuda.is_final(j.state)",
            &[&ids],
        )
        .await?;
    for row in rows {
        let id: i64 = row.try_get("id")?;
        let state: Option<String> = row.try_get("state")?;
        report.lost += 1;
        report.findings.push(match state {
            None => format!("lost: job {id}: its enqueue was acknowledged and it is gone"),
            Some(state) => format!("lost: job {id}: still {state} after the drain"),
        });
    }
    for run in &fed.runs {
        let Some(status) = client.workflow(run.id).await? else {
            report.lost += 1;
            report.findings.push(format!(
                "lost: run {}: its start was acknowledged and it is gone",
                run.id
            ));
            continue;
        };
        let state = status.state.as_str();
        if run.cancel_asked && state == "cancelled" {
            continue;
        }
        let world = Kinds {
            signals: &run.shape.signals,
        };
        let Ok(model) = decide(&run.shape.spec, &world) else {
            continue;
        };
        let wrong = differences(&model, &status);
        if !wrong.is_empty() {
            report.workflow_mismatches += 1;
            report.findings.push(format!(
                "workflow mismatch: run {}: {} (definition: {})",
                run.id,
                wrong.join("; "),
                serde_json::to_string(&run.shape.spec).unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// Counts executions (lines `job attempt` of the log) beyond what the outcomes account for: a
/// completion or an error recorded from a run of the task (not `WORKER_LOST`, which no run
/// wrote), and for a cancelled job the run its cancel stopped.
pub async fn duplicates(
    client: &Client,
    log: &Path,
    report: &mut VerifyReport,
) -> remuda::Result<()> {
    let mut executions: HashMap<i64, i64> = HashMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if let Some(id) = line.split_whitespace().next().and_then(|s| s.parse().ok()) {
            *executions.entry(id).or_default() += 1;
        }
    }
    report.executions = executions.values().sum();
    let conn = client.database().conn().await?;
    let rows = conn
        .query(
            "SELECT id, (state = 'completed')::int::bigint
                        + (SELECT count(*) FROM jsonb_array_elements(errors) e
                           WHERE e->>'code' <> 'WORKER_LOST')
                        + (state = 'cancelled')::int::bigint AS accounted
             FROM remuda.jobs",
            &[],
        )
        .await?;
    let mut extra = 0;
    for row in rows {
        let id: i64 = row.try_get(0)?;
        let accounted: i64 = row.try_get(1)?;
        extra += (executions.get(&id).copied().unwrap_or(0) - accounted).max(0);
    }
    report.duplicate_runs = extra;
    Ok(())
}
