//! Who may do what. The API takes `Authorization: Bearer <token>`; the pages log in with a
//! token into a session cookie (HttpOnly, SameSite=Strict), and every change they make
//! carries the session's CSRF token (a form field `csrf` or the header `X-CSRF-Token`) from
//! the dashboard's own origin. Read-only mode refuses every change on the server, whatever
//! the page shows. Each token has a name: the audit log records it as who made a change.

use crate::error::ApiError;
use crate::State;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE: &str = "remuda_session";
/// How long a session lasts without being used.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
/// The fewest characters a token may have.
pub const MIN_TOKEN: usize = 16;

/// A named secret that opens the dashboard and the API.
#[derive(Clone)]
pub struct Token {
    name: String,
    secret: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({:?}, …)", self.name)
    }
}

impl Token {
    /// A token named `name` (what the audit log shows) with this secret, of at least
    /// [`MIN_TOKEN`] characters.
    pub fn new(name: impl Into<String>, secret: impl Into<String>) -> Result<Token, String> {
        let (name, secret) = (name.into(), secret.into());
        if secret.chars().count() < MIN_TOKEN {
            return Err(format!(
                "the dashboard token {name:?} is too short: use at least {MIN_TOKEN} characters (for one: head -c 24 /dev/urandom | base64)"
            ));
        }
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err("a dashboard token needs a name without control characters".into());
        }
        Ok(Token { name, secret })
    }

    /// A token of 32 random bytes (from `/dev/urandom`).
    pub fn random(name: impl Into<String>) -> std::io::Result<Token> {
        Ok(Token {
            name: name.into(),
            secret: random_text()?,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its secret, to print at start when it was made up.
    pub fn secret(&self) -> &str {
        &self.secret
    }
}

/// 32 random bytes from `/dev/urandom`, as URL-safe base64.
pub(crate) fn random_text() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// How a request was let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A bearer token (scripts).
    Api,
    /// A session cookie (the pages).
    Page,
}

impl Via {
    /// `api` or `page`, as the audit log stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Api => "api",
            Via::Page => "page",
        }
    }
}

/// Who is asking: put in each request's extensions once it is let in.
#[derive(Clone, Debug)]
pub struct Principal {
    /// The token's name (`local` without authentication).
    pub actor: String,
    /// Bearer token or session.
    pub via: Via,
    /// The session's CSRF token, for the pages' forms.
    pub csrf: Option<String>,
}

struct Session {
    actor: String,
    csrf: String,
    used: Instant,
}

/// The logged-in sessions of the pages, in memory: a restart logs everybody out.
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// Opens a session for `actor`; returns its id (the cookie's value).
    pub fn open(&self, actor: &str) -> std::io::Result<String> {
        let id = random_text()?;
        let session = Session {
            actor: actor.to_string(),
            csrf: random_text()?,
            used: Instant::now(),
        };
        let mut sessions = self.lock();
        sessions.retain(|_, s| s.used.elapsed() < SESSION_IDLE);
        sessions.insert(id.clone(), session);
        Ok(id)
    }

    /// The principal of the session `id`, when it is open.
    fn find(&self, id: &str) -> Option<Principal> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(id)?;
        if session.used.elapsed() >= SESSION_IDLE {
            sessions.remove(id);
            return None;
        }
        session.used = Instant::now();
        Some(Principal {
            actor: session.actor.clone(),
            via: Via::Page,
            csrf: Some(session.csrf.clone()),
        })
    }

    /// Ends the session `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The token whose secret is `secret`.
pub(crate) fn token_named<'a>(tokens: &'a [Token], secret: &str) -> Option<&'a Token> {
    tokens.iter().find(|t| same_secret(&t.secret, secret))
}

/// The session cookie's value in `headers`.
pub(crate) fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The `Set-Cookie` value of a session (or, with `None`, of its end); `Secure` when the
/// page was served over TLS, so that the browser never sends it over plain HTTP.
pub(crate) fn cookie_header(id: Option<&str>, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match id {
        Some(id) => format!(
            "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
            SESSION_IDLE.as_secs()
        ),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    }
}

/// Whether the request reached the dashboard over TLS: through a proxy that says so
/// (`X-Forwarded-Proto: https`, `Forwarded: proto=https`), or from a page whose origin is
/// `https://` (the dashboard itself speaks plain HTTP behind whatever ends TLS).
pub(crate) fn over_tls(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let forwarded_https = text("x-forwarded-proto").is_some_and(|v| {
        v.split(',')
            .next()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
    });
    let forwarded = text("forwarded").is_some_and(|v| {
        v.split([';', ','])
            .any(|pair| pair.trim().eq_ignore_ascii_case("proto=https"))
    });
    let origin = text("origin").is_some_and(|v| v.starts_with("https://"));
    forwarded_https || forwarded || origin
}

/// Paths anybody may open: the health check, the login page and the stylesheet and script.
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/login") || path.starts_with("/assets/")
}

/// Whether a request for `path` wants JSON (the API, the metrics) rather than a page.
pub(crate) fn is_machine(path: &str) -> bool {
    path.starts_with("/api/") || path == "/metrics"
}

