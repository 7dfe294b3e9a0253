//! Every refusal of the dashboard's security: no token, a wrong token, read-only mode, a
//! session's change without its CSRF token or from another origin, a browser's cross-site
//! change in every mode, a host name nobody allowed (DNS rebinding), an oversized body,
//! binding without a token.

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
        let expected = if why == "another origin" {
            "cross_origin"
        } else {
            "csrf"
        };
        assert_eq!(code(&body), expected, "{why}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_authentication_a_cross_site_change_is_refused_and_a_script_is_not() {
    let s = serve(|d| d.no_auth()).await;
    let job = remuda::NewJob::new("k", &json!({})).expect("job");
    let id = s.client.insert(job).await.expect("enqueued");
    let attempt = |path: String, headers: &[(&'static str, &'static str)]| {
        let mut request = s.http.post(format!("{}{path}", s.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    let cross_site: [&[(&str, &str)]; 3] = [
        &[("sec-fetch-site", "cross-site")],
        &[("sec-fetch-site", "same-site")],
        &[("origin", "http://evil.example")],
    ];
    for headers in cross_site {
        for path in [
            format!("/api/v1/jobs/{id}/cancel"),
            "/api/v1/queues/q/pause".to_string(),
            "/jobs/bulk".to_string(),
        ] {
            let response = attempt(path.clone(), headers).await.expect("request");
            assert_eq!(response.status().as_u16(), 403, "{path} {headers:?}");
            let text = response.text().await.expect("body");
            assert!(text.contains("another"), "{path}: {text}");
        }
    }
    assert_eq!(
        s.client.job(id).await.expect("job").expect("exists").state,
        remuda::JobState::Available,
        "no cross-site request cancelled the job"
    );
    assert!(!s.client.queue("q").await.expect("queue").paused);
    let own = s.base.clone();
    let same = attempt(
        "/api/v1/queues/q/pause".into(),
        &[("sec-fetch-site", "same-origin")],
    )
    .await
    .expect("request");
    assert_eq!(same.status().as_u16(), 200, "the dashboard's own page");
    let response = s
        .http
        .post(format!("{}/api/v1/jobs/{id}/cancel", s.base))
        .header("origin", own)
        .send()
        .await
        .expect("request");
    assert_eq!(
        response.status().as_u16(),
        200,
        "an origin that is the host"
    );
    let script = attempt("/api/v1/queues/q/resume".into(), &[])
        .await
        .expect("request");
    assert_eq!(
        script.status().as_u16(),
        200,
        "a request with neither header: a script's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_nobody_allowed_is_refused_so_a_rebound_name_reads_nothing() {
    let open = serve(|d| d.no_auth().allowed_host("jobs.example.com")).await;
    let port = open.base.rsplit(':').next().expect("port").to_string();
    let read = |host: String| {
        open.http
            .get(format!("{}/api/v1/jobs", open.base))
            .header("host", host)
            .send()
    };
    for host in [
        format!("rebound.evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
    ] {
        let response = read(host.clone()).await.expect("request");
        assert_eq!(response.status().as_u16(), 421, "{host}");
        let body: serde_json::Value = response.json().await.expect("json");
        assert_eq!(code(&body), "host_not_allowed");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("--allowed-host"), "{message}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("jobs.example.com:{port}"),
    ] {
        let response = read(host.clone()).await.expect("request");
        assert_eq!(response.status().as_u16(), 200, "{host}");
    }
    let page = open
        .http
        .get(format!("{}/jobs", open.base))
        .header("host", "rebound.evil.example")
        .send()
        .await
        .expect("request");
    assert_eq!(page.status().as_u16(), 421, "pages too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_refused_with_413_naming_the_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = serve(|d| d).await;
    // the body is announced and held back until the server answers (Expect: 100-continue):
    // a server that refuses it answers at once, and no write races the answer
    let address = s.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    let head = format!(
        "POST /api/v1/jobs HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\
         Connection: close\r\n\r\n",
        3 << 20
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let mut answer = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_string(&mut answer),
    )
    .await
    .expect("an answer before the body")
    .expect("read");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let body: serde_json::Value = answer
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or_else(|| panic!("a JSON error: {answer}"));
    assert_eq!(code(&body), "too_large", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&remuda_dashboard::MAX_BODY.to_string()),
        "{message}"
    );
    let (_, page) = s.get("/api/v1/jobs").await;
    assert_eq!(page["jobs"], json!([]), "nothing was enqueued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_is_secure_when_the_page_came_over_tls() {
    let s = serve(|d| d).await;
    let login = |proto: Option<&'static str>| {
        let mut request = s
            .http
            .post(format!("{}/login", s.base))
            .form(&[("token", TOKEN)]);
        if let Some(proto) = proto {
            request = request.header("x-forwarded-proto", proto);
        }
        request.send()
    };
    let cookie = |response: &reqwest::Response| {
        response
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let tls = login(Some("https")).await.expect("login");
    assert!(cookie(&tls).contains("; Secure"), "{}", cookie(&tls));
    let plain = login(None).await.expect("login");
    assert!(!cookie(&plain).contains("Secure"), "{}", cookie(&plain));
}
