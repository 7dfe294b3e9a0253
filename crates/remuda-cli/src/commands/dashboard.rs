//! `remuda dashboard`: serves the pages and the JSON API until SIGINT or SIGTERM.

use crate::args::{DashboardArgs, DbArgs};
use crate::connect;
use crate::error::{CliError, CliResult};
use remuda_dashboard::{check_bind, Dashboard, Token};

pub async fn run(db: &DbArgs, args: DashboardArgs) -> CliResult<u8> {
    let token = match (&args.token, args.no_auth) {
        (Some(secret), _) => Some(Token::new(&args.token_name, secret).map_err(CliError::Usage)?),
        (None, true) => None,
        (None, false) if !args.bind.ip().is_loopback() => {
            return Err(CliError::Usage(format!(
                "refusing to serve the dashboard on {}, which is not a loopback address, without a token of your own: give --token (or REMUDA_DASHBOARD_TOKEN)",
                args.bind
            )))
        }
        (None, false) => Some(
            Token::random(&args.token_name)
                .map_err(|e| CliError::Usage(format!("cannot make up a token: {e}")))?,
        ),
    };
    let client = connect::client(db).await?;
    let mut dashboard = Dashboard::new(client);
    // the API's writes as spans, when spans are exported (the `OTEL_*` environment)
    let spans = remuda::telemetry::SpanSender::start(&Default::default());
    if let Some(spans) = &spans {
        dashboard = dashboard.spans(spans.clone());
    }
    let made_up = args.token.is_none();
    if let Some(token) = &token {
        dashboard = dashboard.token(token.clone());
    }
    if args.no_auth {
        dashboard = dashboard.no_auth();
    }
    if args.read_only {
        dashboard = dashboard.read_only();
    }
    for host in &args.allowed_hosts {
        if host.trim_matches('.').is_empty() || host.contains(['/', ':', ' ', '*', '[']) {
            return Err(CliError::Usage(format!(
                "--allowed-host {host:?} is not a host name: give a name such as jobs.example.com, or .example.com for every name under it (no *, scheme or port)"
            )));
        }
        dashboard = dashboard.allowed_host(host);
    }
    check_bind(args.bind, dashboard.access()).map_err(CliError::Usage)?;
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {}: {e}", args.bind)))?;
    let address = listener.local_addr().unwrap_or(args.bind);
    eprintln!("remuda dashboard on http://{address}/ (API under /api/v1)");
    match &token {
        Some(token) if made_up => eprintln!(
            "token (made up for this run; give --token to choose one): {}",
            token.secret()
        ),
        Some(token) => eprintln!("token: the one given, named {:?}", token.name()),
        None => eprintln!(
            "WARNING: --no-auth: anybody who can reach {address} can see and change every job"
        ),
    }
    if args.read_only {
        eprintln!("read-only: every change is refused");
    }
    axum::serve(listener, dashboard.router())
        .with_graceful_shutdown(stopped())
        .await
        .map_err(|e| CliError::Usage(format!("the dashboard stopped: {e}")))?;
    if let Some(spans) = spans {
        spans.finish(std::time::Duration::from_secs(2)).await;
    }
    Ok(0)
}

/// Resolves on SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
