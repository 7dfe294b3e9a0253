//! Every refusal of the dashboard's security: no token, a wrong token, read-only mode, a
//! session's change without its CSRF token or from another origin, binding without a token.

mod common;

use common::{code, serve, TOKEN};
use remuda_dashboard::{check_bind, Access, Token};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_needs_a_valid_bearer_token_and_the_health_check_does_not() {
    let s = serve(|d| d).await;
    let url = |path: &str| format!("{}{path}", s.base);
    let health = s.http.get(url("/healthz")).send().await.expect("request");
    assert_eq!(health.status().as_u16(), 200);
    for (token, expected) in [
        (None, 401),
        (Some("wrong-token-0123456789"), 401),
        (Some(TOKEN), 200),
    ] {
        let mut request = s.http.get(url("/api/v1/queues"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status().as_u16(), expected, "{token:?}");
        if expected == 401 {
            let body: serde_json::Value = response.json().await.expect("json");
            assert_eq!(code(&body), "unauthorized");
        }
    }
    let page = s.http.get(url("/")).send().await.expect("request");
    assert_eq!(
        page.status().as_u16(),
        303,
        "a page without a session goes to the login"
    );
    assert_eq!(
        page.headers().get("location").and_then(|v| v.to_str().ok()),
        Some("./login")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_refuses_every_change_on_the_server() {
    let s = serve(|d| d.read_only()).await;
    let (status, _) = s.get("/api/v1/jobs").await;
    assert_eq!(status, 200);
    for (method, path) in [
        ("POST", "/api/v1/jobs"),
        ("POST", "/api/v1/jobs/1/retry"),
        ("POST", "/api/v1/jobs/1/cancel"),
        ("DELETE", "/api/v1/jobs/1"),
        ("POST", "/api/v1/jobs/bulk/delete"),
        ("POST", "/api/v1/queues/q/pause"),
        ("PATCH", "/api/v1/queues/q"),
        ("POST", "/api/v1/workflows"),
        ("POST", "/api/v1/schedules/s/trigger"),
    ] {
        let (status, body) = s.call(method, path, Some(json!({"kind": "k"}))).await;
        assert_eq!((status, code(&body)), (403, "read_only"), "{method} {path}");
    }
    let (_, page) = s.get("/api/v1/jobs").await;
    assert_eq!(page["jobs"], json!([]), "nothing was enqueued");
}

/// Logs in with the token; returns the session cookie.
async fn log_in(s: &common::Served) -> String {
    let response = s
        .http
        .post(format!("{}/login", s.base))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .expect("login");
    assert_eq!(response.status().as_u16(), 303);
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a cookie")
        .to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    cookie.split(';').next().expect("pair").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_change_needs_its_csrf_token_and_the_dashboards_origin() {
    let s = serve(|d| d).await;
    let wrong = s
        .http
        .post(format!("{}/login", s.base))
        .form(&[("token", "not-the-token-at-all")])
        .send()
        .await
        .expect("login");
    assert_eq!(wrong.status().as_u16(), 401);
    let cookie = log_in(&s).await;
    let read = s
        .http
        .get(format!("{}/api/v1/queues", s.base))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("read");
    assert_eq!(read.status().as_u16(), 200, "a session reads the API");
    let origin = s.base.clone();
    let pause = |csrf: Option<&str>, origin: Option<&str>| {
        let mut request = s
            .http
            .post(format!("{}/api/v1/queues/q/pause", s.base))
            .header("cookie", &cookie);
        if let Some(csrf) = csrf {
            request = request.header("x-csrf-token", csrf);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    for (csrf, from, why) in [
        (None, Some(origin.as_str()), "no CSRF token"),
        (Some("forged"), Some(origin.as_str()), "a forged token"),
        (None, Some("http://evil.example"), "another origin"),
        (None, None, "no origin"),
    ] {
        let response = pause(csrf, from).await.expect("request");
        assert_eq!(response.status().as_u16(), 403, "{why}");
        let body: serde_json::Value = response.json().await.expect("json");
        assert_eq!(code(&body), "csrf", "{why}");
    }
    let settings = s.client.queue("q").await.expect("queue");
    assert!(!settings.paused, "no refused request paused the queue");
    let csrf = session_csrf(&s, &cookie).await;
    let response = pause(Some(&csrf), Some(&origin)).await.expect("request");
    assert_eq!(response.status().as_u16(), 200);
    assert!(s.client.queue("q").await.expect("queue").paused);
    let (_, log) = s.get("/api/v1/audit").await;
    assert_eq!(
        (log[0]["actor"].as_str(), log[0]["via"].as_str()),
        (Some("ops"), Some("page"))
    );
}

/// The CSRF token a page of the session carries (in the logout form).
async fn session_csrf(s: &common::Served, cookie: &str) -> String {
    let page = s
        .http
        .get(format!("{}/", s.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).expect("a CSRF field") + marker.len();
    page[start..].split('"').next().expect("value").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_a_strict_content_security_policy() {
    let s = serve(|d| d).await;
    for path in ["/healthz", "/login", "/api/v1/queues"] {
        let response = s
            .http
            .get(format!("{}{path}", s.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("request");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        assert!(
            header("content-security-policy").contains("script-src 'self'"),
            "{path}"
        );
        assert!(
            !header("content-security-policy").contains("unsafe-inline"),
            "{path}"
        );
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
    }
}

#[test]
fn serving_beyond_the_loopback_without_authentication_is_refused() {
    let open = Access {
        no_auth: true,
        ..Access::default()
    };
    let e = check_bind("0.0.0.0:8080".parse().expect("address"), &open).expect_err("refused");
    assert!(e.contains("not a loopback address"), "{e}");
    assert!(check_bind("127.0.0.1:8080".parse().expect("address"), &open).is_ok());
    let none = Access::default();
    assert!(check_bind("127.0.0.1:8080".parse().expect("address"), &none).is_err());
    let with_token = Access {
        tokens: vec![Token::new("ops", TOKEN).expect("token")],
        ..Access::default()
    };
    assert!(check_bind("0.0.0.0:8080".parse().expect("address"), &with_token).is_ok());
}
