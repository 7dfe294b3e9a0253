//! The jobs: a filtered list with keyset pages and bulk actions on everything matching the
//! filter, one job's page with its args, result, errors and timeline, and the actions retry,
//! cancel and delete.

use super::html::{esc, url};
use super::view::{back, badge, json_block, time, Ctx, Flash};
use crate::actions::{self, JobAction};
use crate::api::jobs::FilterParams;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiForm, ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::http::Uri;
use axum::response::{Html, Response};
use axum::Extension;
use remuda::{Job, JobResult, JobState};
use serde::Deserialize;
use std::fmt::Write;

/// The list's query: its filter, its page, and the flash of the last action.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    queue: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    worker: String,
    #[serde(default)]
    args: String,
    #[serde(default)]
    workflow: String,
    after: Option<String>,
    #[serde(flatten)]
    flash: Flash,
}

impl ListQuery {
    fn params(&self) -> FilterParams {
        FilterParams::from_texts(
            [
                &self.state,
                &self.queue,
                &self.kind,
                &self.worker,
                &self.args,
                &self.workflow,
            ],
            self.after.clone(),
        )
    }

    /// The filter as a query string (for links and the bulk form's return).
    fn query(&self) -> String {
        [
            ("state", &self.state),
            ("queue", &self.queue),
            ("kind", &self.kind),
            ("worker", &self.worker),
            ("args", &self.args),
            ("workflow", &self.workflow),
        ]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", url(v)))
        .collect::<Vec<_>>()
        .join("&")
    }
}

/// `GET /jobs`.
pub async fn list(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let mut out = query.flash.html();
    out += &filter_form(&ctx, &query);
    let page = match query.params().to_filter() {
        Ok(filter) => state.client.job_page(&filter).await.map_err(ApiError::from),
        Err(e) => Err(e),
    };
    let page = match page {
        Ok(page) => page,
        Err(e) => {
            let _ = write!(
                out,
                "<p class=\"error\" role=\"alert\">{}</p>",
                esc(&e.message)
            );
            return Ok(ctx.render("Jobs", "jobs", &out));
        }
    };
    out += &table(&ctx, &page.jobs);
    if let Some(next) = &page.next {
        let q = query.query();
        let sep = if q.is_empty() { "" } else { "&amp;" };
        let _ = write!(
            out,
            "<p><a id=\"next\" href=\"{}?{}{sep}after={}\">Next page →</a></p>",
            ctx.href("jobs"),
            esc(&q),
            url(next)
        );
    }
    out += &bulk_form(&ctx, &query);
    Ok(ctx.render("Jobs", "jobs", &out))
}

fn filter_form(ctx: &Ctx, q: &ListQuery) -> String {
    let mut states = String::from("<option value=\"\">any</option>");
    for s in JobState::ALL {
        let selected = if q.state == s.as_str() {
            " selected"
        } else {
            ""
        };
        let _ = write!(states, "<option{selected}>{s}</option>");
    }
    let field = |name: &str, value: &str, hint: &str| {
        format!(
            "<label>{name} <input name=\"{name}\" value=\"{}\" placeholder=\"{hint}\"></label>",
            esc(value)
        )
    };
    format!(
        "<form method=\"get\" action=\"{}\" class=\"filters\"><label>state <select name=\"state\">{states}</select></label>{}{}{}{}{}<button type=\"submit\">Filter</button></form>",
        ctx.href("jobs"),
        field("queue", &q.queue, "any"),
        field("kind", &q.kind, "any"),
        field("worker", &q.worker, "worker id"),
        field("args", &q.args, "{\"user\": 42}"),
        field("workflow", &q.workflow, "run id"),
    )
}

