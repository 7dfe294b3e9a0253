//! The overview: per queue the counts per state and the lag, and the last hour's throughput,
//! failure rate and wait and run percentiles with a chart per minute; workers alive; the
//! leader.

use super::chart;
use super::html::{esc, url};
use super::view::{badge, span, Ctx};
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::State;
use axum::extract::State as S;
use axum::http::Uri;
use axum::response::Html;
use axum::Extension;
use remuda::{JobState, QueueActivity};
use std::fmt::Write;

/// `GET /`.
pub async fn page(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    uri: Uri,
) -> ApiResult<Html<String>> {
    let ctx = Ctx::new(&state, &who, &uri);
    let (queues, workers, maintenance, activity) = tokio::try_join!(
        state.counts.get(&state.client),
        state.client.workers(),
        state.client.maintenance_status(),
        state.client.activity(60)
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
    for q in queues.iter() {
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
    last_hour(&mut out, &ctx, &activity);
    Ok(ctx.render("Overview", "", &out))
}

/// A rate for people: two decimals below 10, one below 100, none beyond.
fn rate(per_minute: f64) -> String {
    match per_minute {
        r if r < 10.0 => format!("{r:.2}"),
        r if r < 100.0 => format!("{r:.1}"),
        r => format!("{r:.0}"),
    }
}

/// The last hour per queue: a chart of attempts per minute, counts, failure rate, and wait
/// and run percentiles.
fn last_hour(out: &mut String, ctx: &Ctx, activity: &[QueueActivity]) {
    *out += "<h2>Last hour</h2><table id=\"activity\"><thead><tr><th>Queue</th><th>Attempts per minute</th>\
        <th class=\"num\">Completed</th><th class=\"num\">Failed</th><th class=\"num\">Retried</th>\
        <th class=\"num\">Per minute</th><th class=\"num\">Failure rate</th>\
        <th class=\"num\">Wait p50 / p95</th><th class=\"num\">Run p50 / p95</th></tr></thead><tbody>";
    let ms = |v: Option<f64>| v.map_or_else(|| "–".into(), |ms| span(ms / 1000.0));
    for a in activity {
        let _ = write!(
            out,
            "<tr data-queue=\"{0}\"><td><a href=\"{1}?queue={2}\">{0}</a></td><td>{3}</td>\
             <td class=\"num\" data-field=\"completed\">{4}</td><td class=\"num\" data-field=\"failed\">{5}</td>\
             <td class=\"num\" data-field=\"retried\">{6}</td><td class=\"num\">{7}</td>\
             <td class=\"num\" data-field=\"failure_rate\">{8:.1}%</td><td class=\"num\">{9} / {10}</td>\
             <td class=\"num\">{11} / {12}</td></tr>",
            esc(&a.queue),
            ctx.href("jobs"),
            url(&a.queue),
            chart::minutes(&a.minutes),
            a.completed,
            a.failed,
            a.retried,
            rate(a.per_minute),
            a.failure_rate * 100.0,
            ms(a.wait_p50_ms),
            ms(a.wait_p95_ms),
            ms(a.run_p50_ms),
            ms(a.run_p95_ms),
        );
    }
    if activity.is_empty() {
        *out += "<tr><td colspan=\"9\" class=\"muted\">Nothing ran in the last hour.</td></tr>";
    }
    *out += "</tbody></table><p class=\"hint\">As the workers report with their heartbeats; \
        percentiles are estimated within the buckets of the metrics' histograms.</p>";
}
