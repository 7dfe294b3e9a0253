//! Completion notifications against a real PostgreSQL, a real HTTP receiver and a real SMTP
//! server (both on 127.0.0.1, started by the tests): signatures that an independent
//! implementation verifies, retries with growing delays, dead rows and their retry,
//! `Retry-After`, 410, refused private targets, every finalization path, email, workflows.

mod common;

use common::{fast_config, setup, start, Running};
use remuda::notify::{
    NotificationConfig, NotificationFilter, NotificationState, NotifyTarget, Outcome, Secret,
    SmtpConfig, SmtpTls,
};
use remuda::testing::{Receiver, Reply, SmtpSink};
use remuda::workflow::NodeSpec;
use remuda::{Client, Error, JobContext, JobState, NewJob, Task, TaskError, TaskOptions, Worker};
use serde_json::{json, Value};
use std::time::Duration;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WAIT: Duration = Duration::from_secs(20);

/// Completes with its args, or fails for good with the code in `args.fail`.
struct Report;

impl Task for Report {
    const KIND: &'static str = "report";
    type Args = Value;
    type Output = Value;

    fn options() -> TaskOptions {
        TaskOptions::default().max_attempts(1)
    }

    async fn run(&self, _ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        match args.get("fail").and_then(Value::as_str) {
            Some(code) => Err(TaskError::permanent(code, "the report could not be built")),
            None => Ok(json!({"rows": args.get("rows").cloned().unwrap_or(json!(0))})),
        }
    }
}

/// Returns its args, as raw JSON.
struct Echo;

impl remuda::DynTask for Echo {
    fn run(
        self: std::sync::Arc<Self>,
        _ctx: JobContext,
        args: remuda::Jsonb,
    ) -> futures_util::future::BoxFuture<'static, Result<remuda::Jsonb, TaskError>> {
        Box::pin(async move { Ok(args) })
    }
}

fn secret() -> Secret {
    SECRET.parse().expect("secret")
}

/// Test delivery settings: private targets allowed (the receiver is on 127.0.0.1), short
/// retry delays.
fn delivery(delays: &[u64]) -> NotificationConfig {
    NotificationConfig {
        secrets: vec![secret()],
        timeout: Duration::from_secs(2),
        retry_delays: delays.iter().map(|&ms| Duration::from_millis(ms)).collect(),
        allow_private_targets: true,
        ..NotificationConfig::default()
    }
}

fn worker_with(client: &Client, notifications: NotificationConfig) -> Running {
    start(
        Worker::new(client.clone())
            .config(remuda::WorkerConfig {
                notifications,
                ..fast_config()
            })
            .register(Report),
    )
}

async fn enqueue(client: &Client, args: Value, target: NotifyTarget) -> i64 {
    client
        .insert(
            NewJob::for_task::<Report>(&args)
                .expect("job")
                .notify(target),
        )
        .await
        .expect("insert")
}

/// A `report` job with empty args that notifies `target`.
fn report_job(target: NotifyTarget) -> NewJob {
    NewJob::new("report", &json!({}))
        .expect("job")
        .notify(target)
}

async fn insert(client: &Client, job: NewJob) -> i64 {
    client.insert(job).await.expect("insert")
}

async fn notifications_of(client: &Client, job: i64) -> Vec<remuda::notify::Notification> {
    client
        .notifications(&NotificationFilter {
            job_id: Some(job),
            ..NotificationFilter::default()
        })
        .await
        .expect("list")
}