fn table(ctx: &Ctx, jobs: &[Job]) -> String {
    let mut out = String::from(
        "<table id=\"jobs\"><thead><tr><th class=\"num\">ID</th><th>State</th><th>Kind</th><th>Queue</th><th class=\"num\">Attempt</th><th title=\"finished, started, else due\">At</th><th>Workflow</th><th>Last error</th></tr></thead><tbody>",
    );
    for job in jobs {
        let run = match job.workflow_id {
            Some(run) => format!(
                "<a href=\"{}\">{}</a>",
                ctx.href(&format!("workflows/{run}")),
                esc(&workflow_of(job).unwrap_or_default())
            ),
            None => String::new(),
        };
        let _ = write!(
            out,
            "<tr data-id=\"{id}\"><td class=\"num\"><a href=\"{href}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{run}</td><td>{}</td></tr>",
            badge(job.state.as_str()),
            esc(&job.kind),
            esc(&job.queue),
            job.attempt,
            listed_time(job),
            esc(&last_error(job)),
            id = job.id,
            href = ctx.href(&format!("jobs/{}", job.id)),
        );
    }
    if jobs.is_empty() {
        out += "<tr><td colspan=\"8\" class=\"muted\">No job matches.</td></tr>";
    }
    out + "</tbody></table>"
}

/// The time the list orders `job` by; a job its paused run holds has none yet.
fn listed_time(job: &Job) -> String {
    if remuda::client::is_held(job) {
        return "<span class=\"muted\">held: its run is paused</span>".into();
    }
    time(Some(remuda::client::listed_at(job)))
}

/// `run 12, node resize[3]`.
fn workflow_of(job: &Job) -> Option<String> {
    let run = job.workflow_id?;
    let node = job.workflow_node.as_deref().unwrap_or("?");
    Some(match job.workflow_index {
        Some(i) => format!("run {run}, node {node}[{i}]"),
        None => format!("run {run}, node {node}"),
    })
}

