//! Request extractors whose refusals are API errors (`400` with the reason), not axum's plain
//! text: a body that is not the JSON expected, a query parameter or a path segment of the
//! wrong type.

use crate::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// The largest request body read (axum's default limit, named here so that it is said).
pub const MAX_BODY: usize = 2 * 1024 * 1024;

/// The refusal of a body over [`MAX_BODY`].
pub(crate) fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!(
            "the request body is over the limit of {MAX_BODY} bytes ({} MiB): send less at once (several requests, or COPY through `remuda enqueue-batch`)",
            MAX_BODY >> 20
        ),
    )
}

/// Refuses a request whose `Content-Length` is over [`MAX_BODY`] before its body is read: a
/// client that waits for `100 Continue` (curl does for large bodies) gets the 413 without
/// sending the body, and none is cut off mid-send.
pub(crate) async fn refuse_oversized(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_BODY as u64) {
        return too_large().into_response();
    }
    next.run(request).await
}

/// A JSON body (`Content-Type: application/json`).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large()),
            Err(e) => Err(ApiError::bad_request(format!(
                "the request body is not the JSON expected: {}",
                e.body_text()
            ))),
        }
    }
}

/// The query string.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(e) => Err(ApiError::bad_request(format!(
                "bad query parameters: {}",
                e.body_text()
            ))),
        }
    }
}

/// Path parameters.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(e) => Err(ApiError::bad_request(format!(
                "bad path: {}",
                e.body_text()
            ))),
        }
    }
}

/// A form body (`application/x-www-form-urlencoded`), for the pages.
pub struct ApiForm<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiForm<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Form::<T>::from_request(req, state).await {
            Ok(axum::Form(value)) => Ok(ApiForm(value)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large()),
            Err(e) => Err(ApiError::bad_request(format!(
                "the form is not the one expected: {}",
                e.body_text()
            ))),
        }
    }
}
