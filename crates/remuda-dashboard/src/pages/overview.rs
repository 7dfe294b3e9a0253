//! The overview: per queue the counts per state and the lag; workers alive; the leader.

use super::html::{esc, url};
use super::view::{badge, span, Ctx};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::State;
use axum::extract::State as S;
use axum::http::Uri;
use axum::response::Html;
use axum::Extension;
use remuda::JobState;
use std::fmt::Write;

/// `GET /`.
pub async fn page(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let (queues, workers, maintenance) = tokio::try_join!(
        state.client.queue_stats_capped(Some(remuda::COUNT_CAP)),
        state.client.workers(),
        state.client.maintenance_status()
    )?;
    let alive = workers.iter().filter(|w| w.alive).count();
    let running: i64 = workers.iter().filter(|w| w.alive).map(|w| w.running).sum();
    let total = |s: JobState| queues.iter().map(|q| q.count(s)).sum::<i64>();
    let leader = match &maintenance.leader {
        Some(l) if l.current => esc(&l.worker),
        _ => "none".into(),
    };
    let mut out = String::from("<div class=\"cards\">");
    for (label, value) in [
        ("Workers alive", alive.to_string()),
        ("Running now", running.to_string()),
        ("Available", total(JobState::Available).to_string()),
        ("Scheduled", total(JobState::Scheduled).to_string()),
    ] {
        let _ = write!(
            out,
            "<div class=\"card\"><div class=\"muted\">{label}</div><div class=\"stat\">{value}</div></div>"
        );
    }
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"muted\">Maintenance leader</div><div><a href=\"{}\">{leader}</a></div></div></div>",
        ctx.href("maintenance")
    );
    out += "<h2>Queues</h2><table id=\"queues\"><thead><tr><th>Queue</th><th>Status</th>";
    for s in JobState::ALL {
        let _ = write!(out, "<th class=\"num\">{s}</th>");
    }
    out += "<th class=\"num\">Lag</th><th class=\"num\">Unroutable</th></tr></thead><tbody>";
    let now = chrono::Utc::now();
    for q in &queues {
        let status = if q.settings.paused {
            "paused"
        } else {
            "active"
        };
        let _ = write!(
            out,
            "<tr data-queue=\"{0}\"><td><a href=\"{1}?queue={2}\">{0}</a></td><td>{3}</td>",
            esc(&q.queue),
            ctx.href("jobs"),
            url(&q.queue),
            badge(status)
        );
        for s in JobState::ALL {
            let plus = if q.is_capped(s) { "+" } else { "" };
            let _ = write!(
                out,
                "<td class=\"num\" data-state=\"{s}\"><a href=\"{}?queue={}&amp;state={s}\">{}{plus}</a></td>",
                ctx.href("jobs"),
                url(&q.queue),
                q.count(s)
            );
        }
        let lag = q
            .oldest_available
            .map(|t| span((now - t).num_milliseconds().max(0) as f64 / 1000.0))
            .unwrap_or_else(|| "–".into());
        let _ = write!(
            out,
            "<td class=\"num\">{lag}</td><td class=\"num\">{}</td></tr>",
            q.unroutable
        );
    }
    if queues.is_empty() {
        out += "<tr><td colspan=\"11\" class=\"muted\">No jobs yet.</td></tr>";
    }
    out += "</tbody></table><p class=\"hint\">Counts of finished jobs stop at 10 000 per queue (shown with +).</p>";
    Ok(ctx.render("Overview", "", &out))
}
