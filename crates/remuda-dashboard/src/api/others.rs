//! `/api/v1/workers`, `/schedules`, `/notifications` and `/audit`.

use super::{optional, page_limit, parse_field};
use crate::actions;
use crate::audit;
use crate::auth::Principal;
use crate::error::ApiResult;
use crate::extract::{ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::{Extension, Json};
use remuda::notify::{NotificationFilter, NotificationState};
use serde::Deserialize;
use serde_json::{json, Value};

/// `GET /api/v1/workers`: as `remuda workers --json`.
pub async fn workers(S(state): S<State>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.client.workers().await?)))
}

/// Query of `GET /api/v1/activity`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivityParams {
    minutes: Option<i32>,
}

/// `GET /api/v1/activity?minutes=60`: per queue, what the workers ran over the last minutes
/// (counts, failure rate, wait and run percentiles, and each minute).
pub async fn activity(
    S(state): S<State>,
    ApiQuery(params): ApiQuery<ActivityParams>,
) -> ApiResult<Json<Value>> {
    let minutes = params.minutes.unwrap_or(60);
    Ok(Json(json!(state.client.activity(minutes).await?)))
}

/// `GET /api/v1/schedules`: as `remuda schedules --json`.
pub async fn schedules(S(state): S<State>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.client.schedules().await?)))
}

/// `POST /api/v1/schedules/{name}/{pause|resume|trigger}`.
pub async fn schedule_act(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath((name, action)): ApiPath<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut done = actions::schedule(&state, &who, &name, &action).await?;
    done["name"] = json!(name);
    Ok(Json(done))
}

/// Query of `GET /api/v1/notifications`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationParams {
    state: Option<String>,
    job: Option<i64>,
    workflow: Option<i64>,
    limit: Option<i64>,
}

/// `GET /api/v1/notifications`: as `remuda notifications --json`.
pub async fn notifications(
    S(state): S<State>,
    ApiQuery(params): ApiQuery<NotificationParams>,
) -> ApiResult<Json<Value>> {
    let filter = NotificationFilter {
        state: optional(&params.state)
            .map(|s| parse_field::<NotificationState>("state", s))
            .transpose()?,
        job_id: params.job,
        workflow_id: params.workflow,
        limit: Some(page_limit(params.limit)?),
    };
    Ok(Json(json!(state.client.notifications(&filter).await?)))
}

/// `POST /api/v1/notifications/{id}/retry`: a dead notification is sent again.
pub async fn notification_retry(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<Value>> {
    actions::notification_retry(&state, &who, id).await?;
    Ok(Json(json!({"id": id, "state": "pending"})))
}

/// Query of `GET /api/v1/audit`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    before: Option<i64>,
    limit: Option<i64>,
}

/// `GET /api/v1/audit`: the changes made through the dashboard and the API, newest first.
pub async fn audit(
    S(state): S<State>,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> ApiResult<Json<Value>> {
    let entries = audit::list(&state.client, params.before, page_limit(params.limit)?).await?;
    Ok(Json(json!(entries)))
}
