//! `/api/v1/workflows`: list and look up runs, start one from a spec, pause, resume, cancel,
//! retry and signal.

use super::{optional, parse_field};
use crate::actions::{self, audited, Definition};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::http::StatusCode;
use axum::{Extension, Json};
use remuda::workflow::{WorkflowFilter, WorkflowSpec, WorkflowState};
use serde::Deserialize;
use serde_json::{json, Value};

/// Query of `GET /api/v1/workflows`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    state: Option<String>,
    name: Option<String>,
    limit: Option<i64>,
}

/// `GET /api/v1/workflows`: as `remuda workflow list --json`.
pub async fn list(
    S(state): S<State>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<Value>> {
    let filter = WorkflowFilter {
        state: optional(&params.state)
            .map(|s| parse_field::<WorkflowState>("state", s))
            .transpose()?,
        name: optional(&params.name).map(str::to_string),
        limit: Some(super::page_limit(params.limit)?),
    };
    Ok(Json(json!(state.client.workflows(&filter).await?)))
}

/// `GET /api/v1/workflows/{id}`: the run with its nodes, as `remuda workflow show --json`.
pub async fn get(S(state): S<State>, ApiPath(id): ApiPath<i64>) -> ApiResult<Json<Value>> {
    let run = state
        .client
        .workflow(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no workflow run with id {id}")))?;
    Ok(Json(json!(run)))
}

/// The body of `POST /api/v1/workflows`: a spec (the JSON form of a spec file, sub-workflows
/// inline), the run's input, an idempotency key, and the fair-share group its jobs take.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    spec: WorkflowSpec,
    #[serde(default)]
    args: Value,
    key: Option<String>,
    group: Option<String>,
}

/// `POST /api/v1/workflows`: `201 {"id", "existed"}`.
pub async fn start(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiJson(body): ApiJson<Start>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let definition = Definition::Spec(Box::new(body.spec));
    // (a run started with a group: as `remuda workflow start --group`)
    let started = remuda::group::scope(
        body.group,
        actions::start_workflow(&state, &who, definition, &body.args, body.key.as_deref()),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(json!(started))))
}

/// `POST /api/v1/workflows/{id}/{pause|resume|cancel|retry}`: `{"id", "action",
/// "previous_state"}`.
pub async fn act(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath((id, action)): ApiPath<(i64, String)>,
) -> ApiResult<Json<Value>> {
    let was = actions::workflow(&state, &who, id, &action).await?;
    Ok(Json(
        json!({"id": id, "action": action, "previous_state": was}),
    ))
}

/// The body of a signal.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signal {
    name: String,
    #[serde(default)]
    data: Value,
}

/// `POST /api/v1/workflows/{id}/signal`: `{"id", "signal", "completed"}` (how many waiting
/// nodes it completed).
pub async fn signal(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<Signal>,
) -> ApiResult<Json<Value>> {
    let result = state
        .client
        .signal_workflow(id, &body.name, &body.data)
        .await
        .map_err(Into::into);
    let target = format!("workflow run {id}");
    let completed = audited(&state, &who, "workflow.signal", target, result).await?;
    Ok(Json(
        json!({"id": id, "signal": body.name, "completed": completed}),
    ))
}
