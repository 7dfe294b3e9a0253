//! `/api/v1/jobs`: list with filters and keyset pages, look up, enqueue, and retry, cancel or
//! delete one job or every job matching a filter.

use super::{optional, parse_field};
use crate::actions::{self, audited, JobAction};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::State;
use axum::extract::State as S;
use axum::http::StatusCode;
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use remuda::{JobFilter, JobState, NewJob};
use serde::Deserialize;
use serde_json::{json, Value};

/// The filter of a list or a bulk action, as query parameters or a JSON body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterParams {
    state: Option<String>,
    queue: Option<String>,
    kind: Option<String>,
    worker: Option<String>,
    /// JSON the args must contain: text in a query string, a value in a body.
    args: Option<Value>,
    limit: Option<i64>,
    after: Option<String>,
    /// The workflow run whose jobs to list: a number, or its text in a query string.
    workflow: Option<Value>,
}

impl FilterParams {
    /// A filter from the texts of a page's form (state, queue, kind, worker, args; empty for
    /// any) and its page cursor.
    pub fn from_texts(texts: [&String; 6], after: Option<String>) -> FilterParams {
        let [state, queue, kind, worker, args, workflow] = texts.map(|t| Some(t.clone()));
        FilterParams {
            state,
            queue,
            kind,
            worker,
            args: args.map(serde_json::Value::String),
            limit: None,
            after,
            workflow: workflow.map(Value::String),
        }
    }

    /// The library's filter, every value checked.
    pub fn to_filter(&self) -> ApiResult<JobFilter> {
        let state = optional(&self.state)
            .map(|s| parse_field::<JobState>("state", s))
            .transpose()?;
        let args = match &self.args {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.trim().is_empty() => None,
            Some(Value::String(text)) => Some(serde_json::from_str(text).map_err(|e| {
                ApiError::bad_request(format!(
                    "args must be JSON that the jobs' args contain, as {{\"user\": 42}}: {e}"
                ))
            })?),
            Some(value) => Some(value.clone()),
        };
        Ok(JobFilter {
            state,
            queue: optional(&self.queue).map(str::to_string),
            kind: optional(&self.kind).map(str::to_string),
            worker: optional(&self.worker).map(str::to_string),
            args,
            limit: self.limit,
            after: optional(&self.after).map(str::to_string),
            workflow: self.workflow_id()?,
        })
    }

    /// The workflow run filtered on, checked.
    fn workflow_id(&self) -> ApiResult<Option<i64>> {
        let bad = |got: &Value| {
            ApiError::bad_request(format!(
                "workflow must be a workflow run's id (a whole number), not {got}"
            ))
        };
        match &self.workflow {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(t)) if t.trim().is_empty() => Ok(None),
            Some(Value::String(t)) => t
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| bad(&Value::String(t.clone()))),
            Some(v @ Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| bad(v)),
            Some(v) => Err(bad(v)),
        }
    }
}

/// `GET /api/v1/jobs`: `{"jobs": [...], "next": cursor or null}`.
pub async fn list(
    S(state): S<State>,
    ApiQuery(params): ApiQuery<FilterParams>,
) -> ApiResult<Json<Value>> {
    let page = state.client.job_page(&params.to_filter()?).await?;
    Ok(Json(json!(page)))
}

/// `GET /api/v1/jobs/{id}`: the job as `remuda job ID --json` prints it.
pub async fn get(S(state): S<State>, ApiPath(id): ApiPath<i64>) -> ApiResult<Json<Value>> {
    let job = state
        .client
        .job(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no job with id {id}")))?;
    Ok(Json(json!(job)))
}

/// The body of `POST /api/v1/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enqueue {
    kind: String,
    #[serde(default)]
    args: Value,
    queue: Option<String>,
    priority: Option<i32>,
    run_at: Option<DateTime<Utc>>,
    /// A duration (`30s`, `5m`) to wait before it may run.
    delay: Option<String>,
    max_attempts: Option<i32>,
    /// Per-job timeout (`30s`).
    timeout: Option<String>,
    /// The deadline for starting.
    expires_at: Option<DateTime<Utc>>,
    unique_key: Option<String>,
    concurrency_key: Option<String>,
    group: Option<String>,
    target_worker: Option<String>,
    requires: Option<Vec<String>>,
}

impl Enqueue {
    fn to_job(&self) -> ApiResult<NewJob> {
        let duration = |field: &str, text: &str| {
            remuda::duration::parse(text).map_err(|e| ApiError::invalid(format!("{field}: {e}")))
        };
        let mut job = NewJob::new(self.kind.clone(), &self.args)?;
        if let Some(queue) = &self.queue {
            job = job.queue(queue.clone());
        }
        if let Some(p) = self.priority {
            job = job.priority(p);
        }
        if let Some(at) = self.run_at {
            job = job.run_at(at);
        }
        if let Some(delay) = &self.delay {
            if self.run_at.is_some() {
                return Err(ApiError::invalid("give run_at or delay, not both"));
            }
            job = job.delay(duration("delay", delay)?);
        }
        if let Some(n) = self.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(timeout) = &self.timeout {
            job = job.timeout(duration("timeout", timeout)?);
        }
        if let Some(at) = self.expires_at {
            job = job.expires_at(at);
        }
        if let Some(key) = &self.unique_key {
            job = job.unique_key(key.clone());
        }
        if let Some(group) = &self.group {
            job = job.group(group.clone());
        }
        if let Some(key) = &self.concurrency_key {
            job = job.concurrency_key(key.clone());
        }
        if let Some(name) = &self.target_worker {
            job = job.target_worker(name.clone());
        }
        if let Some(caps) = &self.requires {
            job = job.requires(caps.clone());
        }
        Ok(job)
    }
}

