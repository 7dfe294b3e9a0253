//! The dashboard in a real headless Chromium: log in, see a queue's counts, open a failed
//! job, press retry and see it complete under a real worker, pause and resume a queue, open a
//! workflow's graph; a screenshot of the overview is saved as a test artifact
//! (`$REMUDA_ARTIFACTS`, default `<temp>/remuda-artifacts/dashboard-overview.png`).

mod common;

use common::webdriver::{missing, Browser};
use common::{serve, TOKEN};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Fails while its switch is on.
struct Flaky(Arc<AtomicBool>);

impl remuda::Task for Flaky {
    const KIND: &'static str = "flaky";
    type Args = serde_json::Value;
    type Output = String;

    async fn run(
        &self,
        _ctx: remuda::JobContext,
        _args: serde_json::Value,
    ) -> Result<String, remuda::TaskError> {
        if self.0.load(Ordering::SeqCst) {
            Err(remuda::TaskError::permanent(
                "UPSTREAM_DOWN",
                "the upstream service is down",
            ))
        } else {
            Ok("done".into())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_retries_a_failed_job_pauses_a_queue_and_opens_a_graph_in_a_browser() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED: the browser test cannot run here: {why}");
        return;
    }
    let s = serve(|d| d).await;
    let broken = Arc::new(AtomicBool::new(true));
    let config = remuda::WorkerConfig {
        heartbeat_interval: Duration::from_millis(200),
        poll_interval: Duration::from_millis(200),
        ..remuda::WorkerConfig::default()
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let shutdown = stop.clone();
    let worker = remuda::Worker::new(s.client.clone())
        .config(config)
        .queues(["web"])
        .register(Flaky(broken.clone()));
    let worker = tokio::spawn(worker.run(async move { shutdown.cancelled().await }));
    let (_, job) = s
        .post(
            "/api/v1/jobs",
            json!({"kind": "flaky", "queue": "web", "args": {"order": 7}, "max_attempts": 1}),
        )
        .await;
    let id = job["id"].as_i64().expect("id");
    let failed = s
        .client
        .wait(id, Duration::from_secs(15))
        .await
        .expect("it ends");
    assert_eq!(failed.state, remuda::JobState::Failed);
    broken.store(false, Ordering::SeqCst);
    let spec = json!({"name": "etl", "nodes": {"extract": {"kind": "extract"}, "load": {"kind": "load", "waits_for": ["extract"]}}});
    let (_, run) = s.post("/api/v1/workflows", json!({"spec": spec})).await;
    let run = run["id"].as_i64().expect("run");

    let browser = Browser::start().await;
    let base = &s.base;
    browser.go(&format!("{base}/")).await;
    assert!(
        browser.url().await.ends_with("/login"),
        "a visitor is sent to the login"
    );
    browser.type_into("#token", TOKEN).await;
    browser.click("button[type=submit]").await;
    // no live refresh while the test clicks: a refreshed page would replace what it found
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !browser.text("#live").await.contains("paused") {
        assert!(
            std::time::Instant::now() < deadline,
            "the Live button pauses the refresh"
        );
        browser.click("#live").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let failed_cell = "tr[data-queue=\"web\"] td[data-state=\"failed\"]";
    browser
        .wait_for_text(
            &format!("{base}/"),
            failed_cell,
            "1",
            Duration::from_secs(10),
        )
        .await;
    let shot = browser.screenshot().await;
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    let dir = std::env::var_os("REMUDA_ARTIFACTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("remuda-artifacts"));
    std::fs::create_dir_all(&dir).expect("artifact dir");
    std::fs::write(dir.join("dashboard-overview.png"), &shot).expect("screenshot saved");

    browser.click(&format!("{failed_cell} a")).await;
    browser.click(&format!("tr[data-id=\"{id}\"] a")).await;
    assert!(
        browser.text("main").await.contains("UPSTREAM_DOWN"),
        "the job's error is shown"
    );
    browser.click("form[action$=\"/retry\"] button").await;
    browser
        .wait_for_text(
            &format!("{base}/jobs/{id}"),
            "dl.fields dd",
            "completed",
            Duration::from_secs(15),
        )
        .await;

    browser.go(&format!("{base}/queues")).await;
    browser
        .click("tr[data-queue=\"web\"] form[action$=\"/pause\"] button")
        .await;
    browser.accept().await;
    let paused = std::time::Instant::now();
    while !s.client.queue("web").await.expect("queue").paused {
        assert!(
            paused.elapsed() < Duration::from_secs(5),
            "the queue was not paused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    browser
        .wait_for_text(
            &format!("{base}/queues"),
            "tr[data-queue=\"web\"]",
            "paused",
            Duration::from_secs(5),
        )
        .await;
    assert!(s.client.queue("web").await.expect("queue").paused);
    browser
        .click("tr[data-queue=\"web\"] form[action$=\"/resume\"] button")
        .await;
    // the form's POST has reached the server before the page is loaded again (a reload right
    // after the click can cancel a submission still on its way)
    let resumed = std::time::Instant::now();
    while s.client.queue("web").await.expect("queue").paused {
        assert!(
            resumed.elapsed() < Duration::from_secs(5),
            "the queue was not resumed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    browser
        .wait_for_text(
            &format!("{base}/queues"),
            "tr[data-queue=\"web\"]",
            "active",
            Duration::from_secs(5),
        )
        .await;
    assert!(!s.client.queue("web").await.expect("queue").paused);

    browser.go(&format!("{base}/workflows")).await;
    browser.click(&format!("tr[data-id=\"{run}\"] a")).await;
    browser.find("svg#graph g[data-node=\"load\"]").await;
    browser.find("svg#graph g[data-node=\"extract\"]").await;

    // a graph larger than the window scrolls inside its frame, and a scroll that reaches its
    // end stays there rather than moving the page
    let mut nodes: serde_json::Map<String, serde_json::Value> = (0..24)
        .map(|i| {
            let mut node = json!({"kind": "extract"});
            if i > 0 {
                node["waits_for"] = json!([format!("step_{}", i - 1)]);
            }
            (format!("step_{i}"), node)
        })
        .collect();
    for i in 0..40 {
        nodes.insert(format!("side_{i}"), json!({"kind": "extract"}));
    }
    let (_, big) = s
        .post(
            "/api/v1/workflows",
            json!({"spec": {"name": "big", "nodes": nodes}}),
        )
        .await;
    let big = big["id"].as_i64().expect("run");
    browser.go(&format!("{base}/workflows/{big}")).await;
    browser.find("svg#graph g[data-node=\"step_23\"]").await;
    let sizes = browser
        .script(
            "const g = document.querySelector('.graph'); const d = document.documentElement;
             return [g.scrollWidth, g.clientWidth, g.scrollHeight, g.clientHeight,
                     d.scrollWidth, d.clientWidth, window.innerHeight,
                     getComputedStyle(g).overscrollBehaviorY];",
        )
        .await;
    let n = |i: usize| sizes[i].as_i64().unwrap_or_else(|| panic!("{sizes}"));
    assert!(n(0) > n(1), "wide: the graph scrolls in its frame: {sizes}");
    assert!(n(2) > n(3), "tall: the graph scrolls in its frame: {sizes}");
    assert!(n(3) < n(6), "its frame fits in the window: {sizes}");
    assert!(
        n(4) <= n(5),
        "the page itself does not scroll sideways: {sizes}"
    );
    assert_eq!(
        sizes[7], "contain",
        "a scroll in the graph stays in the graph: {sizes}"
    );
    drop(browser);
    stop.cancel();
    worker.await.expect("worker task").expect("worker ran");
}
