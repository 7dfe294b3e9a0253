//! The JSON API against a real PostgreSQL and a real HTTP server: every route's answers,
//! its refusals of bad input, and the audit log of what was changed.

mod common;

use common::{code, serve};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_over_http_is_listed_and_shown_with_its_args_unchanged() {
    let s = serve(|d| d).await;
    let args =
        json!({"path": "a.jpg", "n": 12345678901234567890u64, "nested": {"x": [1, 2.5, null]}});
    let (status, created) = s
        .post(
            "/api/v1/jobs",
            json!({"kind": "resize", "args": args, "queue": "media", "priority": 3}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    let (status, job) = s.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(job["args"], args);
    assert_eq!(
        (job["queue"].as_str(), job["priority"].as_i64()),
        (Some("media"), Some(3))
    );
    let (status, page) = s
        .get("/api/v1/jobs?state=available&queue=media&limit=10")
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["jobs"][0]["id"], id);
    assert_eq!(page["next"], Value::Null);
    let (status, page) = s
        .get("/api/v1/jobs?args=%7B%22path%22%3A%22a.jpg%22%7D")
        .await;
    assert_eq!(
        (status, page["jobs"].as_array().map(Vec::len)),
        (200, Some(1))
    );
    let (status, queues) = s.get("/api/v1/queues").await;
    assert_eq!(status, 200);
    assert_eq!(queues[0]["queue"], "media");
    assert_eq!(queues[0]["available"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_a_clear_error_and_nothing_is_written() {
    let s = serve(|d| d).await;
    for (path, status, expected) in [
        ("/api/v1/jobs?state=done", 422, "unknown job state"),
        ("/api/v1/jobs?limit=0", 422, "1 to 1000"),
        ("/api/v1/jobs?limit=many", 400, "limit"),
        ("/api/v1/jobs?args=%7Bnope", 400, "args must be JSON"),
        ("/api/v1/jobs?after=garbage", 422, "cursor"),
        ("/api/v1/jobs?colour=red", 400, "colour"),
        ("/api/v1/jobs/abc", 400, "bad path"),
        ("/api/v1/jobs/999999", 404, "no job with id 999999"),
        ("/api/v1/nothing", 404, "openapi.json"),
        ("/api/v1/workflows?state=sleepy", 422, "state"),
    ] {
        let (got, body) = s.get(path).await;
        assert_eq!(got, status, "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{path}: {message}");
    }
    for (body, status, expected) in [
        (json!({"args": {}}), 400, "kind"),
        (json!({"kind": "k", "colour": 1}), 400, "colour"),
        (json!({"kind": "k", "priority": "high"}), 400, "priority"),
        (json!({"kind": "k", "max_attempts": 0}), 422, "max_attempts"),
        (json!({"kind": "k", "delay": "soon"}), 422, "delay"),
        (json!({"kind": "", "args": {}}), 422, "kind"),
    ] {
        let (got, answer) = s.post("/api/v1/jobs", body.clone()).await;
        assert_eq!(got, status, "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{body}: {message}");
    }
    let response = s
        .http
        .post(format!("{}/api/v1/jobs", s.base))
        .bearer_auth(common::TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 400);
    let (_, page) = s.get("/api/v1/jobs").await;
    assert_eq!(page["jobs"], json!([]), "nothing was enqueued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_header_is_the_trace_the_job_continues_and_a_malformed_one_is_ignored() {
    let s = serve(|d| d).await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let post = |traceparent: &'static str| {
        s.http
            .post(format!("{}/api/v1/jobs", s.base))
            .bearer_auth(common::TOKEN)
            .header("content-type", "application/json")
            .header("traceparent", traceparent)
            .header("tracestate", "vendor=abc")
            .body(r#"{"kind": "traced"}"#)
            .send()
    };
    for (traceparent, expected) in [
        (tp, json!({"traceparent": tp, "tracestate": "vendor=abc"})),
        // as W3C asks of a receiver: the job is enqueued, outside any trace
        ("00-xyz", Value::Null),
    ] {
        let response = post(traceparent).await.expect("request");
        assert_eq!(response.status().as_u16(), 201);
        let created: Value = response.json().await.expect("JSON");
        let id = created["id"].as_i64().expect("id");
        let (_, job) = s.get(&format!("/api/v1/jobs/{id}")).await;
        assert_eq!(job["trace"], expected, "{traceparent}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_cancel_and_delete_answer_with_the_previous_state_or_say_why_not() {
    let s = serve(|d| d).await;
    let (_, a) = s.post("/api/v1/jobs", json!({"kind": "k"})).await;
    let (_, b) = s.post("/api/v1/jobs", json!({"kind": "k"})).await;
    let (a, b) = (a["id"].as_i64().expect("id"), b["id"].as_i64().expect("id"));
    s.set_state(a, "failed").await;
    let (status, body) = s.post(&format!("/api/v1/jobs/{a}/retry"), json!({})).await;
    assert_eq!(
        (status, &body["previous_state"]),
        (200, &json!("failed")),
        "{body}"
    );
    let (status, body) = s.post(&format!("/api/v1/jobs/{a}/retry"), json!({})).await;
    assert_eq!((status, code(&body)), (409, "wrong_state"), "{body}");
    let (status, body) = s.post(&format!("/api/v1/jobs/{b}/cancel"), json!({})).await;
    assert_eq!(
        (status, &body["previous_state"]),
        (200, &json!("available")),
        "{body}"
    );
    let (status, body) = s.post(&format!("/api/v1/jobs/{b}/cancel"), json!({})).await;
    assert_eq!((status, &body["already"]), (200, &json!(true)), "{body}");
    s.set_state(a, "running").await;
    let (status, body) = s.call("DELETE", &format!("/api/v1/jobs/{a}"), None).await;
    assert_eq!((status, code(&body)), (409, "wrong_state"), "{body}");
    let (status, body) = s.call("DELETE", &format!("/api/v1/jobs/{b}"), None).await;
    assert_eq!((status, &body["deleted"]), (200, &json!(true)), "{body}");
    let (status, _) = s.get(&format!("/api/v1/jobs/{b}")).await;
    assert_eq!(status, 404);
    let (status, body) = s.call("DELETE", &format!("/api/v1/jobs/{b}"), None).await;
    assert_eq!((status, code(&body)), (404, "not_found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_key_conflict_is_a_409_that_names_the_holder() {
    let s = serve(|d| d).await;
    let job = json!({"kind": "report", "unique_key": "daily"});
    let (status, first) = s.post("/api/v1/jobs", job.clone()).await;
    assert_eq!(status, 201);
    let (status, body) = s.post("/api/v1/jobs", job.clone()).await;
    assert_eq!((status, code(&body)), (409, "unique_conflict"), "{body}");
    assert_eq!(body["error"]["id"], first["id"]);
    // the first fails; a second takes the key; retrying the first would make a duplicate
    let first = first["id"].as_i64().expect("id");
    s.set_state(first, "failed").await;
    let (status, _) = s.post("/api/v1/jobs", job).await;
    assert_eq!(status, 201, "the key is free once its holder failed");
    let (status, body) = s
        .post(&format!("/api/v1/jobs/{first}/retry"), json!({}))
        .await;
    assert_eq!((status, code(&body)), (409, "unique_conflict"), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("unique key"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_action_changes_every_job_matching_the_filter_and_only_those() {
    let s = serve(|d| d).await;
    let mut ids = Vec::new();
    for i in 0..1200 {
        let (_, body) = s
            .post(
                "/api/v1/jobs",
                json!({"kind": "k", "args": {"tenant": i % 3}}),
            )
            .await;
        ids.push(body["id"].as_i64().expect("id"));
    }
    let conn = s.client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'failed', attempt = 1, finished_at = now() WHERE id = ANY($1)",
        &[&ids],
    )
    .await
    .expect("fail them");
    let filter = json!({"state": "failed", "args": {"tenant": 1}});
    let (status, counted) = s
        .post(
            "/api/v1/jobs/bulk/retry",
            json!({"state": "failed", "args": {"tenant": 1}, "dry_run": true}),
        )
        .await;
    assert_eq!(
        (status, &counted["matched"], &counted["changed"]),
        (200, &json!(400), &json!(0)),
        "{counted}"
    );
    let (status, done) = s.post("/api/v1/jobs/bulk/retry", filter).await;
    assert_eq!((status, &done["changed"]), (200, &json!(400)), "{done}");
    let stats = s.client.queue_stats().await.expect("stats");
    assert_eq!(stats[0].count(remuda::JobState::Available), 400);
    assert_eq!(stats[0].count(remuda::JobState::Failed), 800);
    let (status, done) = s
        .post("/api/v1/jobs/bulk/delete", json!({"state": "failed"}))
        .await;
    assert_eq!((status, &done["changed"]), (200, &json!(800)), "{done}");
    let (status, body) = s.post("/api/v1/jobs/bulk/explode", json!({})).await;
    assert_eq!((status, code(&body)), (404, "not_found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_paused_resumed_and_limited() {
    let s = serve(|d| d).await;
    let (status, body) = s.post("/api/v1/queues/mail/pause", json!({})).await;
    assert_eq!((status, &body["paused"]), (200, &json!(true)), "{body}");
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/mail",
            Some(json!({"max_running": 5, "rate": "100/1s"})),
        )
        .await;
    assert_eq!((status, &body["max_running"]), (200, &json!(5)), "{body}");
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/mail",
            Some(json!({"max_running": null})),
        )
        .await;
    assert_eq!(
        (status, &body["max_running"]),
        (200, &Value::Null),
        "{body}"
    );
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/mail",
            Some(json!({"rate": "fast"})),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/mail",
            Some(json!({"rate": "10/1m", "rate_per": "key", "rate_burst": 2})),
        )
        .await;
    assert_eq!((status, &body["rate_burst"]), (200, &json!(2)), "{body}");
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/mail",
            Some(json!({"rate_burst": 3})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (422, "invalid"),
        "a burst without its rate: {body}"
    );
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/mail",
            Some(json!({"key_limit": 0})),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    let (status, body) = s.post("/api/v1/queues/mail/resume", json!({})).await;
    assert_eq!((status, &body["paused"]), (200, &json!(false)), "{body}");
    let (status, body) = s.get("/api/v1/queues/mail").await;
    assert_eq!((status, &body["paused"]), (200, &json!(false)), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_started_from_a_spec_shown_and_cancelled() {
    let s = serve(|d| d).await;
    let spec = json!({"name": "etl", "nodes": {"extract": {"kind": "extract"}, "load": {"kind": "load", "waits_for": ["extract"]}}});
    let (status, started) = s
        .post(
            "/api/v1/workflows",
            json!({"spec": spec, "args": {"day": 1}, "key": "d1"}),
        )
        .await;
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_i64().expect("id");
    let (status, again) = s
        .post("/api/v1/workflows", json!({"spec": spec, "key": "d1"}))
        .await;
    assert_eq!(
        (status, &again["existed"], &again["id"]),
        (201, &json!(true), &json!(id))
    );
    let (status, run) = s.get(&format!("/api/v1/workflows/{id}")).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["name"], "etl");
    let (status, list) = s.get("/api/v1/workflows?limit=5").await;
    assert_eq!((status, &list[0]["id"]), (200, &json!(id)));
    let (status, body) = s
        .post(&format!("/api/v1/workflows/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = s
        .post(&format!("/api/v1/workflows/{id}/resume"), json!({}))
        .await;
    assert_eq!((status, code(&body)), (409, "wrong_state"), "{body}");
    let bad = json!({"name": "bad", "nodes": {"a": {"kind": "t", "waits_for": ["ghost"]}}});
    let (status, body) = s.post("/api/v1/workflows", json!({"spec": bad})).await;
    assert_eq!((status, code(&body)), (422, "invalid_workflow"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("ghost"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_started_with_a_group_gives_it_to_its_jobs_and_a_bad_one_is_refused() {
    let s = serve(|d| d).await;
    let spec = json!({"name": "etl", "nodes": {"extract": {"kind": "extract"}}});
    let (status, started) = s
        .post("/api/v1/workflows", json!({"spec": spec, "group": "acme"}))
        .await;
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_i64().expect("id");
    let conn = s.client.database().conn().await.expect("conn");
    let groups: Vec<Option<String>> = conn
        .query(
            "SELECT group_key FROM remuda.jobs WHERE workflow_id = $1 UNION ALL
             SELECT group_key FROM remuda.workflows WHERE id = $1",
            &[&id],
        )
        .await
        .expect("groups")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(groups, [Some("acme".to_string()), Some("acme".to_string())]);
    let (status, body) = s
        .post("/api/v1/workflows", json!({"spec": spec, "group": "a\tb"}))
        .await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    let runs: i64 = conn
        .query_one("SELECT count(*) FROM remuda.workflows", &[])
        .await
        .expect("runs")
        .get(0);
    assert_eq!(runs, 1, "the refused start wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_schedules_and_notifications_are_listed() {
    let s = serve(|d| d).await;
    for path in [
        "/api/v1/workers",
        "/api/v1/schedules",
        "/api/v1/notifications",
        "/api/v1/audit",
    ] {
        let (status, body) = s.get(path).await;
        assert_eq!((status, body.is_array()), (200, true), "{path}: {body}");
    }
    let (status, body) = s.get("/api/v1/notifications?state=lost").await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    let (status, body) = s.post("/api/v1/schedules/none/trigger", json!({})).await;
    assert_eq!((status, code(&body)), (404, "not_found"), "{body}");
    let (status, body) = s.post("/api/v1/notifications/77/retry", json!({})).await;
    assert_eq!((status, code(&body)), (404, "not_found"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_in_the_audit_log_with_who_made_it_and_how_it_ended() {
    let s = serve(|d| d).await;
    let (_, created) = s.post("/api/v1/jobs", json!({"kind": "k"})).await;
    let id = created["id"].as_i64().expect("id");
    s.post(&format!("/api/v1/jobs/{id}/retry"), json!({})).await;
    s.post("/api/v1/queues/default/pause", json!({})).await;
    let (status, log) = s.get("/api/v1/audit").await;
    assert_eq!(status, 200);
    let entries: Vec<(String, String, String, String)> = log
        .as_array()
        .expect("array")
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (text("actor"), text("via"), text("action"), text("target"))
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("ops", "api", "queue.pause", "queue default"),
            ("ops", "api", "job.retry", &format!("job {id}")),
            ("ops", "api", "job.enqueue", "kind k"),
        ]
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()))
    );
    assert_eq!(
        log[1]["detail"]["error"]["code"], "wrong_state",
        "a refused retry is recorded as refused"
    );
    assert_eq!(log[2]["detail"]["ok"], json!(id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_route_of_the_contract() {
    let s = serve(|d| d).await;
    let (status, doc) = s.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    for (path, method) in [
        ("/api/v1/queues", "get"),
        ("/api/v1/jobs", "get"),
        ("/api/v1/jobs", "post"),
        ("/api/v1/jobs/{id}", "get"),
        ("/api/v1/jobs/{id}", "delete"),
        ("/api/v1/jobs/{id}/retry", "post"),
        ("/api/v1/jobs/{id}/cancel", "post"),
        ("/api/v1/queues/{name}/pause", "post"),
        ("/api/v1/queues/{name}/resume", "post"),
        ("/api/v1/queues/{name}/groups", "get"),
        ("/api/v1/queues/{name}/groups/{group}", "put"),
        ("/api/v1/workers", "get"),
        ("/api/v1/activity", "get"),
        ("/api/v1/workflows", "get"),
        ("/api/v1/workflows", "post"),
        ("/api/v1/workflows/{id}", "get"),
        ("/api/v1/schedules", "get"),
        ("/api/v1/notifications", "get"),
        ("/api/v1/openapi.json", "get"),
        ("/healthz", "get"),
        ("/metrics", "get"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} is described"
        );
    }
}

/// Runs for `ms` milliseconds.
struct Sleep;

impl remuda::Task for Sleep {
    const KIND: &'static str = "sleep";
    type Args = u64;
    type Output = ();

    async fn run(&self, _ctx: remuda::JobContext, ms: u64) -> Result<(), remuda::TaskError> {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_jobs_and_what_workers_report_are_listed_from_their_heartbeats() {
    let s = serve(|d| d).await;
    let config = remuda::WorkerConfig {
        heartbeat_interval: std::time::Duration::from_millis(200),
        poll_interval: std::time::Duration::from_millis(200),
        ..remuda::WorkerConfig::default()
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let worker = remuda::Worker::new(s.client.clone())
        .config(config)
        .register(Sleep);
    let shutdown = stop.clone();
    let running = tokio::spawn(worker.run(async move { shutdown.cancelled().await }));
    for _ in 0..3 {
        s.post("/api/v1/jobs", json!({"kind": "sleep", "args": 2500}))
            .await;
    }
    let mut listed = 0;
    for _ in 0..50 {
        let (_, page) = s.get("/api/v1/jobs?state=running").await;
        listed = page["jobs"].as_array().map_or(0, Vec::len);
        if listed == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        listed, 3,
        "the running jobs are listed from the worker's heartbeat"
    );
    let (_, workers) = s.get("/api/v1/workers").await;
    assert_eq!(workers[0]["running"], 3, "{workers}");
    assert!(
        workers[0]["rss_bytes"].as_i64().unwrap_or(0) > 1 << 20,
        "{workers}"
    );
    let mut completed = 0;
    for _ in 0..80 {
        let (_, workers) = s.get("/api/v1/workers").await;
        completed = workers[0]["completed"].as_i64().unwrap_or(0);
        if completed == 3 {
            assert!(workers[0]["cpu_percent"].is_number(), "{workers}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(completed, 3, "completed attempts are reported");
    let mut activity = json!([]);
    for _ in 0..50 {
        let (status, body) = s.get("/api/v1/activity?minutes=5").await;
        assert_eq!(status, 200, "{body}");
        activity = body;
        if activity[0]["completed"] == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(activity[0]["queue"], "default", "{activity}");
    assert_eq!(activity[0]["completed"], 3, "{activity}");
    assert_eq!(activity[0]["minutes"].as_array().map(Vec::len), Some(5));
    assert!(
        activity[0]["run_p50_ms"].as_f64().unwrap_or(0.0) >= 1000.0,
        "2.5 s runs: {activity}"
    );
    let (status, body) = s.get("/api/v1/activity?minutes=0").await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    stop.cancel();
    running.await.expect("worker task").expect("worker ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_give_the_database_gauges_and_what_the_api_enqueued_in_openmetrics_text() {
    let s = serve(|d| d).await;
    for _ in 0..2 {
        s.post("/api/v1/jobs", json!({"kind": "mail", "queue": "out"}))
            .await;
    }
    let response = s
        .http
        .get(format!("{}/metrics", s.base))
        .bearer_auth(common::TOKEN)
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status().as_u16(), 200);
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = response.text().await.expect("text");
    for expected in [
        "remuda_jobs_enqueued_total{queue=\"out\",kind=\"mail\"} 2",
        "remuda_queue_jobs{queue=\"out\",state=\"available\"} 2",
        "remuda_queue_jobs{queue=\"out\",state=\"failed\"} 0",
        "remuda_queue_lag_seconds{queue=\"out\"} ",
        "remuda_workers 0",
        "remuda_notifications{state=\"pending\"} 0",
        "remuda_schedules{state=\"active\"} 0",
    ] {
        assert!(text.contains(expected), "{expected} in:\n{text}");
    }
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.trim_end().ends_with("# EOF"));
    let refused = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .expect("scrape");
    assert_eq!(refused.status().as_u16(), 401);
}

/// The available count of queue `name` in a `GET /api/v1/queues` answer.
fn available(queues: &Value, name: &str) -> Option<i64> {
    queues
        .as_array()?
        .iter()
        .find(|q| q["queue"] == name)
        .and_then(|q| q["available"].as_i64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_shared_between_requests_refreshed_behind_them_and_dropped_by_a_change() {
    let s = serve(|d| d).await;
    let (_, before) = s.get("/api/v1/queues").await;
    assert_eq!(available(&before, "side"), None, "{before}");
    // a job enqueued behind the dashboard's back shows once the count is redone
    s.client
        .insert(
            remuda::NewJob::new("mail", &json!({}))
                .expect("job")
                .queue("side"),
        )
        .await
        .expect("insert");
    let (_, cached) = s.get("/api/v1/queues").await;
    assert_eq!(cached, before, "the count just made is served again");
    let mut seen = None;
    for _ in 0..50 {
        let (_, now) = s.get("/api/v1/queues").await;
        seen = available(&now, "side");
        if seen.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, Some(1), "counted again behind the requests");
    // a change made through the dashboard shows at once
    let (status, _) = s
        .post("/api/v1/jobs", json!({"kind": "mail", "queue": "side"}))
        .await;
    assert_eq!(status, 201);
    let (_, after) = s.get("/api/v1/queues").await;
    assert_eq!(available(&after, "side"), Some(2), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_share_is_turned_on_and_its_groups_weighted_and_listed_through_the_api() {
    let s = serve(|d| d).await;
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/reports",
            Some(json!({"fairness": "group"})),
        )
        .await;
    assert_eq!(
        (status, &body["fairness"]),
        (200, &json!("group")),
        "{body}"
    );
    let (status, body) = s
        .call(
            "PATCH",
            "/api/v1/queues/reports",
            Some(json!({"fairness": "tenants"})),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    let (status, body) = s
        .call(
            "PUT",
            "/api/v1/queues/reports/groups/acme",
            Some(json!({"weight": 3})),
        )
        .await;
    assert_eq!(
        (status, &body["group"], &body["weight"]),
        (200, &json!("acme"), &json!(3.0)),
        "{body}"
    );
    let (status, body) = s
        .call(
            "PUT",
            "/api/v1/queues/reports/groups/acme",
            Some(json!({"weight": -1})),
        )
        .await;
    assert_eq!((status, code(&body)), (422, "invalid"), "{body}");
    s.client
        .insert_many(&[
            remuda::NewJob::from_json("render", remuda::Jsonb("{}".into()))
                .queue("reports")
                .group("acme"),
            remuda::NewJob::from_json("render", remuda::Jsonb("{}".into())).queue("reports"),
        ])
        .await
        .expect("enqueue");
    let (status, groups) = s.get("/api/v1/queues/reports/groups").await;
    assert_eq!(status, 200, "{groups}");
    let listed: Vec<(Value, Value, Value)> = groups
        .as_array()
        .expect("a list")
        .iter()
        .map(|g| {
            (
                g["group"].clone(),
                g["weight"].clone(),
                g["waiting"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (Value::Null, json!(1.0), json!(1)),
            (json!("acme"), json!(3.0), json!(1)),
        ],
        "{groups}"
    );
    // the weight is audited as every change is
    let (_, audit) = s.get("/api/v1/audit").await;
    assert!(audit.to_string().contains("queue.group_weight"), "{audit}");
    // and the groups are gauges of /metrics
    let text = s
        .http
        .get(format!("{}/metrics", s.base))
        .bearer_auth(common::TOKEN)
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("text");
    for expected in [
        "remuda_group_jobs{queue=\"reports\",group=\"acme\",state=\"available\"} 1",
        "remuda_group_jobs{queue=\"reports\",group=\"\",state=\"available\"} 1",
        "remuda_group_weight{queue=\"reports\",group=\"acme\"} 3",
        "remuda_group_fair_share{queue=\"reports\",group=\"acme\"} 0.75",
    ] {
        assert!(text.contains(expected), "{expected} in:\n{text}");
    }
}
