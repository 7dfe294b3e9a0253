//! What a user reads from the CLI: jobs listed latest first by their time (not their id, which
//! comes in blocks per connection) and paged by each job's cursor, a run's jobs with their
//! node, bulk deletes that say what they passed over, workflow controls that can be asked
//! twice, a keyed start that says what it ignored, tables with headers in the graph's order,
//! and `top`'s lag from when a job became runnable.

mod common;

use common::*;
use serde_json::Value;

const FAST: &str = r#"
[worker]
heartbeat_interval = "200ms"
rescue_after = "1500ms"
promote_interval = "100ms"
maintenance_interval = "200ms"
shutdown_timeout = "5s"
"#;

/// Enqueues `kind` through SQL on `conn` (one session: its ids come from its own block).
async fn enqueue_on(conn: &remuda::db::Conn, kind: &str) -> i64 {
    let row = conn
        .query_one("SELECT remuda.enqueue($1, '{}'::jsonb)", &[&kind])
        .await
        .expect("enqueue");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    row.get(0)
}

fn ids(listed: &Value) -> Vec<i64> {
    listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|j| j["id"].as_i64().expect("id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_latest_first_by_their_time_and_paged_by_each_jobs_cursor() {
    let db = migrated().await;
    let client = db.client().await.expect("client");
    // both held at once: two sessions
    let a = client.database().conn().await.expect("a");
    let b = client.database().conn().await.expect("b");
    // two sessions: ids come in a block per session, so id order is not time order
    let first = enqueue_on(&a, "k").await;
    let second = enqueue_on(&b, "k").await;
    let third = enqueue_on(&a, "k").await;
    assert!(
        second > third,
        "ids out of time order: {first} {second} {third}"
    );
    let listed = json(&remuda(&db, &["jobs", "--json"]).await);
    assert_eq!(ids(&listed), vec![third, second, first], "{listed:#}");

    let page = json(&remuda(&db, &["jobs", "--json", "--limit", "2"]).await);
    assert_eq!(ids(&page), vec![third, second]);
    let cursor = page[1]["cursor"]
        .as_str()
        .expect("each job carries its cursor");
    let rest = json(&remuda(&db, &["jobs", "--json", "--after", cursor]).await);
    assert_eq!(ids(&rest), vec![first], "continued after the second job");
    let from_first = page[0]["cursor"].as_str().expect("cursor");
    let rest = json(&remuda(&db, &["jobs", "--json", "--after", from_first]).await);
    assert_eq!(ids(&rest), vec![second, first]);

    let text = stdout(&remuda(&db, &["jobs"]).await);
    let header = text.lines().next().unwrap_or_default();
    assert!(
        header.contains("AT") && header.contains("WORKFLOW"),
        "{text}"
    );
    let refused = remuda(&db, &["jobs", "--state", "failed", "--after", cursor]).await;
    assert_eq!(
        code(&refused),
        2,
        "a cursor of another filter: {}",
        stderr(&refused)
    );
}

const MAPPED: &str = r#"
name = "mapped"

[nodes.split]
kind = "split"

[nodes.each]
kind = "each"
map = { over = "split", pointer = "/items" }
"#;

fn mapped_config(dir: &TempDir) -> std::path::PathBuf {
    dir.write(
        "worker.toml",
        &format!(
            r#"{FAST}
[tasks.split]
command = ["sh", "-c", "cat >/dev/null; echo '{{\"items\": [1, 2, 3]}}'"]
[tasks.each]
builtin = "noop"
"#
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_jobs_are_listed_with_their_node_and_bulk_delete_says_it_skipped_them() {
    let db = migrated().await;
    let dir = TempDir::new();
    let spec = dir.write("mapped.toml", MAPPED);
    let config = mapped_config(&dir);
    let run = stdout(&remuda(&db, &["workflow", "start", spec.to_str().expect("path")]).await)
        .trim()
        .to_string();
    let ran = worker_once(&db, &config).await;
    assert_eq!(code(&ran), 0, "{}", stderr(&ran));
    let plain = enqueue(&db, &["each"]).await;
    let ran = worker_once(&db, &config).await;
    assert_eq!(code(&ran), 0, "{}", stderr(&ran));

    let of_run = json(&remuda(&db, &["jobs", "--workflow", &run, "--json"]).await);
    let jobs = of_run.as_array().expect("array");
    assert_eq!(jobs.len(), 4, "split and three elements: {of_run:#}");
    let run_id: i64 = run.parse().expect("a run id");
    assert!(jobs.iter().all(|j| j["workflow_id"] == run_id));
    let mut elements: Vec<i64> = jobs
        .iter()
        .filter(|j| j["workflow_node"] == "each")
        .map(|j| j["workflow_index"].as_i64().expect("an element's index"))
        .collect();
    elements.sort();
    assert_eq!(elements, vec![0, 1, 2]);
    let element = jobs
        .iter()
        .find(|j| j["workflow_index"] == 1)
        .and_then(|j| j["id"].as_i64())
        .expect("element 1");
    let shown = stdout(&remuda(&db, &["job", &element.to_string()]).await);
    assert!(
        shown.contains(&format!("workflow      run {run} node each[1]")),
        "{shown}"
    );
    let status = stdout(&remuda(&db, &["workflow", "status", &run]).await);
    assert!(
        status.contains("[3 completed]"),
        "the map's elements by state: {status}"
    );

    let dry = remuda(
        &db,
        &["jobs", "delete", "--state", "completed", "--dry-run"],
    )
    .await;
    assert_eq!(code(&dry), 0, "{}", stderr(&dry));
    assert!(
        stdout(&dry).contains("1 completed job(s) would be deleted"),
        "only the plain job: {}",
        stdout(&dry)
    );
    assert!(
        stderr(&dry).contains("4 matching job(s) belong to workflow runs and would be skipped"),
        "{}",
        stderr(&dry)
    );
    let done = json(&remuda(&db, &["jobs", "delete", "--state", "completed", "--json"]).await);
    assert_eq!(done["deleted"], 1, "{done}");
    assert_eq!(done["skipped_workflow_jobs"], 4, "{done}");
    let gone = remuda(&db, &["job", &plain.to_string()]).await;
    assert_ne!(code(&gone), 0, "the plain job is gone: {}", stdout(&gone));
    let kept = json(&remuda(&db, &["jobs", "--workflow", &run, "--json"]).await);
    assert_eq!(
        kept.as_array().map(Vec::len),
        Some(4),
        "the run's jobs stay"
    );
}

const TWO_STEPS: &str = r#"
name = "two_steps"

[nodes.z_first]
kind = "never_run"

[nodes.a_second]
kind = "never_run"
waits_for = ["z_first"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_controls_can_be_asked_twice_and_a_keyed_start_says_what_it_ignored() {
    let db = migrated().await;
    let dir = TempDir::new();
    let spec = dir.write("two.toml", TWO_STEPS);
    let spec = spec.to_str().expect("path");
    let start = |args: &'static str| {
        let db = &db;
        async move {
            remuda(
                db,
                &[
                    "workflow", "start", spec, "--key", "k", "--args", args, "--json",
                ],
            )
            .await
        }
    };
    let first = json(&start(r#"{"a": 1}"#).await);
    let run = first["id"].to_string();
    let same = start(r#"{"a": 1}"#).await;
    assert_eq!(json(&same)["existed"], true);
    assert!(
        json(&same).get("warning").is_none(),
        "same input: nothing ignored"
    );
    let other = start(r#"{"a": 2}"#).await;
    assert_eq!(code(&other), 0);
    let said = json(&other);
    assert_eq!(
        (said["id"].to_string(), &said["existed"]),
        (run.clone(), &Value::Bool(true))
    );
    let warning = said["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("ignored") && warning.contains("\"k\""),
        "{said}"
    );
    assert!(stderr(&other).contains("warning:"), "{}", stderr(&other));

    let status = stdout(&remuda(&db, &["workflow", "status", &run]).await);
    let order: Vec<&str> = status
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.ends_with("_first") || w.ends_with("_second"))
        .collect();
    assert_eq!(
        order,
        ["z_first", "a_second"],
        "the graph's order: {status}"
    );
    assert!(
        status.contains("NODE") && status.contains("STATE"),
        "{status}"
    );
    let list = stdout(&remuda(&db, &["workflow", "list"]).await);
    let header = list.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") || header.trim_start().starts_with("ID"),
        "{list}"
    );
    assert!(
        header.contains("NAME") && header.contains("STATE"),
        "{list}"
    );

    let paused = remuda(&db, &["workflow", "pause", &run]).await;
    assert_eq!(code(&paused), 0, "{}", stderr(&paused));
    let listed = stdout(&remuda(&db, &["jobs"]).await);
    assert!(
        listed.contains("held (its run is paused)"),
        "a held job shows no year-9999 time: {listed}"
    );
    let again = remuda(&db, &["workflow", "pause", &run, "--json"]).await;
    assert_eq!(json(&again)["already"], true, "a second pause");
    let cancelled = remuda(&db, &["workflow", "cancel", &run, "--json"]).await;
    assert_eq!(code(&cancelled), 0, "{}", stderr(&cancelled));
    assert_eq!(json(&cancelled)["already"], false);
    let again = remuda(&db, &["workflow", "cancel", &run, "--json"]).await;
    assert_eq!(
        code(&again),
        0,
        "a second cancel, as a job's: {}",
        stderr(&again)
    );
    assert_eq!(json(&again)["already"], true);
    let text = remuda(&db, &["workflow", "cancel", &run]).await;
    assert!(
        stdout(&text).contains("was already cancelled"),
        "{}",
        stdout(&text)
    );
    let paused = remuda(&db, &["workflow", "pause", &run]).await;
    assert_eq!(
        code(&paused),
        2,
        "a cancelled run cannot be paused: {}",
        stderr(&paused)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_counts_lag_from_when_a_job_became_runnable_and_shows_unroutable_jobs() {
    let db = migrated().await;
    enqueue(
        &db,
        &[
            "nobody_runs_this",
            "--queue",
            "ancient",
            "--run-at",
            "2020-01-01T00:00:00Z",
        ],
    )
    .await;
    let frame = stdout(&remuda(&db, &["top", "--once"]).await);
    let header = frame
        .lines()
        .find(|l| l.starts_with("QUEUE"))
        .unwrap_or_else(|| panic!("no queue table: {frame}"));
    let columns: Vec<&str> = header.split_whitespace().collect();
    let row: Vec<&str> = frame
        .lines()
        .find(|l| l.starts_with("ancient"))
        .unwrap_or_else(|| panic!("no row: {frame}"))
        .split_whitespace()
        .collect();
    let at = |name: &str| columns.iter().position(|c| *c == name).expect(name);
    assert_eq!(row[at("UNROUTABLE")], "1", "no worker runs it: {frame}");
    let lag: f64 = row[at("LAG")]
        .trim_end_matches('s')
        .parse()
        .unwrap_or_else(|_| panic!("a lag in seconds: {frame}"));
    assert!(
        lag < 120.0,
        "lag counts from the enqueue, not from 2020: {lag}"
    );
}
