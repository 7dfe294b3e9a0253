//! The pages, as a logged-in browser sees them: each one answers with its content, forms
//! carry the session's CSRF token and do what they say, values are escaped, and read-only
//! mode disables and refuses every change.

mod common;

use common::{serve, Served, TOKEN};
use serde_json::json;

/// A logged-in session: its cookie and CSRF token.
struct Session {
    cookie: String,
    csrf: String,
}

async fn log_in(s: &Served) -> Session {
    let response = s
        .http
        .post(format!("{}/login", s.base))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .expect("login");
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("cookie")
        .to_string();
    let page = page(s, &cookie, "/").await.1;
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).expect("csrf field") + marker.len();
    let csrf = page[start..].split('"').next().expect("value").to_string();
    Session { cookie, csrf }
}

async fn page(s: &Served, cookie: &str, path: &str) -> (u16, String) {
    let response = s
        .http
        .get(format!("{}{path}", s.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("page");
    (
        response.status().as_u16(),
        response.text().await.expect("html"),
    )
}

/// Posts a form from the dashboard's origin; returns the status and where it sends back to.
async fn submit(
    s: &Served,
    session: &Session,
    path: &str,
    fields: &[(&str, &str)],
) -> (u16, String) {
    let mut form: Vec<(&str, &str)> = vec![("csrf", &session.csrf)];
    form.extend_from_slice(fields);
    let response = s
        .http
        .post(format!("{}{path}", s.base))
        .header("cookie", &session.cookie)
        .header("origin", &s.base)
        .form(&form)
        .send()
        .await
        .expect("submit");
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (response.status().as_u16(), location)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_answers_with_its_content() {
    let s = serve(|d| d).await;
    let (_, job) = s
        .post(
            "/api/v1/jobs",
            json!({"kind": "resize", "queue": "media", "args": {"w": 640}}),
        )
        .await;
    let id = job["id"].as_i64().expect("id");
    let spec = json!({"name": "etl", "nodes": {"extract": {"kind": "extract"}, "load": {"kind": "load", "waits_for": ["extract"]}}});
    let (_, run) = s.post("/api/v1/workflows", json!({"spec": spec})).await;
    let run = run["id"].as_i64().expect("run");
    // what workers reported for the last minutes: 7 completed and 3 failed, run mostly
    // within 10 to 25 ms
    let conn = s.client.database().conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.queue_minutes (queue, minute, completed, failed, retried, wait, run)
         VALUES ('media', date_trunc('minute', now()) - interval '2 minutes', 7, 3, 1,
                 '{10,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}', '{0,0,0,0,10,0,0,0,0,0,0,0,0,0,0,0,0}')",
    )
    .await
    .expect("activity");
    let session = log_in(&s).await;
    for (path, expected) in [
        ("/".to_string(), "<tr data-queue=\"media\">".to_string()),
        (
            "/".to_string(),
            "data-field=\"failure_rate\">30.0%".to_string(),
        ),
        ("/".to_string(), "18 ms".to_string()),
        ("/".to_string(), "<td class=\"num\">0.17</td>".to_string()),
        (
            "/".to_string(),
            "7 completed, 3 failed, 1 retried</title>".to_string(),
        ),
        ("/jobs?queue=media".into(), format!("data-id=\"{id}\"")),
        (format!("/jobs/{id}"), "&quot;w&quot;: 640".into()),
        ("/queues".into(), "max running".into()),
        ("/workers".into(), "No worker is registered.".into()),
        ("/workflows".into(), format!("data-id=\"{run}\"")),
        (format!("/workflows/{run}"), "data-node=\"load\"".into()),
        ("/schedules".into(), "No schedules.".into()),
        ("/notifications".into(), "No notifications.".into()),
        ("/audit".into(), "job.enqueue".into()),
        ("/maintenance".into(), "Duty".into()),
    ] {
        let (status, html) = page(&s, &session.cookie, &path).await;
        assert_eq!(status, 200, "{path}");
        assert!(html.contains(&expected), "{path} shows {expected}");
        assert!(html.contains("assets/remuda.js"), "{path} loads the script");
        assert!(!html.contains("<script>"), "{path} has no inline script");
    }
    let (status, html) = page(&s, &session.cookie, "/jobs/99999999").await;
    assert_eq!(status, 404);
    assert!(
        html.contains("no job with id 99999999"),
        "an error is a page: {html}"
    );
    let (status, html) = page(&s, &session.cookie, "/jobs?state=nope").await;
    assert_eq!(status, 200);
    assert!(html.contains("unknown job state"), "{html}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_graph_draws_every_node_and_edge() {
    let s = serve(|d| d).await;
    let spec = json!({"name": "fan", "nodes": {
        "a": {"kind": "k"}, "b": {"kind": "k", "waits_for": ["a"]},
        "c": {"kind": "k", "waits_for": ["a"]}, "d": {"kind": "k", "waits_for": ["b", "c"]}}});
    let (_, run) = s.post("/api/v1/workflows", json!({"spec": spec})).await;
    let run = run["id"].as_i64().expect("run");
    let session = log_in(&s).await;
    let (_, html) = page(&s, &session.cookie, &format!("/workflows/{run}")).await;
    let svg = &html[html.find("<svg").expect("svg")..html.find("</svg>").expect("end")];
    for node in ["a", "b", "c", "d"] {
        assert!(
            svg.contains(&format!("data-node=\"{node}\"")),
            "node {node}"
        );
    }
    assert_eq!(
        svg.matches("class=\"edge\"").count(),
        4,
        "a→b, a→c, b→d, c→d"
    );
    assert!(
        svg.contains("marker-end=\"url(#arrow)\""),
        "edges point at the waiting node"
    );
    assert!(
        svg.contains("../jobs/"),
        "the started node links to its job"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_retry_cancel_delete_and_pause_with_the_sessions_token() {
    let s = serve(|d| d).await;
    let (_, a) = s.post("/api/v1/jobs", json!({"kind": "k"})).await;
    let a = a["id"].as_i64().expect("id");
    s.set_state(a, "failed").await;
    let session = log_in(&s).await;
    let (status, location) = submit(&s, &session, &format!("/jobs/{a}/retry"), &[]).await;
    assert_eq!(status, 303);
    assert!(location.contains("notice="), "{location}");
    assert_eq!(
        s.client.job(a).await.expect("job").expect("exists").state,
        remuda::JobState::Available
    );
    let (_, location) = submit(&s, &session, &format!("/jobs/{a}/retry"), &[]).await;
    assert!(
        location.contains("error="),
        "a refused retry says why: {location}"
    );
    let from = reqwest::Url::parse(&format!("{}/jobs/{a}/retry", s.base)).expect("url");
    let back = from.join(&location).expect("relative location");
    let path = format!("{}?{}", back.path(), back.query().unwrap_or_default());
    let (_, html) = page(&s, &session.cookie, &path).await;
    assert!(html.contains("cannot retry"), "{html}");
    submit(&s, &session, &format!("/jobs/{a}/cancel"), &[]).await;
    assert_eq!(
        s.client.job(a).await.expect("job").expect("exists").state,
        remuda::JobState::Cancelled
    );
    submit(&s, &session, &format!("/jobs/{a}/delete"), &[]).await;
    assert!(s.client.job(a).await.expect("job").is_none());
    submit(&s, &session, "/queues/mail/pause", &[]).await;
    assert!(s.client.queue("mail").await.expect("queue").paused);
    let (_, location) = submit(
        &s,
        &session,
        "/queues/mail/limits",
        &[
            ("max_running", "7"),
            ("rate", "50/1s"),
            ("rate_per", "queue"),
            ("rate_burst", "5"),
        ],
    )
    .await;
    assert!(location.contains("notice="), "{location}");
    let settings = s.client.queue("mail").await.expect("queue");
    assert_eq!(settings.max_running, Some(7));
    assert_eq!(settings.rate_burst, Some(5));
    let (_, html) = page(&s, &session.cookie, "/queues").await;
    assert!(html.contains("name=\"rate_burst\" value=\"5\""), "{html}");
    // fair share from the same form, and the fair queue's groups listed below it
    submit(
        &s,
        &session,
        "/queues/mail/limits",
        &[("max_running", "7"), ("fairness", "group")],
    )
    .await;
    assert_eq!(
        s.client.queue("mail").await.expect("queue").fairness,
        remuda::Fairness::Group
    );
    s.client
        .insert(
            remuda::NewJob::from_json("send", remuda::Jsonb("{}".into()))
                .queue("mail")
                .group("acme"),
        )
        .await
        .expect("enqueue");
    let (_, html) = page(&s, &session.cookie, "/queues").await;
    assert!(
        html.contains("Groups of mail") && html.contains("<td>acme</td>"),
        "{html}"
    );
    let (_, location) = submit(
        &s,
        &session,
        "/queues/mail/limits",
        &[("max_running", "lots")],
    )
    .await;
    assert!(
        location.contains("error=") && location.contains("whole%20number"),
        "{location}"
    );
    let (_, log) = s.get("/api/v1/audit").await;
    assert_eq!(log[0]["via"], "page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bulk_form_acts_on_every_job_matching_the_filter() {
    let s = serve(|d| d).await;
    for i in 0..30 {
        s.post(
            "/api/v1/jobs",
            json!({"kind": "k", "queue": if i % 2 == 0 { "even" } else { "odd" }}),
        )
        .await;
    }
    let session = log_in(&s).await;
    let (status, location) = submit(
        &s,
        &session,
        "/jobs/bulk",
        &[("action", "cancel"), ("queue", "even")],
    )
    .await;
    assert_eq!(status, 303);
    assert!(location.contains("15%20of%2015"), "{location}");
    let stats = s.client.queue_stats().await.expect("stats");
    let even = stats.iter().find(|q| q.queue == "even").expect("even");
    let odd = stats.iter().find(|q| q.queue == "odd").expect("odd");
    assert_eq!(
        (
            even.count(remuda::JobState::Cancelled),
            odd.count(remuda::JobState::Available)
        ),
        (15, 15)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_without_the_sessions_token_changes_nothing() {
    let s = serve(|d| d).await;
    let session = log_in(&s).await;
    let forged = Session {
        cookie: session.cookie.clone(),
        csrf: "forged".into(),
    };
    let (status, _) = submit(&s, &forged, "/queues/mail/pause", &[]).await;
    assert_eq!(status, 403);
    assert!(!s.client.queue("mail").await.expect("queue").paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_from_jobs_are_escaped_in_pages() {
    let s = serve(|d| d).await;
    let (_, job) = s.post("/api/v1/jobs", json!({"kind": "<script>alert(1)</script>", "args": {"x": "<img src=x onerror=alert(2)>"}})).await;
    let id = job["id"].as_i64().expect("id");
    let session = log_in(&s).await;
    for path in ["/jobs".to_string(), format!("/jobs/{id}")] {
        let (_, html) = page(&s, &session.cookie, &path).await;
        assert!(!html.contains("<script>alert"), "{path}");
        assert!(!html.contains("<img src=x"), "{path}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_pages_disable_their_buttons_and_the_server_refuses_the_forms() {
    let s = serve(|d| d.read_only()).await;
    let session = log_in(&s).await;
    let (_, html) = page(&s, &session.cookie, "/queues").await;
    assert!(html.contains("read-only"));
    let (status, _) = submit(&s, &session, "/queues/mail/pause", &[]).await;
    assert_eq!(status, 403);
    assert!(!s.client.queue("mail").await.expect("queue").paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_out_ends_the_session() {
    let s = serve(|d| d).await;
    let session = log_in(&s).await;
    let (status, location) = submit(&s, &session, "/logout", &[]).await;
    assert_eq!((status, location.as_str()), (303, "./login"));
    let (status, _) = page(&s, &session.cookie, "/api/v1/queues").await;
    assert_eq!(status, 401, "the cookie opens nothing any more");
}

/// Splits its run's work into three elements.
struct Split;

impl remuda::Task for Split {
    const KIND: &'static str = "split";
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    async fn run(
        &self,
        _ctx: remuda::JobContext,
        _args: serde_json::Value,
    ) -> Result<serde_json::Value, remuda::TaskError> {
        Ok(json!({"items": [1, 2, 3]}))
    }
}

/// Does one element.
struct Each;

impl remuda::Task for Each {
    const KIND: &'static str = "each";
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    async fn run(
        &self,
        _ctx: remuda::JobContext,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, remuda::TaskError> {
        Ok(args)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_page_links_its_map_elements_by_state_and_offers_only_the_actions_its_state_takes() {
    let s = serve(|d| d).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let config = remuda::WorkerConfig {
        poll_interval: std::time::Duration::from_millis(100),
        ..remuda::WorkerConfig::default()
    };
    let worker = remuda::Worker::new(s.client.clone())
        .config(config)
        .register(Split)
        .register(Each);
    let shutdown = stop.clone();
    let running = tokio::spawn(worker.run(async move { shutdown.cancelled().await }));
    let spec = json!({"name": "mapped", "nodes": {
        "split": {"kind": "split"},
        "each": {"kind": "each", "map": {"over": "split", "pointer": "/items"}},
        "child": {"workflow": {"name": "inner", "nodes": {"in": {"kind": "each"}}},
                  "waits_for": ["each"]}}});
    let (_, run) = s.post("/api/v1/workflows", json!({"spec": spec})).await;
    let run = run["id"].as_i64().expect("run");
    s.client
        .wait_workflow(run, std::time::Duration::from_secs(30))
        .await
        .expect("the run ends");
    stop.cancel();
    let _ = running.await;
    let session = log_in(&s).await;
    let (_, html) = page(&s, &session.cookie, &format!("/workflows/{run}")).await;
    assert!(
        html.contains(&format!(
            "jobs?workflow={run}&amp;state=completed\">3 completed</a>"
        )),
        "the map's elements, counted and linked: {html}"
    );
    assert!(
        html.contains(&format!("jobs?workflow={run}\">its jobs</a>")),
        "{html}"
    );
    for live in ["Pause", "Resume", "Cancel", "Retry failed"] {
        assert!(
            !html.contains(&format!(">{live}</button>")),
            "a completed run takes no {live}"
        );
    }
    let (_, listed) = page(&s, &session.cookie, &format!("/jobs?workflow={run}")).await;
    assert_eq!(
        listed.matches("<tr data-id=").count(),
        4,
        "split and three elements (the child node's job is its own run's)"
    );
    assert!(
        listed.contains(&format!("run {run}, node each[2]")),
        "{listed}"
    );
    let (_, runs) = page(&s, &session.cookie, "/workflows").await;
    assert!(
        runs.contains(&format!(
            "sub-workflow of <a href=\"./workflows/{run}\">run {run}</a>"
        )),
        "{runs}"
    );

    let stopped = json!({"name": "stopped", "nodes": {"a": {"kind": "nobody"}}});
    let (_, other) = s.post("/api/v1/workflows", json!({"spec": stopped})).await;
    let other = other["id"].as_i64().expect("run");
    let (_, html) = page(&s, &session.cookie, &format!("/workflows/{other}")).await;
    assert!(html.contains(">Pause</button>") && html.contains(">Cancel</button>"));
    assert!(!html.contains(">Resume</button>") && !html.contains(">Retry failed</button>"));
    s.client.cancel_workflow(other).await.expect("cancel");
    let (_, html) = page(&s, &session.cookie, &format!("/workflows/{other}")).await;
    assert!(html.contains(">Retry failed</button>"), "{html}");
    assert!(!html.contains(">Pause</button>") && !html.contains(">Cancel</button>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedules_next_run_is_shown_on_its_zones_clock_too_and_every_attempt_starts_in_the_timeline(
) {
    let s = serve(|d| d).await;
    let schedule =
        remuda::schedule::Schedule::new("nightly", "report", "0 3 * * *".parse().expect("cron"))
            .zone("Europe/Berlin".parse().expect("zone"));
    s.client.set_schedule(&schedule).await.expect("declared");
    let session = log_in(&s).await;
    let (_, html) = page(&s, &session.cookie, "/schedules").await;
    let zoned = [
        "03:00:00 CET (Europe/Berlin)",
        "03:00:00 CEST (Europe/Berlin)",
    ];
    assert!(zoned.iter().any(|z| html.contains(z)), "{html}");

    let job = remuda::NewJob::new("k", &json!({})).expect("job");
    let id = s.client.insert(job).await.expect("enqueued");
    let conn = s.client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'completed', attempt = 2, started_at = now(), finished_at = now(),
                worker_id = 'w-1-x',
                errors = jsonb_build_array(jsonb_build_object('attempt', 1,
                    'started_at', now() - interval '1 minute', 'at', now() - interval '50 seconds',
                    'code', 'BOOM', 'message', 'no', 'worker', 'w-1-x'))
         WHERE id = $1",
        &[&id],
    )
    .await
    .expect("two attempts");
    let (_, html) = page(&s, &session.cookie, &format!("/jobs/{id}")).await;
    let timeline = &html[html.find("id=\"timeline\"").expect("timeline")..];
    assert!(
        timeline.contains("attempt 1 started on w-1-x"),
        "{timeline}"
    );
    assert!(timeline.contains("attempt 2 started on"), "{timeline}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_group_and_a_schedules_group_are_shown() {
    let s = serve(|d| d).await;
    let spec = json!({"name": "tenant", "nodes": {"a": {"kind": "nobody"}}});
    let (_, run) = s
        .post(
            "/api/v1/workflows",
            json!({"spec": spec, "group": "acme<1>"}),
        )
        .await;
    let id = run["id"].as_i64().expect("run");
    let schedule =
        remuda::schedule::Schedule::new("nightly", "report", "0 3 * * *".parse().expect("cron"))
            .group("globex");
    s.client.set_schedule(&schedule).await.expect("declared");
    let session = log_in(&s).await;
    let (_, html) = page(&s, &session.cookie, &format!("/workflows/{id}")).await;
    assert!(html.contains(" · group acme&lt;1&gt; · "), "{html}");
    let (_, html) = page(&s, &session.cookie, "/schedules").await;
    assert!(html.contains("· group globex</span>"), "{html}");
}
