//! The workers, schedules, notifications, audit log and maintenance pages.

use super::html::{esc, url};
use super::view::{back, badge, time, Ctx, Flash};
use crate::actions;
use crate::audit;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiForm, ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::http::Uri;
use axum::response::{Html, Response};
use axum::Extension;
use remuda::notify::{NotificationFilter, NotificationState};
use serde::Deserialize;
use std::fmt::Write;

/// `GET /workers`.
pub async fn workers(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let workers = state.client.workers().await?;
    let mut out = String::from("<table id=\"workers\"><thead><tr><th>Name</th><th>Host</th><th class=\"num\">PID</th><th>Alive</th><th>Queues</th><th>Kinds</th><th>Capabilities</th><th class=\"num\">Running / max</th><th class=\"num\">Completed</th><th class=\"num\">Failed</th><th class=\"num\">CPU</th><th class=\"num\">Memory</th><th>Started</th><th>Last heartbeat</th></tr></thead><tbody>");
    for w in &workers {
        let _ = write!(
            out,
            "<tr data-worker=\"{id}\"><td><a href=\"{}?worker={}\" title=\"{id}\">{}</a></td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{} / {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            ctx.href("jobs"),
            url(&w.id),
            esc(&w.name),
            esc(&w.host),
            w.pid,
            if w.alive { badge("alive") } else { badge("dead") },
            esc(&w.queues.join(", ")),
            esc(&w.kinds.join(", ")),
            esc(&w.capabilities.join(", ")),
            w.running,
            w.concurrency,
            w.completed,
            w.failed,
            w.cpu_percent.map_or_else(|| "–".into(), |p| format!("{p:.0}%")),
            w.rss_bytes.map_or_else(|| "–".into(), |b| format!("{:.0} MiB", b as f64 / 1048576.0)),
            time(Some(w.started_at)),
            w.heartbeat_at.map_or_else(|| "declared dead".to_string(), |t| time(Some(t))),
            id = esc(&w.id),
        );
    }
    if workers.is_empty() {
        out += "<tr><td colspan=\"14\" class=\"muted\">No worker is registered.</td></tr>";
    }
    out += "</tbody></table>";
    Ok(ctx.render("Workers", "workers", &out))
}

