//! Logging in with a token into a session cookie, and out.

use super::html::{esc, layout, Frame};
use super::root_of;
use crate::auth::{cookie_header, over_tls, session_cookie, token_named, Principal};
use crate::error::ApiResult;
use crate::extract::ApiForm;
use crate::State;
use axum::extract::State as S;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Extension;
use serde::Deserialize;

fn page(uri: &Uri, read_only: bool, message: Option<&str>) -> Html<String> {
    let frame = Frame {
        title: "Log in",
        section: "login",
        csrf: None,
        read_only,
        depth: root_of(uri.path()).matches("../").count(),
    };
    let message = message
        .map(|m| format!("<p class=\"error\" role=\"alert\">{}</p>", esc(m)))
        .unwrap_or_default();
    Html(layout(
        &frame,
        &format!(
            "{message}<form method=\"post\" action=\"login\" class=\"card\">\
<label for=\"token\">Token</label> <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus> \
<button type=\"submit\">Log in</button>\
<p class=\"hint\">The token `remuda dashboard` was started with (--token, REMUDA_DASHBOARD_TOKEN, or the one it printed).</p></form>"
        ),
    ))
}

/// `GET /login`.
pub async fn form(S(state): S<State>, uri: Uri) -> Html<String> {
    page(&uri, state.config.read_only, None)
}

/// The login form.
#[derive(Deserialize)]
pub struct Login {
    token: String,
}

/// `POST /login`: a valid token opens a session and goes to the overview.
pub async fn submit(
    S(state): S<State>,
    uri: Uri,
    headers: HeaderMap,
    ApiForm(login): ApiForm<Login>,
) -> Response {
    let Some(token) = token_named(&state.config.tokens, login.token.trim()) else {
        let page = page(
            &uri,
            state.config.read_only,
            Some("That token does not open this dashboard."),
        );
        return (StatusCode::UNAUTHORIZED, page).into_response();
    };
    match state.sessions.open(token.name()) {
        Ok(id) => (
            [(
                header::SET_COOKIE,
                cookie_header(Some(&id), over_tls(&headers)),
            )],
            Redirect::to(&root_of(uri.path())),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot open a session: {e}"),
        )
            .into_response(),
    }
}

/// `POST /logout`: ends the session.
pub async fn logout(
    S(state): S<State>,
    uri: Uri,
    headers: HeaderMap,
    Extension(_who): Extension<Principal>,
) -> ApiResult<Response> {
    if let Some(id) = session_cookie(&headers) {
        state.sessions.close(id);
    }
    Ok((
        [(header::SET_COOKIE, cookie_header(None, over_tls(&headers)))],
        Redirect::to(&format!("{}login", root_of(uri.path()))),
    )
        .into_response())
}
