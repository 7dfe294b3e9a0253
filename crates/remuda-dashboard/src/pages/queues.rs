//! The queues: pause and resume, the limits in force and fair share, editable, and the
//! groups of each fair queue with their shares.

use super::html::{esc, url};
use super::view::{back, badge, Ctx, Flash};
use crate::actions::{self, QueueAction};
use crate::api::queues::Limits;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiForm, ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::http::Uri;
use axum::response::{Html, Response};
use axum::Extension;
use serde::Deserialize;
use std::fmt::Write;

/// `GET /queues`.
pub async fn page(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiQuery(flash): ApiQuery<Flash>,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let queues = state.counts.get(&state.client).await?;
    let mut out = flash.html();
    out += "<table id=\"queue-settings\"><thead><tr><th>Queue</th><th>Status</th><th></th><th>Limits (empty: none)</th></tr></thead><tbody>";
    let disabled = if ctx.read_only { " disabled" } else { "" };
    for q in queues.iter() {
        let s = &q.settings;
        let name = url(&q.queue);
        let toggle = if s.paused {
            ctx.button(&format!("queues/{name}/resume"), "Resume", None, "primary")
        } else {
            ctx.button(
                &format!("queues/{name}/pause"),
                "Pause",
                Some("Pause this queue? Its jobs wait until it is resumed."),
                "",
            )
        };
        let number = |v: Option<i32>| v.map(|n| n.to_string()).unwrap_or_default();
        let rate = s
            .rate
            .map(|(n, period)| format!("{n}/{}", remuda::duration::format(period)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr data-queue=\"{label}\"><td>{label}</td><td>{}</td><td>{toggle}</td><td><form method=\"post\" action=\"{}\" class=\"filters\">{}\
<label>max running <input name=\"max_running\" value=\"{}\" size=\"6\"></label>\
<label>key limit <input name=\"key_limit\" value=\"{}\" size=\"6\"></label>\
<label>rate <input name=\"rate\" value=\"{}\" size=\"8\" placeholder=\"100/1s\"></label>\
<label>rate per <select name=\"rate_per\">{}</select></label>\
<label>burst <input name=\"rate_burst\" value=\"{}\" size=\"5\"></label>\
<label>max depth <input name=\"max_depth\" value=\"{}\" size=\"8\"></label>\
<label>fairness <select name=\"fairness\">{}</select></label>\
<button{disabled}>Save</button></form></td></tr>",
            badge(if s.paused { "paused" } else { "active" }),
            esc(&ctx.href(&format!("queues/{name}/limits"))),
            ctx.csrf_field(),
            number(s.max_running),
            number(s.key_limit),
            esc(&rate),
            ["queue", "kind", "key"]
                .iter()
                .map(|p| {
                    let selected = if *p == s.rate_per.as_str() { " selected" } else { "" };
                    format!("<option{selected}>{p}</option>")
                })
                .collect::<String>(),
            number(s.rate_burst),
            number(s.max_depth),
            ["none", "group"]
                .iter()
                .map(|f| {
                    let selected = if *f == s.fairness.as_str() { " selected" } else { "" };
                    format!("<option{selected}>{f}</option>")
                })
                .collect::<String>(),
            label = esc(&q.queue),
        );
    }
    if queues.is_empty() {
        out += "<tr><td colspan=\"4\" class=\"muted\">No queues yet.</td></tr>";
    }
    out += "</tbody></table>";
    for q in queues
        .iter()
        .filter(|q| q.settings.fairness == remuda::Fairness::Group)
    {
        out += &groups_table(&q.queue, &state.client.queue_groups(&q.queue).await?);
    }
    Ok(ctx.render("Queues", "queues", &out))
}

/// The groups of fair queue `queue`, as `remuda queue groups` lists them.
fn groups_table(queue: &str, groups: &[remuda::GroupShare]) -> String {
    let mut out = format!(
        "<h2>Groups of {q}</h2><table class=\"groups\" data-queue=\"{q}\"><thead><tr><th>Group</th><th>Weight</th>\
<th>Running</th><th>Waiting</th><th title=\"estimated\">~Starts/min</th><th>Share</th><th>Fair share</th></tr></thead><tbody>",
        q = esc(queue)
    );
    for g in groups {
        let name = match &g.group {
            Some(name) => esc(name),
            None => "<span class=\"muted\">(none)</span>".into(),
        };
        let _ = write!(
            out,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td><td>{:.1}%</td></tr>",
            g.weight,
            g.running,
            g.waiting,
            g.starts_last_minute,
            g.share * 100.0,
            g.fair_share * 100.0
        );
    }
    if groups.is_empty() {
        out += "<tr><td colspan=\"7\" class=\"muted\">No group has jobs yet.</td></tr>";
    }
    out + "</tbody></table>"
}

/// The limits form: every field as text, empty for none.
#[derive(Debug, Deserialize)]
pub struct LimitsForm {
    #[serde(default)]
    max_running: String,
    #[serde(default)]
    key_limit: String,
    #[serde(default)]
    rate: String,
    #[serde(default)]
    rate_per: String,
    #[serde(default)]
    rate_burst: String,
    #[serde(default)]
    max_depth: String,
    #[serde(default)]
    fairness: String,
    #[serde(default)]
    #[allow(dead_code)]
    csrf: String,
}

impl LimitsForm {
    fn limits(&self) -> Result<Limits, String> {
        let number = |field: &str, text: &str| -> Result<Option<Option<i32>>, String> {
            let text = text.trim();
            if text.is_empty() {
                return Ok(Some(None));
            }
            text.parse()
                .map(|n| Some(Some(n)))
                .map_err(|_| format!("{field}: {text:?} is not a whole number"))
        };
        let rate = self.rate.trim();
        // (a burst goes with a rate: without one it is not read)
        let burst = match rate.is_empty() {
            true => None,
            false => number("burst", &self.rate_burst)?.flatten(),
        };
        Ok(Limits::new(
            number("max running", &self.max_running)?,
            number("key limit", &self.key_limit)?,
            Some((!rate.is_empty()).then(|| rate.to_string())),
            Some(self.rate_per.clone()).filter(|p| !p.is_empty()),
            burst,
            number("max depth", &self.max_depth)?,
            Some(self.fairness.clone()).filter(|f| !f.is_empty()),
        ))
    }
}

/// `POST /queues/{name}/{pause|resume|limits}`.
pub async fn act(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
    ApiPath((name, action)): ApiPath<(String, String)>,
    ApiForm(form): ApiForm<LimitsForm>,
) -> Response {
    let root = super::root_of(uri.path());
    let action = match action.as_str() {
        "pause" => QueueAction::Pause,
        "resume" => QueueAction::Resume,
        "limits" => match form
            .limits()
            .map_err(ApiError::invalid)
            .and_then(|l| l.to_change())
        {
            Ok(change) => QueueAction::Limits(change),
            Err(e) => return back(&root, "queues", Err(e.message)),
        },
        other => return back(&root, "queues", Err(format!("no queue action {other:?}"))),
    };
    let outcome = actions::queue(&state, &who, &name, action).await;
    back(
        &root,
        "queues",
        outcome
            .map(|_| format!("queue {name}: saved"))
            .map_err(|e| e.message),
    )
}