/// The error that ended a job, else its latest failed attempt's, on one line.
fn last_error(job: &Job) -> String {
    match (&job.result, job.errors.last()) {
        (Some(JobResult::Err(e)), _) => format!("{}: {}", e.code, first_line(&e.message)),
        (_, Some(e)) => format!("{}: {}", e.code, first_line(&e.message)),
        _ => String::new(),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(120)
        .collect()
}

fn bulk_form(ctx: &Ctx, q: &ListQuery) -> String {
    let hidden: String = [
        ("state", &q.state),
        ("queue", &q.queue),
        ("kind", &q.kind),
        ("worker", &q.worker),
        ("args", &q.args),
        ("workflow", &q.workflow),
    ]
    .iter()
    .map(|(k, v)| format!("<input type=\"hidden\" name=\"{k}\" value=\"{}\">", esc(v)))
    .collect();
    let disabled = if ctx.read_only { " disabled" } else { "" };
    format!(
        "<h2>Every job matching this filter</h2><form method=\"post\" action=\"{}\" class=\"filters\" id=\"bulk\" data-confirm=\"Apply this to every job matching the filter?\">{}{hidden}\
<label>action <select name=\"action\"><option>retry</option><option>cancel</option><option>delete</option></select></label>\
<button class=\"danger\"{disabled}>Apply to all matching</button></form>",
        ctx.href("jobs/bulk"),
        ctx.csrf_field()
    )
}

/// The bulk form.
#[derive(Debug, Deserialize)]
pub struct BulkForm {
    action: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    queue: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    worker: String,
    #[serde(default)]
    args: String,
    #[serde(default)]
    workflow: String,
    #[serde(default)]
    #[allow(dead_code)]
    csrf: String,
}

/// `POST /jobs/bulk`.
pub async fn bulk(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiForm(form): ApiForm<BulkForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let list = ListQuery {
        state: form.state.clone(),
        queue: form.queue.clone(),
        kind: form.kind.clone(),
        worker: form.worker.clone(),
        args: form.args.clone(),
        workflow: form.workflow.clone(),
        ..Default::default()
    };
    let back_to = format!("jobs?{}", list.query());
    let action = match actions::bulk_action(&form.action) {
        Ok(action) => action,
        Err(e) => return back(&root, &back_to, Err(e.message)),
    };
    let filter = match list.params().to_filter() {
        Ok(filter) => filter,
        Err(e) => return back(&root, &back_to, Err(e.message)),
    };
    let outcome = actions::jobs_matching(&state, &who, &filter, action, false).await;
    let verb = action.as_str();
    let said = outcome.map(|o| {
        let skipped = if o.in_workflows > 0 {
            format!(
                " ({} belong to workflow runs and were skipped: act on their runs)",
                o.in_workflows
            )
        } else {
            String::new()
        };
        format!(
            "{verb}: {} of {} matching jobs changed{skipped}",
            o.changed, o.matched
        )
    });
    back(&root, &back_to, said.map_err(|e| e.message))
}

/// `GET /jobs/{id}`.
pub async fn show(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(flash): ApiQuery<Flash>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let job = state
        .client
        .job(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no job with id {id}")))?;
    let mut out = flash.html();
    out += "<div class=\"actions\">";
    let here = format!("jobs/{id}");
    if !matches!(job.state, JobState::Running | JobState::Available) {
        let force = job.state == JobState::Completed;
        let question = force.then_some("Run this completed job again? Its result is dropped.");
        out += &ctx.button(&format!("{here}/retry"), "Retry", question, "primary");
    }
    if !job.state.is_final() {
        out += &ctx.button(
            &format!("{here}/cancel"),
            "Cancel",
            Some("Cancel this job?"),
            "danger",
        );
    }
    if job.state != JobState::Running {
        out += &ctx.button(
            &format!("{here}/delete"),
            "Delete",
            Some("Delete this job for good?"),
            "danger",
        );
    }
    out += "</div><div class=\"card\"><dl class=\"fields\">";
    let max = job
        .max_attempts
        .map_or_else(|| "worker default".into(), |m| m.to_string());
    let mut field = |name: &str, value: String| {
        let _ = write!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    field("state", badge(job.state.as_str()));
    field("kind", esc(&job.kind));
    field(
        "queue",
        format!(
            "<a href=\"{}?queue={}\">{}</a>",
            ctx.href("jobs"),
            url(&job.queue),
            esc(&job.queue)
        ),
    );
    field("attempt", format!("{} of {max}", job.attempt));
    field("priority", job.priority.to_string());
    if let Some(formed) = job.formed.as_ref().and_then(|f| f.as_object()) {
        // how it was formed from many enqueues: debounced, throttled or batched, and how many
        let how: Vec<String> = formed
            .iter()
            .filter(|(name, _)| *name != "enqueued_at")
            .map(|(name, n)| format!("{} ({n} enqueues)", esc(name)))
            .collect();
        field("formed", how.join(", "));
    }
    if let Some(w) = &job.worker_id {
        field(
            "worker",
            format!(
                "<a href=\"{}?worker={}\">{}</a>",
                ctx.href("jobs"),
                url(w),
                esc(w)
            ),
        );
    }
    for (name, value) in [
        ("unique key", &job.unique_key),
        ("concurrency key", &job.concurrency_key),
        ("group", &job.group),
        ("target worker", &job.target_worker),
    ] {
        if let Some(v) = value {
            field(name, esc(v));
        }
    }
    if let Some(trace) = &job.trace {
        field("traceparent", esc(&trace.traceparent));
        if let Some(state) = &trace.tracestate {
            field("tracestate", esc(state));
        }
    }
    if let Some(s) = &job.schedule {
        field(
            "schedule",
            format!(
                "<a href=\"{}\">{}</a> (fire time {})",
                ctx.href("schedules"),
                esc(s),
                time(job.fire_at)
            ),
        );
    }
    if let Some(run) = job.workflow_id {
        field(
            "workflow",
            format!(
                "<a href=\"{}\">{}</a>",
                ctx.href(&format!("workflows/{run}")),
                esc(&workflow_of(&job).unwrap_or_default())
            ),
        );
    }
    out += "</dl></div><h2>Timeline</h2>";
    out += &timeline(&job);
    out += "<h2>Args</h2>";
    out += &json_block(&job.args);
    out += "<h2>Result</h2>";
    out += &match &job.result {
        Some(result) => json_block(&serde_json::json!(result)),
        None => "<p class=\"muted\">Not finished.</p>".into(),
    };
    out += &steps_table(&job);
    if !job.errors.is_empty() {
        out += "<h2>Errors</h2><table id=\"errors\"><thead><tr><th class=\"num\">Attempt</th><th>At</th><th>Worker</th><th>Code</th><th>Message</th></tr></thead><tbody>";
        for e in &job.errors {
            let _ = write!(
                out,
                "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
                e.attempt,
                time(Some(e.at)),
                esc(e.worker.as_deref().unwrap_or("?")),
                esc(&e.code),
                esc(&e.message)
            );
        }
        out += "</tbody></table>";
    }
    Ok(ctx.render(&format!("Job {id}"), "jobs", &out))
}

/// The steps the job recorded, in order, with the attempt that recorded each and its output.
fn steps_table(job: &Job) -> String {
    let steps = job.steps.as_deref().unwrap_or_default();
    if steps.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Steps</h2><table id=\"steps\"><thead><tr><th>Step</th><th class=\"num\">Attempt</th><th>At</th><th>Output</th></tr></thead><tbody>");
    for step in steps {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&step.name),
            step.attempt,
            time(Some(step.at)),
            json_block(&step.output)
        );
    }
    out += "</tbody></table>";
    out
}

