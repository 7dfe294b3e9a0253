//! Every change the dashboard can make, in one place: each action runs the library's call and
//! records it with its outcome in the audit log. The API and the pages only read their input
//! and present the outcome (JSON, or a redirect with a message).

use crate::audit;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::State;
use remuda::workflow::{WorkflowSpec, WorkflowState};
use remuda::{BulkAction, BulkOutcome, JobFilter, JobState, QueueChange, QueueSettings};
use serde::Serialize;
use serde_json::{json, Value};

/// Records a change and its outcome in the audit log, then hands the outcome back.
pub(crate) async fn audited<T: Serialize>(
    state: &State,
    who: &Principal,
    action: &str,
    target: String,
    result: ApiResult<T>,
) -> ApiResult<T> {
    // what a page shows next includes this change
    state.counts.changed();
    let detail = match &result {
        Ok(value) => json!({"ok": value}),
        Err(e) => json!({"error": {"code": e.code, "message": e.message}}),
    };
    audit::record(&state.client, who, action, &target, detail).await;
    result
}

/// What can be done to one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobAction {
    /// Run again; `force` also runs a completed one again (its result is dropped), `fresh`
    /// drops the steps it recorded.
    Retry { force: bool, fresh: bool },
    /// Cancel.
    Cancel,
    /// Delete.
    Delete,
}

