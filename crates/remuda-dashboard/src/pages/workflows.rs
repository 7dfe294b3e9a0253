//! The workflow runs: a list with a form to start a run, and one run as a graph with its
//! nodes and the actions pause, resume, cancel and retry.

use super::html::esc;
use super::view::{back, badge, json_block, time, Ctx, Flash};
use crate::actions::{self, Definition};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiForm, ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::http::Uri;
use axum::response::{Html, Response};
use axum::Extension;
use remuda::workflow::{WorkflowFilter, WorkflowSpec, WorkflowState};
use serde::Deserialize;
use std::fmt::Write;

/// The list's query.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    state: String,
    #[serde(flatten)]
    flash: Flash,
}

/// `GET /workflows`.
pub async fn list(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let wanted = match query.state.trim() {
        "" => None,
        s => Some(
            s.parse::<WorkflowState>()
                .map_err(|e| ApiError::invalid(format!("state: {e}")))?,
        ),
    };
    let runs = state
        .client
        .workflows(&WorkflowFilter {
            state: wanted,
            limit: Some(100),
            ..Default::default()
        })
        .await?;
    let mut out = query.flash.html();
    out += "<table id=\"workflows\"><thead><tr><th class=\"num\">ID</th><th>Name</th><th>State</th><th>Nodes</th><th>Started</th><th>Ended</th></tr></thead><tbody>";
    for run in &runs {
        let nodes: Vec<String> = run.nodes.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let name = match run.parent_id {
            Some(parent) => format!(
                "{} <span class=\"muted sub\">sub-workflow of <a href=\"{}\">run {parent}</a></span>",
                esc(&run.name),
                ctx.href(&format!("workflows/{parent}"))
            ),
            None => esc(&run.name),
        };
        let _ = write!(
            out,
            "<tr data-id=\"{id}\"><td class=\"num\"><a href=\"{}\">{id}</a></td><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ctx.href(&format!("workflows/{}", run.id)),
            badge(run.state.as_str()),
            esc(&nodes.join(", ")),
            time(Some(run.created_at)),
            time(run.finished_at),
            id = run.id
        );
    }
    if runs.is_empty() {
        out += "<tr><td colspan=\"6\" class=\"muted\">No runs.</td></tr>";
    }
    out += "</tbody></table>";
    let disabled = if ctx.read_only { " disabled" } else { "" };
    let _ = write!(
        out,
        "<h2>Start a run</h2><form method=\"post\" action=\"{}\" class=\"card\" id=\"start\">{}\
<p><label for=\"spec\">Definition (JSON, as a spec file), or the id of a run whose definition to run again</label><br>\
<textarea id=\"spec\" name=\"spec\" rows=\"8\" cols=\"80\" placeholder='{{\"name\": \"etl\", \"nodes\": {{\"extract\": {{\"kind\": \"extract\"}}}}}}'></textarea></p>\
<p><label for=\"args\">Input (JSON)</label><br><textarea id=\"args\" name=\"args\" rows=\"3\" cols=\"80\">{{}}</textarea></p>\
<p><label>Idempotency key <input name=\"key\"></label></p><button class=\"primary\"{disabled}>Start</button></form>",
        ctx.href("workflows"),
        ctx.csrf_field()
    );
    Ok(ctx.render("Workflows", "workflows", &out))
}

/// The start form.
#[derive(Debug, Deserialize)]
pub struct StartForm {
    spec: String,
    #[serde(default)]
    args: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    #[allow(dead_code)]
    csrf: String,
}

/// `POST /workflows`.
pub async fn start(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiForm(form): ApiForm<StartForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let args = match form.args.trim() {
        "" => serde_json::Value::Object(Default::default()),
        text => match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                return back(
                    &root,
                    "workflows",
                    Err(format!("the input is not JSON: {e}")),
                )
            }
        },
    };
    let key = Some(form.key.trim()).filter(|k| !k.is_empty());
    let text = form.spec.trim();
    let definition = match text.parse::<i64>() {
        Ok(from) => Definition::Like(from),
        Err(_) => match serde_json::from_str::<WorkflowSpec>(text) {
            Ok(spec) => Definition::Spec(Box::new(spec)),
            Err(e) => {
                let why = format!("the definition is not a workflow spec: {e}");
                return back(&root, "workflows", Err(why));
            }
        },
    };
    match actions::start_workflow(&state, &who, definition, &args, key).await {
        Ok(started) => back(
            &root,
            &format!("workflows/{}", started.id),
            Ok(format!("run {} started", started.id)),
        ),
        Err(e) => back(&root, "workflows", Err(e.message)),
    }
}