/// Waits until every notification of `job` is in `state` (and there is at least one).
async fn settled(
    client: &Client,
    job: i64,
    state: NotificationState,
) -> Vec<remuda::notify::Notification> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let list = notifications_of(client, job).await;
        if !list.is_empty() && list.iter().all(|n| n.state == state) {
            return list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not {state} within {WAIT:?}: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Verifies a request's signature as a receiver would, with Python's standard library (not
/// remuda's code): base64-decode the key after `whsec_`, HMAC-SHA256 over
/// "id.timestamp.body", compare with each `v1,` signature of the header.
fn verified_independently(
    secret: &str,
    id: &str,
    timestamp: &str,
    body: &str,
    header: &str,
) -> bool {
    const VERIFY: &str = r#"
import base64, hashlib, hmac, sys
secret, msg_id, ts, header = sys.argv[1:5]
body = sys.stdin.buffer.read()
key = base64.b64decode(secret.split("_", 1)[1])
expected = base64.b64encode(hmac.new(key, msg_id.encode() + b"." + ts.encode() + b"." + body, hashlib.sha256).digest()).decode()
ok = any(sig.split(",", 1) == ["v1", expected] for sig in header.split(" "))
sys.exit(0 if ok else 1)
"#;
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", VERIFY, secret, id, timestamp, header])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("body written");
    child.wait().expect("python3 ends").success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_carries_the_standard_headers_and_a_signature_an_independent_verifier_accepts() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let rotated = "whsec_".to_string() + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY=";
    let mut config = delivery(&[100]);
    config.secrets.push(rotated.parse().expect("second secret"));
    let worker = worker_with(&client, config);
    let id = enqueue(
        &client,
        json!({"rows": 12345678901234567890u64}),
        NotifyTarget::webhook(format!("{}/hooks/remuda", receiver.url)),
    )
    .await;

    let got = receiver.wait_for(1, WAIT).await;
    assert_eq!(got.len(), 1, "one delivery");
    let request = &got[0];
    assert_eq!(request.path, "/hooks/remuda");
    let listed = settled(&client, id, NotificationState::Sent).await;
    let webhook_id = request.header("webhook-id").expect("webhook-id");
    assert_eq!(
        webhook_id,
        format!("msg_{}", listed[0].id),
        "the outbox row's id"
    );
    let timestamp = request
        .header("webhook-timestamp")
        .expect("webhook-timestamp");
    let sent_at: i64 = timestamp.parse().expect("unix seconds");
    assert!(
        (sent_at - chrono::Utc::now().timestamp()).abs() < 60,
        "{sent_at}"
    );
    let signatures = request
        .header("webhook-signature")
        .expect("webhook-signature");
    assert_eq!(
        signatures.split(' ').count(),
        2,
        "one per secret while rotating: {signatures}"
    );
    for key in [SECRET, rotated.as_str()] {
        assert!(
            verified_independently(key, webhook_id, timestamp, &request.body, signatures),
            "the signature for {key} verifies: {signatures}"
        );
    }
    assert!(
        !verified_independently(
            SECRET,
            webhook_id,
            timestamp,
            &request.body.replace("12", "13"),
            signatures
        ),
        "a changed body does not verify"
    );
    assert_eq!(request.header("content-type"), Some("application/json"));

    let event: Value = serde_json::from_str(&request.body).expect("JSON body");
    assert_eq!(event["type"], "job.completed");
    assert!(
        event["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{event}"
    );
    let data = &event["data"];
    assert_eq!(data["id"], id);
    assert_eq!(data["kind"], "report");
    assert_eq!(data["queue"], "default");
    assert_eq!(data["state"], "completed");
    assert_eq!(data["attempt"], 1);
    assert!(data["error"].is_null());
    assert!(
        data["created_at"].is_string() && data["finished_at"].is_string(),
        "{data}"
    );
    assert!(
        request.body.contains("12345678901234567890"),
        "the result passes through unchanged: {}",
        request.body
    );
    assert_eq!(listed[0].attempts, 1);
    assert_eq!(listed[0].event, "job.completed");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_jobs_webhook_carries_its_trace_in_the_body_and_the_traceparent_header() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let worker = worker_with(&client, delivery(&[100]));
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let target = || NotifyTarget::webhook(format!("{}/hooks/traced", receiver.url));
    let traced = insert(
        &client,
        report_job(target()).trace(remuda::TraceContext::parse(tp, None).expect("valid")),
    )
    .await;
    let plain = insert(&client, report_job(target())).await;

    let got = receiver.wait_for(2, WAIT).await;
    worker.shutdown().await;
    let by_job = |id: i64| {
        got.iter()
            .find(|r| serde_json::from_str::<Value>(&r.body).is_ok_and(|e| e["data"]["id"] == id))
            .expect("a delivery for the job")
    };
    let request = by_job(traced);
    assert_eq!(request.header("traceparent"), Some(tp));
    let event: Value = serde_json::from_str(&request.body).expect("JSON body");
    assert_eq!(event["data"]["traceparent"], tp);
    let request = by_job(plain);
    assert_eq!(request.header("traceparent"), None);
    let event: Value = serde_json::from_str(&request.body).expect("JSON body");
    assert!(event["data"].get("traceparent").is_none(), "{event}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_failing_three_times_gets_it_once_more_after_growing_delays() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    receiver.reply_next([Reply::status(500), Reply::status(502), Reply::status(500)]);
    let worker = worker_with(&client, delivery(&[200, 600, 1500]));
    let id = enqueue(&client, json!({}), NotifyTarget::webhook(&receiver.url)).await;

    let listed = settled(&client, id, NotificationState::Sent).await;
    assert_eq!(listed[0].attempts, 4);
    // nothing more comes once it is delivered
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.received();
    assert_eq!(got.len(), 4, "three failures, then once more: {got:?}");
    let ids: Vec<_> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert!(
        ids.iter().all(|i| *i == ids[0]),
        "the same webhook-id every time: {ids:?}"
    );
    let gaps: Vec<Duration> = got.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(
        gaps[0] >= Duration::from_millis(200)
            && gaps[1] >= Duration::from_millis(600)
            && gaps[2] >= Duration::from_millis(1500),
        "each delay at least its retry_delays entry: {gaps:?}"
    );
    assert!(
        gaps[0] < gaps[1] && gaps[1] < gaps[2],
        "growing delays: {gaps:?}"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_receiver_ends_dead_after_the_maximum_attempts_and_retry_revives_it() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    receiver.reply_always(Reply::status(500));
    let mut config = delivery(&[50]);
    config.max_attempts = 3;
    let worker = worker_with(&client, config);
    let id = enqueue(&client, json!({}), NotifyTarget::webhook(&receiver.url)).await;

    let dead = settled(&client, id, NotificationState::Dead).await;
    assert_eq!(dead[0].attempts, 3);
    assert!(
        dead[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("HTTP 500")),
        "{dead:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 3, "no attempt after the last");
    let err = client
        .retry_notification(dead[0].id + 1000)
        .await
        .expect_err("no such row");
    assert!(matches!(err, Error::NotificationNotFound(_)), "{err}");

    receiver.reply_always(Reply::status(204));
    client.retry_notification(dead[0].id).await.expect("retry");
    let sent = settled(&client, id, NotificationState::Sent).await;
    assert_eq!(sent[0].attempts, 1, "attempts anew");
    assert_eq!(receiver.received().len(), 4);
    let err = client
        .retry_notification(dead[0].id)
        .await
        .expect_err("sent, not dead");
    assert!(matches!(err, Error::NotificationWrongState { .. }), "{err}");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_and_gone_receivers_are_not_tried_again() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    receiver.reply_next([Reply::status(429).header("Retry-After", "2")]);
    let worker = worker_with(&client, delivery(&[50]));
    let throttled = enqueue(
        &client,
        json!({}),
        NotifyTarget::webhook(format!("{}/a", receiver.url)),
    )
    .await;
    settled(&client, throttled, NotificationState::Sent).await;
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    let waited = got[1].at - got[0].at;
    assert!(
        waited >= Duration::from_millis(1900),
        "Retry-After: 2 waited {waited:?}, not the 50 ms delay"
    );

    receiver.reply_next([Reply::status(410)]);
    let gone = enqueue(
        &client,
        json!({}),
        NotifyTarget::webhook(format!("{}/b", receiver.url)),
    )
    .await;
    let dead = settled(&client, gone, NotificationState::Dead).await;
    assert_eq!(dead[0].attempts, 1, "410 Gone ends it at once");
    assert!(
        dead[0]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("410")),
        "{dead:?}"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_naming_the_address_and_why() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let port = receiver.url.rsplit(':').next().expect("port").to_string();
    let mut config = delivery(&[50]);
    config.allow_private_targets = false;
    let worker = worker_with(&client, config);
    let literal = enqueue(&client, json!({}), NotifyTarget::webhook(&receiver.url)).await;
    let named = enqueue(
        &client,
        json!({}),
        NotifyTarget::webhook(format!("http://localhost:{port}/")),
    )
    .await;
    let metadata = enqueue(
        &client,
        json!({}),
        NotifyTarget::webhook("http://169.254.169.254/latest/meta-data/"),
    )
    .await;
    for (job, address, why) in [
        (literal, "127.0.0.1", "loopback"),
        (named, "127.0.0.1", "loopback"),
        (metadata, "169.254.169.254", "link-local"),
    ] {
        let dead = settled(&client, job, NotificationState::Dead).await;
        let error = dead[0].last_error.clone().unwrap_or_default();
        assert!(error.contains(address) && error.contains(why), "{error}");
        assert!(
            error.contains("allow_private_targets"),
            "says how to allow it: {error}"
        );
        assert_eq!(dead[0].attempts, 1);
    }
    assert!(
        receiver.received().is_empty(),
        "nothing reached the receiver"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_finalization_path_writes_its_notification_and_retries_write_none() {
    let (db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let target = || NotifyTarget::webhook(&receiver.url);
    // the batching completer: a success and a failure
    let completed = enqueue(&client, json!({}), target()).await;
    let failed = enqueue(&client, json!({"fail": "NO_DATA"}), target()).await;
    // cancel, before it runs
    let cancelled = insert(
        &client,
        report_job(target()).delay(Duration::from_secs(3600)),
    )
    .await;
    client.cancel(cancelled).await.expect("cancel");
    // expiry: nobody serves its kind
    let expired = client
        .insert(
            NewJob::new("nobody_runs_this", &json!({}))
                .expect("job")
                .notify(target())
                .expires_at(chrono::Utc::now() + chrono::Duration::milliseconds(200)),
        )
        .await
        .expect("insert");
    // rescue: a dead worker held two jobs; one has an attempt left (no notification for
    // the retry), the other none (it fails)
    let rescued_again = insert(&client, report_job(target()).max_attempts(2)).await;
    let rescued_failed = insert(&client, report_job(target()).max_attempts(1)).await;
    let conn = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("connection");
    conn.execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
         VALUES ('ghost', 'ghost', 'nowhere', 1, '{default}', '{report}', 1, 30000, now() - interval '1 hour')",
        &[],
    )
    .await
    .expect("a dead worker");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'running', attempt = 1, worker_id = 'ghost', started_at = now() WHERE id = ANY($1)",
        &[&vec![rescued_again, rescued_failed]],
    )
    .await
    .expect("held by it");

    let worker = worker_with(&client, delivery(&[100]));
    for (job, event) in [
        (completed, "job.completed"),
        (failed, "job.failed"),
        (cancelled, "job.cancelled"),
        (expired, "job.expired"),
        (rescued_failed, "job.failed"),
        (rescued_again, "job.completed"),
    ] {
        let sent = settled(&client, job, NotificationState::Sent).await;
        assert_eq!(sent.len(), 1, "job {job}: one notification: {sent:?}");
        assert_eq!(sent[0].event, event, "job {job}");
    }
    let got = receiver.wait_for(6, WAIT).await;
    assert_eq!(
        got.len(),
        6,
        "one request per job, none for the rescue that retried"
    );
    let bodies: Vec<Value> = got
        .iter()
        .map(|r| serde_json::from_str(&r.body).expect("JSON"))
        .collect();
    let failed_body = bodies
        .iter()
        .find(|b| b["data"]["id"] == failed)
        .expect("the failure's");
    assert_eq!(failed_body["data"]["error"]["code"], "NO_DATA");
    let rescued_body = bodies
        .iter()
        .find(|b| b["data"]["id"] == rescued_failed)
        .expect("the rescue's");
    assert_eq!(rescued_body["data"]["error"]["code"], "WORKER_LOST");
    let expired_body = bodies
        .iter()
        .find(|b| b["data"]["id"] == expired)
        .expect("the expiry's");
    assert_eq!(expired_body["data"]["error"]["code"], "DEADLINE_EXCEEDED");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_outcomes_asked_for_notify_and_a_rolled_back_outcome_writes_nothing() {
    let (db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let on_failure = NotifyTarget::webhook(&receiver.url).on([Outcome::Failed]);
    let ok = enqueue(&client, json!({}), on_failure.clone()).await;
    let bad = enqueue(&client, json!({"fail": "BROKEN"}), on_failure).await;
    // a cancel that rolls back leaves no notification
    let kept = insert(
        &client,
        report_job(NotifyTarget::webhook(&receiver.url)).delay(Duration::from_secs(3600)),
    )
    .await;
    let mut conn = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("connection");
    let tx = conn.transaction().await.expect("begin");
    tx.execute(
        "UPDATE remuda.jobs SET state = 'cancelled', finished_at = now() WHERE id = $1",
        &[&kept],
    )
    .await
    .expect("cancel in a transaction");
    let n: i64 = tx
        .query_one("SELECT count(*) FROM remuda.notifications", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0, "a bare UPDATE is not the seam: nothing written");
    tx.rollback().await.expect("rollback");
    let tx = conn.transaction().await.expect("begin");
    let cancel = remuda::sql::ALL
        .iter()
        .find(|(name, _)| *name == "job_cancel")
        .map(|(_, text)| *text)
        .expect("the cancel statement");
    tx.query(cancel, &[&kept])
        .await
        .expect("cancel through the seam");
    let n: i64 = tx
        .query_one(
            "SELECT count(*) FROM remuda.notifications WHERE job_id = $1",
            &[&kept],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 1, "the cancel wrote its notification in its transaction");
    tx.rollback().await.expect("rollback");

    let worker = worker_with(&client, delivery(&[100]));
    settled(&client, bad, NotificationState::Sent).await;
    client.wait(ok, WAIT).await.expect("ok ran");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        notifications_of(&client, ok).await.is_empty(),
        "a success does not notify on [failed]"
    );
    assert!(
        notifications_of(&client, kept).await.is_empty(),
        "the rolled-back cancel left none"
    );
    let job = client.job(kept).await.expect("read").expect("the job");
    assert_eq!(job.state, JobState::Scheduled);
    assert_eq!(receiver.received().len(), 1);
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinds_defaults_notify_its_jobs_unless_a_job_has_its_own_target() {
    let (_db, client) = setup().await;
    let defaults = Receiver::start().await.expect("receiver");
    let own = Receiver::start().await.expect("receiver");
    let worker = start(
        Worker::new(client.clone())
            .config(remuda::WorkerConfig {
                notifications: delivery(&[100]),
                ..fast_config()
            })
            .register_dyn(
                "report",
                Report::options().notify(NotifyTarget::webhook(&defaults.url)),
                std::sync::Arc::new(Echo),
            ),
    );
    common::until(WAIT, || async {
        client
            .workers()
            .await
            .map(|w| !w.is_empty())
            .unwrap_or(false)
    })
    .await;
    let mut plain = Vec::new();
    for _ in 0..20 {
        plain.push(
            client
                .insert(NewJob::new("report", &json!({})).expect("job"))
                .await
                .expect("insert"),
        );
    }
    let mine = enqueue(&client, json!({}), NotifyTarget::webhook(&own.url)).await;
    for &job in &plain {
        settled(&client, job, NotificationState::Sent).await;
    }
    settled(&client, mine, NotificationState::Sent).await;
    assert_eq!(
        defaults.received().len(),
        20,
        "every plain success notified the kind's target"
    );
    assert_eq!(
        own.received().len(),
        1,
        "the job's own target instead of the kind's"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_says_which_job_how_it_ended_and_its_error() {
    let (_db, client) = setup().await;
    let sink = SmtpSink::start().await.expect("smtp sink");
    let mut config = delivery(&[100]);
    config.smtp = Some(SmtpConfig {
        host: "127.0.0.1".into(),
        port: Some(sink.port),
        tls: SmtpTls::None,
        from: "remuda@example.com".into(),
        username: None,
        password: None,
    });
    let worker = worker_with(&client, config);
    let id = enqueue(
        &client,
        json!({"fail": "NO_DATA"}),
        NotifyTarget::email("ops@example.com"),
    )
    .await;
    settled(&client, id, NotificationState::Sent).await;
    let mails = sink.wait_for(1, WAIT).await;
    assert_eq!(mails.len(), 1);
    let mail = &mails[0];
    assert_eq!(mail.from, "remuda@example.com");
    assert_eq!(mail.to, vec!["ops@example.com".to_string()]);
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some(format!("remuda: job {id} (report) failed").as_str())
    );
    assert_eq!(mail.header("MIME-Version").as_deref(), Some("1.0"));
    let message_id = mail.header("Message-ID").unwrap_or_default();
    assert!(
        message_id.starts_with("<remuda.notification.") && message_id.ends_with("@example.com>"),
        "a Message-ID of the sender's domain: {message_id:?}"
    );
    assert!(mail.header("Date").is_some(), "dated");
    assert!(
        mail.header("Content-Type")
            .is_some_and(|t| t.starts_with("text/plain") && t.contains("utf-8")),
        "{:?}",
        mail.header("Content-Type")
    );
    let body = mail.body();
    assert!(
        body.contains(&format!("Job {id} (report) failed.")),
        "{body}"
    );
    assert!(
        body.contains("NO_DATA") && body.contains("the report could not be built"),
        "{body}"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_run_notifies_when_it_ends() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let worker = worker_with(&client, delivery(&[100]));
    let mut flow = remuda::workflow::Workflow::new("nightly");
    flow.node("extract", NodeSpec::task("report", json!({"rows": 3})));
    let mut load = NodeSpec::task("report", json!({}));
    load.waits_for("extract");
    flow.node("load", load);
    flow.notify(NotifyTarget::webhook(&receiver.url).on([Outcome::Completed, Outcome::Failed]));
    let run = client
        .start_workflow(&flow, &json!(null))
        .await
        .expect("start");
    client.wait_workflow(run.id, WAIT).await.expect("completed");
    let got = receiver.wait_for(1, WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "the run's end only: its jobs have no targets"
    );
    let event: Value = serde_json::from_str(&got[0].body).expect("JSON");
    assert_eq!(event["type"], "workflow.completed");
    assert_eq!(event["data"]["id"], run.id);
    assert_eq!(event["data"]["name"], "nightly");
    let listed = client
        .notifications(&NotificationFilter {
            workflow_id: Some(run.id),
            ..NotificationFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].event, "workflow.completed");
    assert_eq!(listed[0].job_id, None);
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_sent_notifications_after_a_week_and_dead_ones_after_a_month() {
    let (db, client) = setup().await;
    let conn = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("connection");
    conn.batch_execute(
        "INSERT INTO remuda.notifications (channel, target, event, body, state, finished_at) VALUES
            ('webhook', 'https://a.example', 'job.completed', '{}', 'sent', now() - interval '8 days'),
            ('webhook', 'https://b.example', 'job.completed', '{}', 'sent', now() - interval '6 days'),
            ('webhook', 'https://c.example', 'job.failed', '{}', 'dead', now() - interval '8 days'),
            ('webhook', 'https://d.example', 'job.failed', '{}', 'dead', now() - interval '31 days'),
            ('webhook', 'https://e.example', 'job.failed', '{}', 'pending', NULL)",
    )
    .await
    .expect("notifications of several ages");
    let retention = remuda::maintenance::Retention::default();
    let counted = client.prune(&retention, true).await.expect("dry run");
    assert_eq!(counted.notifications, 2);
    let pruned = client.prune(&retention, false).await.expect("prune");
    assert_eq!(pruned.notifications, 2);
    let left: Vec<String> = conn
        .query(
            "SELECT target FROM remuda.notifications ORDER BY target",
            &[],
        )
        .await
        .expect("left")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        left,
        [
            "https://b.example",
            "https://c.example",
            "https://e.example"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_sign_leaves_webhooks_to_one_that_can() {
    let (_db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let unsigned = NotificationConfig {
        allow_private_targets: true,
        ..NotificationConfig::default()
    };
    let first = worker_with(&client, unsigned);
    let id = enqueue(&client, json!({}), NotifyTarget::webhook(&receiver.url)).await;
    client.wait(id, WAIT).await.expect("the job ran");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting = notifications_of(&client, id).await;
    assert_eq!(waiting[0].state, NotificationState::Pending);
    assert_eq!(
        waiting[0].attempts, 0,
        "no attempt spent by a worker without a secret"
    );
    first.shutdown().await;

    let second = worker_with(&client, delivery(&[100]));
    let sent = settled(&client, id, NotificationState::Sent).await;
    assert_eq!(sent[0].attempts, 1);
    assert_eq!(receiver.received().len(), 1);
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_whose_senders_died_on_every_attempt_ends_dead_instead_of_looping() {
    let (db, client) = setup().await;
    let receiver = Receiver::start().await.expect("receiver");
    let conn = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("connection");
    let id: i64 = conn
        .query_one(
            "INSERT INTO remuda.notifications (channel, target, event, body, attempts, last_error)
             VALUES ('webhook', $1, 'job.completed', '{}', 3, 'timed out') RETURNING id",
            &[&receiver.url],
        )
        .await
        .expect("a row whose three attempts never wrote an outcome")
        .get(0);
    let mut config = delivery(&[100]);
    config.max_attempts = 3;
    let worker = worker_with(&client, config);
    let deadline = std::time::Instant::now() + WAIT;
    let row = loop {
        let list = client
            .notifications(&NotificationFilter::default())
            .await
            .expect("list");
        let row = list.into_iter().find(|n| n.id == id).expect("the row");
        if row.state == NotificationState::Dead || std::time::Instant::now() > deadline {
            break row;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(row.state, NotificationState::Dead);
    assert_eq!(row.attempts, 3, "no fourth attempt");
    let error = row.last_error.unwrap_or_default();
    assert!(
        error.contains("no outcome was written") && error.contains("timed out"),
        "{error}"
    );
    assert!(receiver.received().is_empty());
    worker.shutdown().await;
}
