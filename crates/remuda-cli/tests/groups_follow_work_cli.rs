//! A tenant's group through the CLI and a `remuda worker`: a command task finds its job's
//! group in REMUDA_JOB_GROUP (and none when its job has none), an HTTP task in the
//! `x-remuda-job-group` header, and a `remuda enqueue` or
//! `remuda workflow start` inside it takes it; `workflow start --group` and `schedule add
//! --group` give runs and schedules a group their jobs take; a group with a control
//! character is refused with exit 2.

mod common;

use common::{
    code, enqueue, json, migrated, remuda, stderr, wait_for_state, TempDir, WorkerProcess,
};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ONE_NODE: &str = r#"
name = "one_node"

[nodes.only]
kind = "leaf"
queue = "leaves"
"#;

/// An HTTP server answering every request with the `x-remuda-job-group` header it got, as a
/// JSON string ("unset" without one).
async fn group_echo() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let end = loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                    if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        break end;
                    }
                };
                let group = data[..end]
                    .split(|b| *b == b'\n')
                    .find_map(|line| line.strip_prefix(b"x-remuda-job-group: "))
                    .map(|v| {
                        String::from_utf8_lossy(v.strip_suffix(b"\r").unwrap_or(v)).into_owned()
                    })
                    .unwrap_or_else(|| "unset".into());
                let text = serde_json::to_string(&group).expect("json");
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

fn config(dir: &TempDir, conninfo: &str, spec: &str, port: u16) -> std::path::PathBuf {
    let bin = common::BIN;
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
concurrency = 4
poll_interval = "100ms"
shutdown_timeout = "5s"

[tasks.env_group]
command = ["sh", "-c", "cat >/dev/null; printf '\"%s\"' \"$(printenv REMUDA_JOB_GROUP || echo unset)\""]

[tasks.fan_out]
command = ["sh", "-c", "cat >/dev/null; {bin} --database-url '{conninfo}' enqueue leaf --queue leaves --json >/dev/null && {bin} --database-url '{conninfo}' workflow start '{spec}' --json"]

[tasks.http_group]
url = "http://127.0.0.1:{port}/"
"#
        ),
    )
}

/// The group of the jobs of run `run`, one row per group.
async fn node_groups(db: &common::TestDatabase, run: i64) -> Vec<Option<String>> {
    let client = db.client().await.expect("client");
    let conn = client.database().conn().await.expect("conn");
    conn.query(
        "SELECT DISTINCT group_key FROM remuda.jobs WHERE workflow_id = $1",
        &[&run],
    )
    .await
    .expect("node jobs")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_task_is_told_its_group_and_what_it_enqueues_or_starts_takes_it() {
    let db = migrated().await;
    let dir = TempDir::new();
    let spec = dir.write("one.toml", ONE_NODE);
    let spec = spec.to_str().expect("path");
    let config = config(&dir, db.conninfo(), spec, group_echo().await);
    let worker = WorkerProcess::start(&db, &config);
    let told = enqueue(&db, &["env_group", "--group", "acme"]).await;
    let untold = enqueue(&db, &["env_group"]).await;
    let fan = enqueue(&db, &["fan_out", "--group", "acme"]).await;
    // (percent-encoded: a space or a byte past ASCII reaches the endpoint unchanged)
    let http_told = enqueue(&db, &["http_group", "--group", " åcme"]).await;
    let http_untold = enqueue(&db, &["http_group"]).await;
    for (id, group) in [
        (told, "acme"),
        (untold, "unset"),
        (http_told, "%20%C3%A5cme"),
        (http_untold, "unset"),
    ] {
        let job = wait_for_state(&db, id, &["completed", "failed"], Duration::from_secs(30)).await;
        assert_eq!(job["result"]["ok"], group, "{job}");
    }
    let fan = wait_for_state(&db, fan, &["completed", "failed"], Duration::from_secs(30)).await;
    assert_eq!(fan["state"], "completed", "{fan}");
    let run = fan["result"]["ok"]["id"].as_i64().expect("the run's id");
    assert_eq!(node_groups(&db, run).await, [Some("acme".to_string())]);
    let leaves = json(&remuda(&db, &["jobs", "--queue", "leaves", "--json"]).await);
    let groups: Vec<&serde_json::Value> = leaves
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| &j["group"])
        .collect();
    assert_eq!(groups.len(), 2, "the leaf and the node job: {leaves}");
    assert!(groups.iter().all(|g| *g == "acme"), "{leaves}");
    assert!(worker.stop().await.success());

    // given on the command line, and refused when it could not be listed
    let started = remuda(
        &db,
        &["workflow", "start", spec, "--group", "globex", "--json"],
    )
    .await;
    assert_eq!(code(&started), 0, "{}", stderr(&started));
    let run = json(&started)["id"].as_i64().expect("id");
    assert_eq!(node_groups(&db, run).await, [Some("globex".to_string())]);
    let refused = remuda(&db, &["workflow", "start", spec, "--group", "a\tb"]).await;
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("control character"),
        "{}",
        stderr(&refused)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_added_with_a_group_fires_its_jobs_in_it() {
    let db = migrated().await;
    let added = remuda(
        &db,
        &[
            "schedule", "add", "report", "--kind", "leaf", "--every", "1h", "--group", "acme",
        ],
    )
    .await;
    assert_eq!(code(&added), 0, "{}", stderr(&added));
    let listed = json(&remuda(&db, &["schedules", "--json"]).await);
    assert_eq!(listed[0]["group"], "acme", "{listed}");
    let fired = remuda(&db, &["schedule", "trigger", "report", "--json"]).await;
    assert_eq!(code(&fired), 0, "{}", stderr(&fired));
    let job = json(&fired)["job_id"].as_i64().expect("the fired job's id");
    let job = json(&remuda(&db, &["job", &job.to_string(), "--json"]).await);
    assert_eq!(job["group"], "acme", "{job}");
    let refused = remuda(
        &db,
        &[
            "schedule", "add", "bad", "--kind", "leaf", "--every", "1h", "--group", "a\nb",
        ],
    )
    .await;
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("control character"),
        "{}",
        stderr(&refused)
    );
}