/// Lets in a request with a valid token or session, refuses changes in read-only mode, and
/// checks a session's changes for their CSRF token and origin.
pub(crate) async fn authenticate(
    axum::extract::State(state): axum::extract::State<State>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    if is_public(&path) {
        return next.run(request).await;
    }
    let principal = match identify(&state, request.headers()) {
        Ok(Some(principal)) => principal,
        Ok(None) if is_machine(&path) => {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this needs `Authorization: Bearer <token>` with a token the dashboard was started with",
            )
            .into_response()
        }
        Ok(None) => {
            let login = format!("{}login", crate::pages::root_of(&path));
            return Redirect::to(&login).into_response();
        }
        Err(e) => return e.into_response(),
    };
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if changes && path != "/logout" {
        if state.config.read_only {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "read_only",
                "the dashboard runs read-only (--read-only): nothing can be changed through it",
            )
            .into_response();
        }
        if principal.via == Via::Page {
            let request = match check_forgery(request, &principal).await {
                Ok(request) => request,
                Err(e) => return e.into_response(),
            };
            return next_with(principal, request, next).await;
        }
    }
    next_with(principal, request, next).await
}

async fn next_with(principal: Principal, mut request: Request, next: Next) -> Response {
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// The principal of a request: its bearer token, else its session, else none (or everybody,
/// without authentication).
fn identify(state: &State, headers: &HeaderMap) -> Result<Option<Principal>, ApiError> {
    if state.config.no_auth {
        return Ok(Some(Principal {
            actor: "local".into(),
            via: Via::Api,
            csrf: None,
        }));
    }
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let secret = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        return match secret.and_then(|s| token_named(&state.config.tokens, s)) {
            Some(token) => Ok(Some(Principal {
                actor: token.name.clone(),
                via: Via::Api,
                csrf: None,
            })),
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the Authorization header does not hold a valid `Bearer <token>`",
            )),
        };
    }
    Ok(session_cookie(headers).and_then(|id| state.sessions.find(id)))
}

/// A change asked through a session must come from the dashboard's own origin and carry the
/// session's CSRF token: another site can make a browser send the cookie, but can neither
/// read the token nor forge the Origin header.
async fn check_forgery(request: Request, principal: &Principal) -> Result<Request, ApiError> {
    let refused = |why: &str| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf",
            format!("{why}: reload the page and try again"),
        )
    };
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let own = [format!("http://{host}"), format!("https://{host}")];
    if host.is_empty() || !own.iter().any(|o| o == origin) {
        return Err(refused(&format!(
            "a change must come from the dashboard's own pages (origin {origin:?} is not {:?})",
            own[0]
        )));
    }
    let expected = principal.csrf.as_deref().unwrap_or_default();
    if let Some(sent) = headers.get("x-csrf-token").and_then(|v| v.to_str().ok()) {
        return if !expected.is_empty() && same_secret(sent, expected) {
            Ok(request)
        } else {
            Err(refused("the CSRF token is not this session's"))
        };
    }
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err(refused("the change carries no CSRF token"));
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, crate::extract::MAX_BODY)
        .await
        .map_err(|e| {
            // the limit's error says so in its chain; anything else is a body that broke off
            let over = std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
                .any(|e| e.to_string().contains("length limit"));
            if over {
                crate::extract::too_large()
            } else {
                ApiError::bad_request(format!("cannot read the form: {e}"))
            }
        })?;
    let sent = form_field(&bytes, "csrf");
    match sent {
        Some(sent) if !expected.is_empty() && same_secret(&sent, expected) => {
            Ok(Request::from_parts(parts, Body::from(bytes)))
        }
        Some(_) => Err(refused("the CSRF token is not this session's")),
        None => Err(refused("the form carries no CSRF token")),
    }
}

/// The value of field `name` in a URL-encoded form.
fn form_field(body: &[u8], name: &str) -> Option<String> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abcdef", "abcdef"));
        assert!(!same_secret("abcdef", "abcdeg"));
        assert!(!same_secret("abcdef", "abcde"));
    }

    #[test]
    fn short_tokens_are_refused_with_advice() {
        let e = Token::new("ops", "short").expect_err("refused");
        assert!(e.contains("at least 16"), "{e}");
        assert!(Token::new("ops", "x".repeat(16)).is_ok());
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("a=1; {COOKIE}=xyz; b=2").parse().expect("header"),
        );
        assert_eq!(session_cookie(&headers), Some("xyz"));
    }

    #[test]
    fn the_cookie_is_secure_when_the_page_came_over_tls() {
        let with = |name: &'static str, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(name, value.parse().expect("header"));
            h
        };
        assert!(over_tls(&with("x-forwarded-proto", "https")));
        assert!(over_tls(&with("forwarded", "for=1.2.3.4;proto=https")));
        assert!(over_tls(&with("origin", "https://jobs.example.com")));
        assert!(!over_tls(&with("origin", "http://127.0.0.1:8080")));
        assert!(!over_tls(&HeaderMap::new()));
        assert!(cookie_header(Some("x"), true).ends_with("; Secure"));
        assert!(!cookie_header(Some("x"), false).contains("Secure"));
    }

    #[test]
    fn a_form_field_is_read() {
        assert_eq!(
            form_field(b"a=1&csrf=t%2Bk", "csrf").as_deref(),
            Some("t+k")
        );
        assert_eq!(form_field(b"a=1", "csrf"), None);
    }
}