/// The W3C trace context of a request (`traceparent`, `tracestate` headers), if it has a
/// valid one: as W3C asks of a receiver, a malformed one is ignored (a proxy's header must not
/// refuse the job), and the job starts no trace of its own.
pub(crate) fn trace_of(headers: &axum::http::HeaderMap) -> Option<remuda::TraceContext> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let traceparent = text("traceparent")?;
    // a bad tracestate loses only itself (W3C), a bad traceparent the whole context
    let parsed = remuda::TraceContext::parse(traceparent, text("tracestate"))
        .or_else(|_| remuda::TraceContext::parse(traceparent, None));
    match parsed {
        Ok(trace) => Some(trace),
        Err(e) => {
            tracing::debug!("remuda dashboard: a traceparent header is ignored: {e}");
            None
        }
    }
}

/// `POST /api/v1/jobs`: `201 {"id"}`; a unique key another job holds is `409` with that
/// job's `id`. A `traceparent` header (and `tracestate`) is the trace the job continues.
pub async fn enqueue(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<Enqueue>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let mut job = body.to_job()?;
    // (under the request's span, when spans are exported, the job continues that instead,
    // through its send)
    if remuda::trace::current().is_none() {
        if let Some(trace) = trace_of(&headers) {
            job = job.trace(trace);
        }
    }
    let result = match state.client.insert_each(&[job]).await {
        Ok(list) => match list.first() {
            Some(i) if i.duplicate => Err(ApiError::new(
                StatusCode::CONFLICT,
                "unique_conflict",
                format!(
                    "job {} holds the unique key {:?}: nothing was enqueued",
                    i.id,
                    body.unique_key.as_deref().unwrap_or_default()
                ),
            )
            .with("id", json!(i.id))),
            Some(i) => Ok(i.id),
            None => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "no job id came back",
            )),
        },
        Err(e) => Err(e.into()),
    };
    let target = format!("kind {}", body.kind);
    let id = audited(&state, &who, "job.enqueue", target, result).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": id}))))
}

/// `?force=true` runs a completed job again; `?fresh=true` drops the steps it recorded.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryParams {
    #[serde(default)]
    force: bool,
    #[serde(default)]
    fresh: bool,
}

/// `POST /api/v1/jobs/{id}/retry`.
pub async fn retry(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(params): ApiQuery<RetryParams>,
) -> ApiResult<Json<Value>> {
    let action = JobAction::Retry {
        force: params.force,
        fresh: params.fresh,
    };
    let was = actions::job(&state, &who, id, action).await?;
    Ok(Json(
        json!({"id": id, "previous_state": was, "state": "available", "fresh": params.fresh}),
    ))
}

/// `POST /api/v1/jobs/{id}/cancel`.
pub async fn cancel(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<Value>> {
    let was = actions::job(&state, &who, id, JobAction::Cancel).await?;
    Ok(Json(json!({
        "id": id, "previous_state": was, "state": "cancelled", "already": was == JobState::Cancelled
    })))
}

/// `DELETE /api/v1/jobs/{id}`.
pub async fn delete(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(id): ApiPath<i64>,
) -> ApiResult<Json<Value>> {
    let was = actions::job(&state, &who, id, JobAction::Delete).await?;
    Ok(Json(
        json!({"id": id, "previous_state": was, "deleted": true}),
    ))
}

/// The body of a bulk action: the filter, and `dry_run` to only count.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bulk {
    #[serde(flatten)]
    filter: BulkFilter,
    #[serde(default)]
    dry_run: bool,
}

/// A list's filter without its page.
#[derive(Debug, Default, Deserialize)]
pub struct BulkFilter {
    state: Option<String>,
    queue: Option<String>,
    kind: Option<String>,
    worker: Option<String>,
    args: Option<Value>,
    workflow: Option<Value>,
}

/// `POST /api/v1/jobs/bulk/{retry|cancel|delete}`: `{"matched", "changed", "in_workflows"}`.
pub async fn bulk(
    S(state): S<State>,
    Extension(who): Extension<Principal>,
    ApiPath(action): ApiPath<String>,
    ApiJson(body): ApiJson<Bulk>,
) -> ApiResult<Json<Value>> {
    let action = actions::bulk_action(&action)?;
    let f = body.filter;
    let params = FilterParams {
        state: f.state,
        queue: f.queue,
        kind: f.kind,
        worker: f.worker,
        args: f.args,
        workflow: f.workflow,
        ..Default::default()
    };
    let filter = params.to_filter()?;
    let outcome = actions::jobs_matching(&state, &who, &filter, action, body.dry_run).await?;
    Ok(Json(json!(outcome)))
}
