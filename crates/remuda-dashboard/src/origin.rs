//! Where a request may come from, checked before anything else in every mode (with or
//! without authentication):
//!
//! - **Host.** A request must name the dashboard by an IP address, a loopback name
//!   (`localhost`, `*.localhost`) or a host it was told of ([`crate::Dashboard::allowed_host`],
//!   `--allowed-host`). DNS rebinding points a name of the attacker's at 127.0.0.1, so that a
//!   page of theirs could read the dashboard as its own origin; its requests carry the
//!   attacker's name in `Host`, which is refused with 421. An IP address cannot be rebound.
//! - **Cross-site changes.** As Go's cross-origin protection does: a request that changes
//!   something (any method but GET, HEAD, OPTIONS) is refused with 403 when its
//!   `Sec-Fetch-Site` says it came from another site, or, from a browser that sends no
//!   `Sec-Fetch-Site`, when its `Origin` is not the host it was sent to. A request with neither
//!   header is not a browser's (curl, the SDKs) and goes on to be authenticated.

use crate::error::ApiError;
use crate::State;
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Refuses a request for another host, or a change sent by another site.
pub(crate) async fn guard(
    axum::extract::State(state): axum::extract::State<State>,
    request: Request,
    next: Next,
) -> Response {
    let host = match request_host(&request) {
        Ok(host) => host,
        Err(()) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_host",
                "the Host header is not readable text: send the host name or address the dashboard is reached at",
            )
            .into_response()
        }
    };
    if let Some(host) = &host {
        if !host_allowed(host, &state.config.allowed_hosts) {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                format!(
                    "this dashboard does not answer to the host {:?}: open it by its IP address or localhost, or start it with --allowed-host {} (Dashboard::allowed_host in a program)",
                    host,
                    host_name(host)
                ),
            )
            .into_response();
        }
    }
    let changes = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes {
        if let Err(why) = same_origin(request.headers(), host.as_deref()) {
            return ApiError::new(StatusCode::FORBIDDEN, "cross_origin", why).into_response();
        }
    }
    next.run(request).await
}

/// The `host[:port]` the request was sent to: HTTP/2's authority, else the `Host` header
/// (`None` without either, as HTTP/1.0 allows; an error when it is not text).
fn request_host(request: &Request) -> Result<Option<String>, ()> {
    if let Some(authority) = request.uri().authority() {
        return Ok(Some(authority.as_str().to_ascii_lowercase()));
    }
    match request.headers().get(header::HOST) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|v| Some(v.to_ascii_lowercase()))
            .map_err(|_| ()),
    }
}

/// The name in `host[:port]` (an IPv6 address keeps no brackets), without a trailing dot.
/// A bracketed address followed by anything but a port gives no name.
fn host_name(host: &str) -> &str {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((address, "")) => address,
            Some((address, port))
                if port.len() > 1
                    && port.starts_with(':')
                    && port[1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                address
            }
            _ => "",
        }
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
    };
    name.strip_suffix('.').unwrap_or(name)
}

/// Whether `host` is an IP address, a loopback name, or one of `allowed` (an entry starting
/// with a dot allows every name under it).
pub(crate) fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host);
    if name.is_empty() {
        return false;
    }
    if name.parse::<std::net::IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
    {
        return true;
    }
    allowed.iter().any(|a| {
        let a = a.trim_end_matches('.').to_ascii_lowercase();
        match a.strip_prefix('.') {
            Some(domain) => name == domain || name.ends_with(&a),
            None => name == a,
        }
    })
}

/// Refuses a change a browser sent from another site; passes a request that carries
/// neither `Sec-Fetch-Site` nor `Origin`.
fn same_origin(headers: &HeaderMap, host: Option<&str>) -> Result<(), String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return match site {
            "same-origin" | "none" => Ok(()),
            other => Err(format!(
                "a change sent from another site is refused (Sec-Fetch-Site: {other}): use the dashboard's own pages, or the API with a bearer token from a script"
            )),
        };
    }
    let Some(origin) = text(header::ORIGIN.as_str()) else {
        return Ok(());
    };
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .map(str::to_ascii_lowercase);
    match (origin_host, host) {
        (Some(o), Some(h)) if o == h => Ok(()),
        _ => Err(format!(
            "a change sent from another origin is refused (Origin {origin:?}, host {:?}): use the dashboard's own pages, or the API with a bearer token from a script",
            host.unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_loopback_names_are_always_allowed() {
        for host in [
            "127.0.0.1:8080",
            "[::1]:9",
            "10.1.2.3",
            "localhost:3000",
            "app.localhost",
            "localhost.",
        ] {
            assert!(host_allowed(host, &[]), "{host}");
        }
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
        ] {
            assert!(!host_allowed(host, &[]), "{host}");
        }
    }

    #[test]
    fn allowed_hosts_match_whole_names_or_every_name_under_a_dot() {
        let allowed = vec!["Jobs.Example.com".to_string(), ".ops.example".to_string()];
        assert!(host_allowed("jobs.example.com:443", &allowed));
        assert!(host_allowed("a.ops.example", &allowed));
        assert!(host_allowed("ops.example", &allowed));
        assert!(!host_allowed("xjobs.example.com", &allowed));
        assert!(!host_allowed("evilops.example", &allowed));
        assert!(
            !host_allowed("[::1]x", &[String::new()]),
            "an empty entry allows nothing"
        );
    }

    #[test]
    fn cross_site_changes_are_refused_and_header_less_requests_pass() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().expect("header"));
            }
            h
        };
        let host = Some("127.0.0.1:8080");
        assert!(same_origin(&with(&[]), host).is_ok());
        assert!(same_origin(&with(&[("sec-fetch-site", "same-origin")]), host).is_ok());
        assert!(same_origin(&with(&[("sec-fetch-site", "cross-site")]), host).is_err());
        assert!(same_origin(&with(&[("sec-fetch-site", "same-site")]), host).is_err());
        assert!(same_origin(&with(&[("origin", "http://127.0.0.1:8080")]), host).is_ok());
        assert!(same_origin(&with(&[("origin", "http://evil.example")]), host).is_err());
        assert!(same_origin(&with(&[("origin", "null")]), host).is_err());
    }
}