/// Enqueued, each attempt's start and end.
fn timeline(job: &Job) -> String {
    let mut events: Vec<(chrono::DateTime<chrono::Utc>, String)> =
        vec![(job.created_at, "enqueued".into())];
    for e in &job.errors {
        // the latest attempt's start is the job's own started_at, said below
        if let Some(started) = e.started_at.filter(|_| e.attempt != job.attempt) {
            let on = e.worker.as_deref().unwrap_or("?");
            events.push((started, format!("attempt {} started on {on}", e.attempt)));
        }
        events.push((
            e.at,
            format!(
                "attempt {} failed on {}: {}",
                e.attempt,
                e.worker.as_deref().unwrap_or("?"),
                e.code
            ),
        ));
    }
    if let Some(started) = job.started_at {
        let on = job.worker.as_deref().unwrap_or("?");
        events.push((started, format!("attempt {} started on {on}", job.attempt)));
    }
    if let Some(finished) = job.finished_at {
        events.push((finished, format!("{}", job.state)));
    }
    events.sort_by_key(|(at, _)| *at);
    let mut out = String::from("<table id=\"timeline\"><tbody>");
    for (at, what) in events {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td></tr>",
            time(Some(at)),
            esc(&what)
        );
    }
    out + "</tbody></table>"
}

/// The action form (only its CSRF field).
#[derive(Debug, Default, Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    #[allow(dead_code)]
    csrf: String,
}

/// `POST /jobs/{id}/{retry|cancel|delete}`: a completed job's retry runs it again (the
/// page asked first).
pub async fn act(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath((id, action)): ApiPath<(i64, String)>,
    ApiForm(_form): ApiForm<ActionForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let here = format!("jobs/{id}");
    let completed =
        matches!(state.client.job(id).await, Ok(Some(job)) if job.state == JobState::Completed);
    let action = match JobAction::named(&action, completed) {
        Ok(action) => action,
        Err(e) => return back(&root, &here, Err(e.message)),
    };
    match (action, actions::job(&state, &who, id, action).await) {
        (JobAction::Delete, Ok(_)) => back(&root, "jobs", Ok(format!("job {id} deleted"))),
        (_, Ok(was)) => back(&root, &here, Ok(format!("done (the job was {was})"))),
        (_, Err(e)) => back(&root, &here, Err(e.message)),
    }
}
