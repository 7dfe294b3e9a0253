//! Notifications through the binary: the config's `[notifications]` and a task's `notify`,
//! `enqueue --notify-*`, `remuda notifications` and its retry, a workflow spec's `notify`,
//! bad input refused with exit 2 and nothing written, and a worker SIGKILLed between send
//! and mark.

mod common;

use common::{code, json, migrated, remuda, stderr, until, TempDir, WorkerProcess};
use remuda::testing::{Receiver, Reply, TestDatabase};
use std::time::Duration;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WAIT: Duration = Duration::from_secs(30);

fn config(dir: &TempDir, receiver: &Receiver, timeout: &str) -> std::path::PathBuf {
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
heartbeat_interval = "200ms"
rescue_after = "1s"
maintenance_interval = "200ms"
shutdown_timeout = "5s"

[notifications]
secret = ["{SECRET}"]
timeout = "{timeout}"
retry_delays = ["100ms"]
allow_private_targets = true

[tasks.report]
builtin = "noop"
notify = {{ webhook = "{url}/kind", on = ["completed"] }}

[tasks.plain]
builtin = "noop"
"#,
            url = receiver.url
        ),
    )
}

async fn listed(db: &TestDatabase, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["notifications", "--json"];
    all.extend_from_slice(args);
    let out = remuda(db, &all).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    json(&out).as_array().cloned().expect("an array")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_and_enqueue_flags_notify_and_the_listing_keeps_its_contract() {
    let db = migrated().await;
    let receiver = Receiver::start().await.expect("receiver");
    let dir = TempDir::new();
    let worker = WorkerProcess::start(&db, &config(&dir, &receiver, "5s"));
    let by_kind = common::enqueue(&db, &["report"]).await;
    let own = common::enqueue(
        &db,
        &[
            "plain",
            "--notify-webhook",
            &format!("{}/own", receiver.url),
            "--notify-on",
            "final",
        ],
    )
    .await;
    let not_asked = common::enqueue(
        &db,
        &[
            "plain",
            "--notify-webhook",
            &receiver.url,
            "--notify-on",
            "failed,expired",
        ],
    )
    .await;
    let got = receiver.wait_for(2, WAIT).await;
    let mut paths: Vec<&str> = got.iter().map(|r| r.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["/kind", "/own"]);
    until("both marked sent", WAIT, async || {
        listed(&db, &["--state", "sent"]).await.len() == 2
    })
    .await;
    let all = listed(&db, &[]).await;
    assert_eq!(all.len(), 2, "none for an outcome not asked for: {all:?}");
    for row in &all {
        for field in [
            "id",
            "job_id",
            "workflow_id",
            "channel",
            "target",
            "event",
            "state",
            "attempts",
            "next_attempt_at",
            "last_error",
            "sent_at",
        ] {
            assert!(row.get(field).is_some(), "{field} in {row}");
        }
        assert_eq!(row["channel"], "webhook");
        assert_eq!(row["event"], "job.completed");
        assert_eq!(row["attempts"], 1);
    }
    let mine = listed(&db, &["--job", &own.to_string()]).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0]["target"], format!("{}/own", receiver.url));
    assert_eq!(listed(&db, &["--job", &by_kind.to_string()]).await.len(), 1);
    assert!(listed(&db, &["--job", &not_asked.to_string()])
        .await
        .is_empty());
    let text = remuda(&db, &["notifications"]).await;
    assert!(
        common::stdout(&text).contains("job.completed"),
        "{}",
        common::stdout(&text)
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_sigkilled_between_send_and_mark_causes_at_most_one_duplicate_with_the_same_id() {
    let db = migrated().await;
    let receiver = Receiver::start().await.expect("receiver");
    // the first delivery is taken, but answered only after the worker is gone
    receiver.reply_next([Reply::status(200).after(Duration::from_secs(5))]);
    let dir = TempDir::new();
    let path = config(&dir, &receiver, "2s");
    let first = WorkerProcess::start(&db, &path);
    let job = common::enqueue(&db, &["report"]).await;
    let got = receiver.wait_for(1, WAIT).await;
    assert_eq!(got.len(), 1);
    first.kill().await;
    let pending = listed(&db, &["--job", &job.to_string()]).await;
    assert_eq!(pending[0]["state"], "pending", "not marked: {pending:?}");

    let second = WorkerProcess::start(&db, &path);
    until("sent by the second worker", WAIT, async || {
        listed(&db, &["--job", &job.to_string()]).await[0]["state"] == "sent"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.received();
    assert_eq!(got.len(), 2, "one duplicate, no more: {got:?}");
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(got[0].body, got[1].body, "the same body");
    let row = &listed(&db, &["--job", &job.to_string()]).await[0];
    assert_eq!(row["attempts"], 2);
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_notification_input_is_refused_with_exit_2_and_nothing_written() {
    let db = migrated().await;
    for (args, wanted) in [
        (
            vec!["--notify-webhook", "ftp://hooks.example.com/x"],
            "scheme \"ftp\"",
        ),
        (
            vec!["--notify-webhook", "hooks.example.com/x"],
            "does not parse",
        ),
        (
            vec!["--notify-email", "ops-at-example.com"],
            "not an email address",
        ),
        (
            vec![
                "--notify-email",
                "ops@example.com",
                "--notify-on",
                "failed,retried",
            ],
            "\"retried\"",
        ),
        (
            vec!["--notify-on", "failed"],
            "needs --notify-webhook or --notify-email",
        ),
    ] {
        let mut all = vec!["enqueue", "report"];
        all.extend(args.iter().copied());
        let out = remuda(&db, &all).await;
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(wanted), "{args:?}: {}", stderr(&out));
    }
    let jobs = json(&remuda(&db, &["jobs", "--json"]).await);
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(0),
        "nothing written: {jobs}"
    );

    let dir = TempDir::new();
    for (toml, wanted) in [
        (
            "[notifications]\nsecret = \"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"",
            "does not start with whsec_",
        ),
        (
            "[notifications]\nsecret = \"whsec_c2hvcnQ=\"",
            "holds 5 bytes",
        ),
        (
            "[notifications]\nsecret = \"${REMUDA_NO_SUCH_SECRET}\"",
            "REMUDA_NO_SUCH_SECRET is not set",
        ),
        (
            "[notifications]\nretry_delays = []",
            "retry_delays is empty",
        ),
        (
            "[notifications.smtp]\nhost = \"127.0.0.1\"\nfrom = \"nobody\"\ntls = \"none\"",
            "not an email address",
        ),
        (
            "[notifications.smtp]\nhost = \"127.0.0.1\"\nfrom = \"a@b.c\"\ntls = \"ssl\"",
            "expected \"starttls\", \"tls\" or \"none\"",
        ),
    ] {
        let path = dir.write(
            "bad.toml",
            &format!("{toml}\n\n[tasks.report]\nbuiltin = \"noop\"\n"),
        );
        let out = remuda(&db, &["worker", "--config", path.to_str().expect("path")]).await;
        assert_eq!(code(&out), 2, "{toml}: {}", stderr(&out));
        assert!(stderr(&out).contains(wanted), "{toml}: {}", stderr(&out));
    }
    let path = dir.write(
        "bad.toml",
        "[tasks.report]\nbuiltin = \"noop\"\nnotify = { webhook = \"https://x.example\", on = [\"sometimes\"] }\n",
    );
    let out = remuda(&db, &["worker", "--config", path.to_str().expect("path")]).await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[tasks.report]") && stderr(&out).contains("\"sometimes\""),
        "{}",
        stderr(&out)
    );

    let spec = dir.write(
        "flow.toml",
        "name = \"nightly\"\nnotify = { webhook = \"gopher://x\" }\n[nodes.a]\nkind = \"report\"\n",
    );
    let out = remuda(
        &db,
        &["workflow", "start", spec.to_str().expect("path"), "--json"],
    )
    .await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("INVALID_SPEC") && stderr(&out).contains("notify: webhook URL"),
        "{}",
        stderr(&out)
    );
    let runs = json(&remuda(&db, &["workflow", "list", "--json"]).await);
    assert_eq!(
        runs.as_array().map(Vec::len),
        Some(0),
        "no run started: {runs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_makes_a_dead_notification_due_and_unknown_ids_are_not_found() {
    let db = migrated().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    let id: i64 = conn
        .query_one(
            "INSERT INTO remuda.notifications (channel, target, event, body, state, attempts, last_error, finished_at)
             VALUES ('webhook', 'https://hooks.example.com', 'job.failed', '{}', 'dead', 10, 'HTTP 500', now())
             RETURNING id",
            &[],
        )
        .await
        .expect("a dead row")
        .get(0);
    let dead = listed(&db, &["--state", "dead"]).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["last_error"], "HTTP 500");
    let out = remuda(&db, &["notifications", "retry", &id.to_string(), "--json"]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let row = &listed(&db, &[]).await[0];
    assert_eq!(row["state"], "pending");
    assert_eq!(row["attempts"], 0);
    let again = remuda(&db, &["notifications", "retry", &id.to_string(), "--json"]).await;
    assert_eq!(code(&again), 2);
    assert!(stderr(&again).contains("WRONG_STATE"), "{}", stderr(&again));
    let missing = remuda(&db, &["notifications", "retry", "999999", "--json"]).await;
    assert_eq!(code(&missing), 2);
    assert!(
        stderr(&missing).contains("NOT_FOUND"),
        "{}",
        stderr(&missing)
    );
}