/// `GET /schedules`.
pub async fn schedules(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiQuery(flash): ApiQuery<Flash>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let schedules = state.client.schedules().await?;
    let mut out = flash.html();
    out += "<table id=\"schedules\"><thead><tr><th>Name</th><th>Kind</th><th>Queue</th><th>When</th><th>Next run</th><th>Last run</th><th class=\"num\">Runs</th><th>Status</th><th></th></tr></thead><tbody>";
    for s in &schedules {
        let name = url(&s.name);
        let toggle = if s.paused {
            ctx.button(
                &format!("schedules/{name}/resume"),
                "Resume",
                None,
                "primary",
            )
        } else {
            ctx.button(&format!("schedules/{name}/pause"), "Pause", None, "")
        };
        let trigger = ctx.button(
            &format!("schedules/{name}/trigger"),
            "Run now",
            Some("Enqueue this schedule's job now?"),
            "",
        );
        let last = match s.last_job_id {
            Some(job) => format!(
                "<a href=\"{}\">{}</a>",
                ctx.href(&format!("jobs/{job}")),
                time(s.last_run_at)
            ),
            None => time(s.last_run_at),
        };
        // (the fair-share group its jobs take, beside their queue)
        let group = s
            .group
            .as_deref()
            .map(|g| format!(" <span class=\"muted\">· group {}</span>", esc(g)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr data-schedule=\"{}\"><td>{}</td><td>{}</td><td>{}{group}</td><td>{} ({})</td><td>{}</td><td>{last}</td><td class=\"num\">{}</td><td>{}</td><td>{toggle} {trigger}</td></tr>",
            esc(&s.name),
            esc(&s.name),
            esc(&s.kind),
            esc(&s.queue),
            esc(&s.pattern),
            esc(&s.tz),
            next_run(&s.tz, s.next_run_at),
            s.runs,
            badge(if s.paused { "paused" } else { "active" }),
        );
    }
    if schedules.is_empty() {
        out += "<tr><td colspan=\"9\" class=\"muted\">No schedules.</td></tr>";
    }
    out += "</tbody></table>";
    Ok(ctx.render("Schedules", "schedules", &out))
}

/// `POST /schedules/{name}/{pause|resume|trigger}`.
pub async fn schedule_act(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath((name, action)): ApiPath<(String, String)>,
    ApiForm(_form): ApiForm<super::jobs::ActionForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let outcome = actions::schedule(&state, &who, &name, &action).await;
    let said = outcome.map(
        |done| match (done["job_id"].as_i64(), done["next_run_at"].as_str()) {
            (Some(job), _) => format!("schedule {name}: job {job} enqueued"),
            (None, Some(next)) => format!("schedule {name}: resumed, next run {next}"),
            _ => format!("schedule {name}: paused"),
        },
    );
    back(&root, "schedules", said.map_err(|e| e.message))
}

/// The notifications page's query.
#[derive(Debug, Default, Deserialize)]
pub struct NotificationQuery {
    #[serde(default)]
    state: String,
    #[serde(flatten)]
    flash: Flash,
}

/// `GET /notifications`.
pub async fn notifications(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiQuery(query): ApiQuery<NotificationQuery>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let wanted = match query.state.trim() {
        "" => None,
        s => Some(
            s.parse::<NotificationState>()
                .map_err(|e| ApiError::invalid(format!("state: {e}")))?,
        ),
    };
    let list = state
        .client
        .notifications(&NotificationFilter {
            state: wanted,
            limit: Some(200),
            ..Default::default()
        })
        .await?;
    let mut out = query.flash.html();
    let _ = write!(
        out,
        "<p>Show: <a href=\"{0}\">all</a> · <a href=\"{0}?state=pending\">pending</a> · <a href=\"{0}?state=dead\">dead</a> · <a href=\"{0}?state=sent\">sent</a></p>",
        ctx.href("notifications")
    );
    out += "<table id=\"notifications\"><thead><tr><th class=\"num\">ID</th><th>Event</th><th>Channel</th><th>Target</th><th>State</th><th class=\"num\">Attempts</th><th>Job / run</th><th>Last error</th><th>Created</th><th></th></tr></thead><tbody>";
    for n in &list {
        let source = match (n.job_id, n.workflow_id) {
            (Some(job), _) => format!(
                "<a href=\"{}\">job {job}</a>",
                ctx.href(&format!("jobs/{job}"))
            ),
            (None, Some(run)) => format!(
                "<a href=\"{}\">run {run}</a>",
                ctx.href(&format!("workflows/{run}"))
            ),
            _ => String::new(),
        };
        let retry = if n.state == NotificationState::Dead {
            ctx.button(&format!("notifications/{}/retry", n.id), "Retry", None, "")
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "<tr data-id=\"{}\"><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{source}</td><td>{}</td><td>{}</td><td>{retry}</td></tr>",
            n.id,
            n.id,
            esc(&n.event),
            esc(n.channel.as_str()),
            esc(&n.target),
            badge(n.state.as_str()),
            n.attempts,
            esc(n.last_error.as_deref().unwrap_or_default()),
            time(Some(n.created_at)),
        );
    }
    if list.is_empty() {
        out += "<tr><td colspan=\"10\" class=\"muted\">No notifications.</td></tr>";
    }
    out += "</tbody></table>";
    Ok(ctx.render("Notifications", "notifications", &out))
}

/// `POST /notifications/{id}/retry`.
pub async fn notification_retry(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath(id): ApiPath<i64>,
    ApiForm(_form): ApiForm<super::jobs::ActionForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let outcome = actions::notification_retry(&state, &who, id).await;
    let said = outcome.map(|()| format!("notification {id} will be sent again"));
    back(&root, "notifications", said.map_err(|e| e.message))
}

/// `GET /audit`.
pub async fn audit_log(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let entries = audit::list(&state.client, None, 200).await?;
    let mut out = String::from("<table id=\"audit\"><thead><tr><th>At</th><th>Who</th><th>Via</th><th>Action</th><th>Target</th><th>Outcome</th></tr></thead><tbody>");
    for e in &entries {
        let outcome = match e.detail.get("error") {
            Some(error) => format!(
                "<span class=\"error\">{}</span>",
                esc(error["message"].as_str().unwrap_or_default())
            ),
            None => "ok".into(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{outcome}</td></tr>",
            time(Some(e.at)),
            esc(&e.actor),
            esc(&e.via),
            esc(&e.action),
            esc(&e.target)
        );
    }
    if entries.is_empty() {
        out += "<tr><td colspan=\"6\" class=\"muted\">Nothing was changed through the dashboard yet.</td></tr>";
    }
    out += "</tbody></table>";
    Ok(ctx.render("Audit log", "audit", &out))
}

/// `GET /maintenance`.
pub async fn maintenance(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let status = state.client.maintenance_status().await?;
    let mut out = match &status.leader {
        Some(l) => format!(
            "<p>Leader <strong>{}</strong> since {} (term {}, lease {} until {})</p>",
            esc(&l.worker),
            time(Some(l.since)),
            l.term,
            if l.current { "current" } else { "lapsed" },
            time(l.expires_at)
        ),
        None => "<p class=\"muted\">No worker has led maintenance yet.</p>".into(),
    };
    out += "<table id=\"duties\"><thead><tr><th>Duty</th><th>Last run</th><th class=\"num\">Took</th><th>Outcome</th><th>By</th></tr></thead><tbody>";
    for d in &status.duties {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{:.1} ms</td><td>{} {}</td><td>{}</td></tr>",
            esc(&d.duty),
            time(Some(d.started_at)),
            d.duration_ms,
            badge(if d.ok { "completed" } else { "failed" }),
            esc(&d.result),
            esc(&d.worker)
        );
    }
    out += "</tbody></table>";
    Ok(ctx.render("Maintenance", "", &out))
}

/// A schedule's next run in UTC and, for a schedule of another zone, on that zone's clock.
fn next_run(tz: &str, at: chrono::DateTime<chrono::Utc>) -> String {
    match tz.parse::<remuda::schedule::Zone>() {
        Ok(zone) if zone != remuda::schedule::Zone::UTC => format!(
            "{}<br><span class=\"muted zone\">{}</span>",
            time(Some(at)),
            esc(&format!("{} ({tz})", zone.clock(at)))
        ),
        _ => time(Some(at)),
    }
}
