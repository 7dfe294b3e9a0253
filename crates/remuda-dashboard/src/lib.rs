//! remuda's dashboard and JSON API, as an axum [`Router`] that `remuda dashboard` serves and
//! that any axum application can mount.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use remuda_dashboard::{Dashboard, Token};
//! let client = remuda::Client::connect("postgres://localhost/app").await?;
//! let dashboard = Dashboard::new(client).token(Token::new("ops", "a-long-random-secret")?);
//! let app = axum::Router::new().nest("/remuda", dashboard.router());
//! # let _ = app; Ok(()) }
//! ```
//!
//! The JSON API lives under `/api/v1` (described at `/api/v1/openapi.json`), the health check
//! at `/healthz`. Everything else needs a token: `Authorization: Bearer <token>` for scripts,
//! a session cookie opened at `/login` for people. In every mode, a request must name an IP
//! address, a loopback name or an [allowed host](Dashboard::allowed_host), and a change sent
//! by a browser from another site is refused.

mod actions;
mod api;
pub mod audit;
pub mod auth;
pub mod counts;
pub mod error;
mod extract;
pub mod metrics;
mod origin;
mod pages;
mod server_span;

pub use auth::{Principal, Token, Via};
pub use error::{ApiError, ApiResult};
pub use extract::MAX_BODY;

use axum::Router;
use remuda::Client;
use std::net::SocketAddr;
use std::sync::Arc;

/// Who may use the dashboard and whether it may change anything.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// The tokens that open it; each one's name is what the audit log records.
    pub tokens: Vec<Token>,
    /// Let everybody in, without a token (for local use only).
    pub no_auth: bool,
    /// Refuse every change on the server.
    pub read_only: bool,
    /// Host names it answers to besides IP addresses and loopback names (a leading dot
    /// allows every name under it).
    pub allowed_hosts: Vec<String>,
}

/// A dashboard over one remuda database.
#[derive(Clone, Debug)]
pub struct Dashboard {
    client: Client,
    access: Access,
    spans: Option<remuda::telemetry::SpanSender>,
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct State {
    pub(crate) client: Client,
    pub(crate) config: Arc<Access>,
    pub(crate) sessions: Arc<auth::Sessions>,
    /// The queues' counts, shared by every request.
    pub(crate) counts: Arc<counts::QueueCounts>,
    /// Where the spans of the API's writes go, if anywhere.
    pub(crate) spans: Option<remuda::telemetry::SpanSender>,
}

impl Dashboard {
    /// A dashboard over `client`'s database that nobody can open until given a token (or
    /// [`Dashboard::no_auth`]).
    pub fn new(client: Client) -> Dashboard {
        Dashboard {
            client,
            access: Access::default(),
            spans: None,
        }
    }

    /// Exports a `SERVER` span for each write of the API through `spans`, under the
    /// request's `traceparent` header; the jobs and runs the request makes continue it.
    pub fn spans(mut self, spans: remuda::telemetry::SpanSender) -> Dashboard {
        self.spans = Some(spans);
        self
    }

    /// Adds a token that opens it.
    pub fn token(mut self, token: Token) -> Dashboard {
        self.access.tokens.push(token);
        self
    }

    /// Lets everybody in without a token: only for a dashboard bound to the loopback.
    pub fn no_auth(mut self) -> Dashboard {
        self.access.no_auth = true;
        self
    }

    /// Refuses every change (retry, cancel, delete, enqueue, pause, …) on the server.
    pub fn read_only(mut self) -> Dashboard {
        self.access.read_only = true;
        self
    }

    /// Answers to requests for the host `name` too (or, for `.example.com`, every name under
    /// it). Without it only IP addresses and loopback names are answered, so that a page
    /// whose name was rebound to this address cannot read it.
    pub fn allowed_host(mut self, name: impl Into<String>) -> Dashboard {
        let name = name
            .into()
            .trim()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        self.access.allowed_hosts.push(name);
        self
    }

    /// Who may use it.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// The routes: pages, `/api/v1`, `/healthz`.
    pub fn router(self) -> Router {
        let state = State {
            client: self.client,
            config: Arc::new(self.access),
            sessions: Arc::default(),
            counts: Arc::default(),
            spans: self.spans,
        };
        api::routes(&state)
            .merge(pages::routes())
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                auth::authenticate,
            ))
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                origin::guard,
            ))
            .layer(axum::extract::DefaultBodyLimit::max(extract::MAX_BODY))
            .layer(axum::middleware::from_fn(extract::refuse_oversized))
            .layer(axum::middleware::from_fn(pages::html_errors))
            .layer(axum::middleware::from_fn(pages::secure_headers))
            .with_state(state)
    }
}

/// A router serving `GET /metrics` from `metrics` alone (a worker's `--metrics-bind`).
pub fn metrics_router(metrics: remuda::metrics::Metrics) -> Router {
    Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move { metrics::respond(metrics.encode()) }
        }),
    )
}

/// Refuses to serve at `addr` without authentication anywhere but on the loopback: anybody
/// who can reach the address could change every job.
pub fn check_bind(addr: SocketAddr, access: &Access) -> Result<(), String> {
    if access.no_auth && !addr.ip().is_loopback() {
        return Err(format!(
            "refusing to serve the dashboard without authentication on {addr}, which is not a loopback address: drop --no-auth (a token is then required), or bind to 127.0.0.1"
        ));
    }
    if !access.no_auth && access.tokens.is_empty() {
        return Err("the dashboard has no token: give --token or REMUDA_DASHBOARD_TOKEN".into());
    }
    Ok(())
}
