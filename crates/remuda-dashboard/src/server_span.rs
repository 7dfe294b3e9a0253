//! A `SERVER` span for each write of the API (every method but GET, HEAD and OPTIONS),
//! exported when the dashboard is given a [`SpanSender`] ([`crate::Dashboard::spans`]): under
//! the request's `traceparent` header, named `METHOD /api/v1/route/{param}`, with the HTTP
//! conventions' attributes. What the request enqueues or starts continues it.

use crate::State;
use axum::extract::{MatchedPath, Request, State as S};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use remuda::telemetry::{Attr, SpanKind, SpanRecord};
use std::time::SystemTime;

/// Runs a write under its span, and records the span with the answer's status.
pub(crate) async fn around(S(state): S<State>, request: Request, next: Next) -> Response {
    let Some(spans) = state.spans.clone() else {
        return next.run(request).await;
    };
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let parent = crate::api::trace_of(request.headers());
    let context = spans.new_context(parent.as_ref());
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string());
    let start = SystemTime::now();
    let response = remuda::trace::scope(Some(context.clone()), next.run(request)).await;
    let status = response.status();
    let mut attributes: Vec<(String, Attr)> = vec![
        ("http.request.method".into(), method.clone().into()),
        ("url.path".into(), path.into()),
        (
            "http.response.status_code".into(),
            i64::from(status.as_u16()).into(),
        ),
    ];
    if let Some(route) = &route {
        attributes.push(("http.route".into(), route.clone().into()));
    }
    spans.record(SpanRecord {
        name: match &route {
            Some(route) => format!("{method} {route}"),
            None => method,
        },
        kind: SpanKind::Server,
        context,
        parent: parent.map(|p| p.parent_id().to_string()),
        links: Vec::new(),
        start,
        end: SystemTime::now(),
        attributes,
        // (a server span is an error for the server's failures, not the client's)
        error: status
            .is_server_error()
            .then(|| ("HTTP_5XX".to_string(), status.to_string())),
    });
    response
}
