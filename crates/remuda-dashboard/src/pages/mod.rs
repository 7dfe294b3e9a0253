//! The server-rendered pages: HTML written on the server (see `html.rs`), a stylesheet and a
//! small script for live refresh embedded in the binary, no inline script (the
//! Content-Security-Policy forbids it), links relative so that the dashboard works mounted
//! under any path.

mod chart;
mod graph;
pub mod html;
mod jobs;
mod login;
mod others;
mod overview;
mod queues;
mod view;
mod workflows;

use crate::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

/// The stylesheet.
const CSS: &str = include_str!("../../assets/remuda.css");
/// The script: live refresh (pausable), confirmations.
const JS: &str = include_str!("../../assets/remuda.js");

/// The policy every response carries: nothing but the dashboard's own files, no inline
/// script or style, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The pages' routes.
pub fn routes() -> Router<State> {
    Router::new()
        .route("/login", get(login::form).post(login::submit))
        .route("/logout", post(login::logout))
        .route("/", get(overview::page))
        .route("/jobs", get(jobs::list))
        .route("/jobs/bulk", post(jobs::bulk))
        .route("/jobs/{id}", get(jobs::show))
        .route("/jobs/{id}/{action}", post(jobs::act))
        .route("/queues", get(queues::page))
        .route("/queues/{name}/{action}", post(queues::act))
        .route("/workers", get(others::workers))
        .route("/workflows", get(workflows::list).post(workflows::start))
        .route("/workflows/{id}", get(workflows::show))
        .route("/workflows/{id}/{action}", post(workflows::act))
        .route("/schedules", get(others::schedules))
        .route("/schedules/{name}/{action}", post(others::schedule_act))
        .route("/notifications", get(others::notifications))
        .route(
            "/notifications/{id}/retry",
            post(others::notification_retry),
        )
        .route("/audit", get(others::audit_log))
        .route("/maintenance", get(others::maintenance))
        .route("/assets/remuda.css", get(|| asset("text/css", CSS)))
        .route("/assets/remuda.js", get(|| asset("text/javascript", JS)))
}

async fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// Adds the security headers to every response.
pub(crate) async fn secure_headers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Shows the errors of page requests as a page rather than the API's JSON: a handler answers
/// `{"error": {...}}` either way, and a person reading a page gets it as HTML.
pub(crate) async fn html_errors(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let failed = response.status().is_client_error() || response.status().is_server_error();
    if crate::auth::is_machine(&path) || path == "/healthz" || !failed || !is_json {
        return response;
    }
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let message = value["error"]["message"]
        .as_str()
        .unwrap_or("something went wrong");
    let root = root_of(&path);
    let frame = html::Frame {
        title: status.canonical_reason().unwrap_or("Error"),
        section: "",
        csrf: None,
        read_only: false,
        depth: root.matches("../").count(),
    };
    let content = format!(
        "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"{root}\">Back to the overview</a></p>",
        html::esc(message)
    );
    (status, axum::response::Html(html::layout(&frame, &content))).into_response()
}

/// The relative path from the page at `path` to the dashboard's root.
pub(crate) fn root_of(path: &str) -> String {
    let depth = path.trim_start_matches('/').matches('/').count();
    if depth == 0 {
        "./".into()
    } else {
        "../".repeat(depth)
    }
}