impl JobAction {
    /// The action named `name` (`retry`, `cancel`, `delete`).
    pub(crate) fn named(name: &str, force: bool) -> ApiResult<JobAction> {
        match name {
            "retry" => Ok(JobAction::Retry {
                force,
                fresh: false,
            }),
            "cancel" => Ok(JobAction::Cancel),
            "delete" => Ok(JobAction::Delete),
            other => Err(ApiError::not_found(format!(
                "no job action {other:?}: retry, cancel or delete"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            JobAction::Retry { .. } => "retry",
            JobAction::Cancel => "cancel",
            JobAction::Delete => "delete",
        }
    }
}

/// Retries, cancels or deletes job `id`; answers the state it had.
pub(crate) async fn job(
    state: &State,
    who: &Principal,
    id: i64,
    action: JobAction,
) -> ApiResult<JobState> {
    let client = &state.client;
    let result = match action {
        JobAction::Retry { force, fresh } => {
            let options = remuda::RetryOptions { force, fresh };
            client.retry_with(id, options).await
        }
        JobAction::Cancel => client.cancel(id).await,
        JobAction::Delete => client.delete(id).await,
    };
    let name = format!("job.{}", action.name());
    audited(
        state,
        who,
        &name,
        format!("job {id}"),
        result.map_err(Into::into),
    )
    .await
}

/// The bulk action named `name`.
pub(crate) fn bulk_action(name: &str) -> ApiResult<BulkAction> {
    match name {
        "retry" => Ok(BulkAction::Retry),
        "cancel" => Ok(BulkAction::Cancel),
        "delete" => Ok(BulkAction::Delete),
        other => Err(ApiError::not_found(format!(
            "no bulk action {other:?}: retry, cancel or delete"
        ))),
    }
}

/// Applies `action` to every job matching `filter` (with `dry_run`, only counts them, and
/// records nothing).
pub(crate) async fn jobs_matching(
    state: &State,
    who: &Principal,
    filter: &JobFilter,
    action: BulkAction,
    dry_run: bool,
) -> ApiResult<BulkOutcome> {
    let result = state
        .client
        .act_on_matching(filter, action, None, dry_run)
        .await;
    if dry_run {
        return Ok(result?);
    }
    let target = format!("jobs matching {}", describe(filter));
    let name = format!("jobs.{}", action.as_str());
    audited(state, who, &name, target, result.map_err(Into::into)).await
}

/// A filter in a few words, for the audit log.
fn describe(filter: &JobFilter) -> String {
    let mut parts = Vec::new();
    if let Some(s) = filter.state {
        parts.push(format!("state={s}"));
    }
    for (name, value) in [
        ("queue", &filter.queue),
        ("kind", &filter.kind),
        ("worker", &filter.worker),
    ] {
        if let Some(v) = value {
            parts.push(format!("{name}={v}"));
        }
    }
    if let Some(args) = &filter.args {
        parts.push(format!("args@>{args}"));
    }
    if parts.is_empty() {
        "(every job)".into()
    } else {
        parts.join(" ")
    }
}

/// What can be done to a queue.
pub(crate) enum QueueAction {
    /// Pause.
    Pause,
    /// Resume.
    Resume,
    /// Change its limits.
    Limits(QueueChange),
}

/// Sets the weight of `group` in queue `name`; answers the group.
pub(crate) async fn group_weight(
    state: &State,
    who: &Principal,
    name: &str,
    group: &str,
    weight: f64,
) -> ApiResult<remuda::GroupShare> {
    let result = state
        .client
        .set_group_weight(name, Some(group), weight)
        .await;
    audited(
        state,
        who,
        "queue.group_weight",
        format!("queue {name} group {group}"),
        result.map_err(Into::into),
    )
    .await
}

/// Pauses, resumes or limits queue `name`; answers its settings.
pub(crate) async fn queue(
    state: &State,
    who: &Principal,
    name: &str,
    action: QueueAction,
) -> ApiResult<QueueSettings> {
    let client = &state.client;
    let (verb, result) = match &action {
        QueueAction::Pause => ("pause", client.pause_queue(name).await),
        QueueAction::Resume => ("resume", client.resume_queue(name).await),
        QueueAction::Limits(change) => ("limits", client.change_queue(name, change).await),
    };
    audited(
        state,
        who,
        &format!("queue.{verb}"),
        format!("queue {name}"),
        result.map_err(Into::into),
    )
    .await
}

/// Pauses, resumes, cancels or retries workflow run `id` (`action` by name); answers the
/// state it had.
pub(crate) async fn workflow(
    state: &State,
    who: &Principal,
    id: i64,
    action: &str,
) -> ApiResult<WorkflowState> {
    let client = &state.client;
    let result = match action {
        "pause" => client.pause_workflow(id).await,
        "resume" => client.resume_workflow(id).await,
        "cancel" => client.cancel_workflow(id).await,
        "retry" => client.retry_workflow(id).await,
        other => {
            return Err(ApiError::not_found(format!(
                "no workflow action {other:?}: pause, resume, cancel, retry or signal"
            )))
        }
    };
    let name = format!("workflow.{action}");
    audited(
        state,
        who,
        &name,
        format!("workflow run {id}"),
        result.map_err(Into::into),
    )
    .await
}

/// Where a new run's definition comes from.
pub(crate) enum Definition {
    /// A spec, as a spec file holds it.
    Spec(Box<WorkflowSpec>),
    /// The definition an earlier run was started with.
    Like(i64),
}

/// Starts a run.
pub(crate) async fn start_workflow(
    state: &State,
    who: &Principal,
    definition: Definition,
    input: &Value,
    key: Option<&str>,
) -> ApiResult<remuda::workflow::Started> {
    let client = &state.client;
    let (target, result) = match &definition {
        Definition::Spec(spec) => (
            format!("workflow {}", spec.name),
            client.start_workflow_spec(spec, input, key).await,
        ),
        Definition::Like(from) => (
            format!("workflow like run {from}"),
            client.start_workflow_like(*from, input, key).await,
        ),
    };
    audited(
        state,
        who,
        "workflow.start",
        target,
        result.map_err(Into::into),
    )
    .await
}

/// Pauses, resumes or triggers schedule `name` (`action` by name); answers what it did
/// (`{"paused"}`, `{"paused", "next_run_at"}`, `{"job_id"}`).
pub(crate) async fn schedule(
    state: &State,
    who: &Principal,
    name: &str,
    action: &str,
) -> ApiResult<Value> {
    let client = &state.client;
    let result = match action {
        "pause" => client
            .pause_schedule(name)
            .await
            .map(|()| json!({"paused": true})),
        "resume" => client
            .resume_schedule(name)
            .await
            .map(|next| json!({"paused": false, "next_run_at": next})),
        "trigger" => client
            .trigger_schedule(name)
            .await
            .map(|id| json!({"job_id": id})),
        other => {
            return Err(ApiError::not_found(format!(
                "no schedule action {other:?}: pause, resume or trigger"
            )))
        }
    };
    let verb = format!("schedule.{action}");
    audited(
        state,
        who,
        &verb,
        format!("schedule {name}"),
        result.map_err(Into::into),
    )
    .await
}

/// Sends dead notification `id` again.
pub(crate) async fn notification_retry(state: &State, who: &Principal, id: i64) -> ApiResult<()> {
    let result = state
        .client
        .retry_notification(id)
        .await
        .map_err(Into::into);
    audited(
        state,
        who,
        "notification.retry",
        format!("notification {id}"),
        result,
    )
    .await
}