/// `GET /workflows/{id}`.
pub async fn show(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(flash): ApiQuery<Flash>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let run = state
        .client
        .workflow(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no workflow run with id {id}")))?;
    let mut out = flash.html();
    let parent = run
        .parent_id
        .map(|p| {
            format!(
                " · sub-workflow of <a href=\"{}\">run {p}</a>",
                ctx.href(&format!("workflows/{p}"))
            )
        })
        .unwrap_or_default();
    let group = run
        .group
        .as_deref()
        .map(|g| format!(" · group {}", esc(g)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<p>{} {} · started {} · ended {}{parent}{group} · <a href=\"{}?workflow={id}\">its jobs</a></p><div class=\"actions\">",
        esc(&run.name),
        badge(run.state.as_str()),
        time(Some(run.created_at)),
        time(run.finished_at),
        ctx.href("jobs"),
    );
    let here = format!("workflows/{id}");
    for (action, label, question) in actions_for(run.state) {
        out += &ctx.button(
            &format!("{here}/{action}"),
            label,
            question,
            if action == "cancel" { "danger" } else { "" },
        );
    }
    out += "</div><div class=\"graph\">";
    out += &super::graph::svg(&run, &ctx.root);
    out += "</div><h2>Nodes</h2><table id=\"nodes\"><thead><tr><th>Node</th><th>Type</th><th>State</th><th>Waits for</th><th>Job</th><th class=\"num\">Attempt</th><th>Error</th></tr></thead><tbody>";
    for (name, node) in run.nodes_in_order() {
        let job = match (&node.children, node.job_id, node.workflow_id) {
            (Some(children), _, _) => elements(&ctx, id, children),
            (None, Some(j), _) => {
                format!("<a href=\"{}\">{j}</a>", ctx.href(&format!("jobs/{j}")))
            }
            (None, None, Some(child)) => format!(
                "<a href=\"{}\">run {child}</a>",
                ctx.href(&format!("workflows/{child}"))
            ),
            (None, None, None) => String::new(),
        };
        let error = node
            .error
            .as_ref()
            .map(|e| esc(&e.to_string()))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{job}</td><td class=\"num\">{}</td><td>{error}</td></tr>",
            esc(name),
            esc(&node.node_type),
            badge(node.state.as_str()),
            esc(&node.deps.join(", ")),
            node.attempt
        );
    }
    out += "</tbody></table><h2>Input</h2>";
    out += &json_block(&run.input);
    if let Some(output) = &run.output {
        out += "<h2>Output</h2>";
        out += &json_block(output);
    }
    if let Some(error) = &run.error {
        out += "<h2>Error</h2>";
        out += &json_block(error);
    }
    Ok(ctx.render(&format!("Workflow run {id}"), "workflows", &out))
}

/// The actions a run in `state` takes: pause a running run, resume a paused one, cancel
/// either, retry a failed or cancelled one; a completed run takes none.
fn actions_for(state: WorkflowState) -> Vec<(&'static str, &'static str, Option<&'static str>)> {
    let cancel = (
        "cancel",
        "Cancel",
        Some("Cancel this run and its running jobs?"),
    );
    match state {
        WorkflowState::Running => vec![("pause", "Pause", None), cancel],
        WorkflowState::Paused => vec![("resume", "Resume", None), cancel],
        WorkflowState::Failed | WorkflowState::Cancelled => vec![("retry", "Retry failed", None)],
        WorkflowState::Completed => Vec::new(),
    }
}

/// A map node's elements: how many jobs in each state, each count a link to those jobs.
fn elements(ctx: &Ctx, run: i64, children: &std::collections::BTreeMap<String, i64>) -> String {
    if children.is_empty() {
        return "<span class=\"muted\">no elements yet</span>".into();
    }
    children
        .iter()
        .map(|(state, n)| {
            format!(
                "<a href=\"{}?workflow={run}&amp;state={}\">{n} {}</a>",
                ctx.href("jobs"),
                esc(state),
                esc(state)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `POST /workflows/{id}/{pause|resume|cancel|retry}`.
pub async fn act(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath((id, action)): ApiPath<(i64, String)>,
    ApiForm(_form): ApiForm<super::jobs::ActionForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let outcome = actions::workflow(&state, &who, id, &action).await;
    let said = outcome.map(|was| format!("{action}: done (the run was {was})"));
    back(
        &root,
        &format!("workflows/{id}"),
        said.map_err(|e| e.message),
    )
}
