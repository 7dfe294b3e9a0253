//! The JSON API under `/api/v1` and the health check. Bodies use the field names of the CLI's
//! `--json`; errors are `{"error": {"code", "message"}}` (see `error.rs`); every change is
//! recorded in the audit log with its outcome.

pub(crate) mod jobs;
pub(crate) mod others;
pub(crate) mod queues;
pub(crate) mod workflows;

pub(crate) use jobs::trace_of;

use crate::error::{ApiError, ApiResult};
use crate::State;
use axum::extract::State as S;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::json;

/// The OpenAPI 3.1 description of every route.
const OPENAPI: &str = include_str!("openapi.json");

/// Every API route, each write under a span of its own when spans are exported.
pub fn routes(state: &State) -> Router<State> {
    let v1 = Router::new()
        .route("/queues", get(queues::list))
        .route("/queues/{name}", get(queues::get).patch(queues::change))
        .route("/queues/{name}/pause", post(queues::pause))
        .route("/queues/{name}/resume", post(queues::resume))
        .route("/queues/{name}/groups", get(queues::groups))
        .route("/queues/{name}/groups/{group}", put(queues::group_weight))
        .route("/jobs", get(jobs::list).post(jobs::enqueue))
        .route("/jobs/bulk/{action}", post(jobs::bulk))
        .route("/jobs/{id}", get(jobs::get).delete(jobs::delete))
        .route("/jobs/{id}/retry", post(jobs::retry))
        .route("/jobs/{id}/cancel", post(jobs::cancel))
        .route("/workers", get(others::workers))
        .route("/activity", get(others::activity))
        .route("/workflows", get(workflows::list).post(workflows::start))
        .route("/workflows/{id}", get(workflows::get))
        .route("/workflows/{id}/signal", post(workflows::signal))
        .route("/workflows/{id}/{action}", post(workflows::act))
        .route("/schedules", get(others::schedules))
        .route("/schedules/{name}/{action}", post(others::schedule_act))
        .route("/notifications", get(others::notifications))
        .route(
            "/notifications/{id}/retry",
            post(others::notification_retry),
        )
        .route("/audit", get(others::audit))
        .route("/openapi.json", get(openapi))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::server_span::around,
        ))
        .fallback(not_found);
    Router::new()
        .nest("/api/v1", v1)
        .route("/healthz", get(healthz))
        .route("/metrics", get(crate::metrics::scrape))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such API route: GET /api/v1/openapi.json lists them")
}

/// `GET /healthz`: 200 `{"ok": true}` when the database answers, 503 otherwise.
async fn healthz(S(state): S<State>) -> impl IntoResponse {
    match state.client.check().await {
        Ok(()) => (StatusCode::OK, Json(json!({"ok": true}))).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ok": false, "error": {"code": "database", "message": remuda::error_chain(&e)}})),
        )
            .into_response(),
    }
}

/// A query parameter or field given as an empty string counts as not given.
pub(crate) fn optional(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// Parses `field`'s text into `T`, a 422 naming the field when it is not one.
pub(crate) fn parse_field<T: std::str::FromStr>(field: &str, text: &str) -> ApiResult<T>
where
    T::Err: std::fmt::Display,
{
    text.parse()
        .map_err(|e| ApiError::invalid(format!("{field}: {e}")))
}

/// A list's `limit`: 1 to 1000, default 100.
pub(crate) fn page_limit(limit: Option<i64>) -> ApiResult<i64> {
    match limit {
        None => Ok(100),
        Some(n) if (1..=remuda::MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::invalid(format!(
            "limit: a page holds 1 to {} items, not {n}",
            remuda::MAX_PAGE
        ))),
    }
}
