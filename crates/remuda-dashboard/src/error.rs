//! Errors as the API answers them: `{"error": {"code", "message"}}` with the status that says
//! who should act — 400/422 the caller's input, 401 no valid token, 403 refused (read-only
//! mode, a failed CSRF or origin check), 404 nothing there, 409 a conflict with the current
//! state (a unique key, a job in the wrong state), 503 the database.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

/// An error answered to an API or page request.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code (`not_found`, `read_only`, `unique_conflict`, …).
    pub code: &'static str,
    /// What went wrong and what to do, for people.
    pub message: String,
    /// More fields of the error object (the existing job's `id` of a unique conflict).
    pub extra: Map<String, Value>,
}

/// The result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// An error with no extra fields.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// 400: a request that could not be read (bad JSON, a bad query parameter).
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 422: a request read well but whose values are refused.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// Adds a field to the error object.
    pub fn with(mut self, key: &str, value: Value) -> ApiError {
        self.extra.insert(key.into(), value);
        self
    }
}

impl From<remuda::Error> for ApiError {
    fn from(e: remuda::Error) -> ApiError {
        use remuda::Error as E;
        let message = remuda::error_chain(&e);
        let (status, code) = match &e {
            E::InvalidInput(_) | E::Json(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            E::InvalidWorkflow(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_workflow"),
            E::NotFound(_)
            | E::WorkflowNotFound(_)
            | E::ScheduleNotFound(_)
            | E::NotificationNotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            E::WrongState { .. }
            | E::WorkflowWrongState { .. }
            | E::NotificationWrongState { .. } => (StatusCode::CONFLICT, "wrong_state"),
            E::UniqueConflict(_) => (StatusCode::CONFLICT, "unique_conflict"),
            E::WorkflowDrift { .. } => (StatusCode::CONFLICT, "workflow_drift"),
            E::QueueFull(_) => (StatusCode::CONFLICT, "queue_full"),
            e if e.is_bad_data() => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            e if e.is_database_unusable() || e.is_transient() => {
                (StatusCode::SERVICE_UNAVAILABLE, "database")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        if status.is_server_error() {
            tracing::warn!("remuda dashboard: {message}");
        }
        ApiError::new(status, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = Map::new();
        error.insert("code".into(), json!(self.code));
        error.insert("message".into(), json!(self.message));
        error.extend(self.extra);
        (self.status, axum::Json(json!({ "error": error }))).into_response()
    }
}
