//! Schedules through the real binary: worker processes firing one schedule make exactly one
//! job per fire time, a killed leader loses no tick, and every `remuda schedule` command
//! does what it says and refuses bad input without writing anything.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// A worker config: fast liveness and maintenance, and a schedule firing every second
/// (catching up every time missed while no leader could fire).
fn config(dir: &TempDir, name: &str) -> std::path::PathBuf {
    dir.write(
        &format!("{name}.toml"),
        &format!(
            r#"
[worker]
name = "{name}"
heartbeat_interval = "200ms"
rescue_after = "1s"
maintenance_interval = "200ms"
promote_interval = "100ms"
shutdown_timeout = "5s"

[tasks.tick]
builtin = "noop"

[schedules.tick]
kind = "tick"
every = "1s"
catch_up = "all"
"#
        ),
    )
}

async fn leader(pool: &remuda::Database) -> Option<String> {
    let conn = pool.conn().await.expect("conn");
    conn.query_opt("SELECT leader_id FROM remuda.leader", &[])
        .await
        .expect("leader")
        .map(|r| r.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_make_one_job_per_second_and_a_killed_leader_loses_no_tick() {
    let db = migrated().await;
    let dir = TempDir::new();
    let pool = db.database().expect("pool");
    let mut workers: Vec<(String, WorkerProcess)> = ["w1", "w2", "w3"]
        .into_iter()
        .map(|name| {
            (
                name.to_string(),
                WorkerProcess::start(&db, &config(&dir, name)),
            )
        })
        .collect();
    until("a leader", Duration::from_secs(20), async || {
        leader(&pool).await.is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let first = leader(&pool).await.expect("a leader");
    let at = workers
        .iter()
        .position(|(name, _)| first.starts_with(&format!("{name}-")))
        .expect("the leader is one of ours");
    let (_, killed) = workers.remove(at);
    let kill_time = Instant::now();
    killed.kill().await;
    until("another leader", Duration::from_secs(10), async || {
        leader(&pool).await.is_some_and(|l| l != first)
    })
    .await;
    let takeover = kill_time.elapsed();
    tokio::time::sleep(Duration::from_secs(20)).await;
    for (_, worker) in workers {
        worker.stop().await;
    }
    // lease 600 ms (3 maintenance intervals), liveness 1 s: well within a few seconds
    assert!(
        takeover < Duration::from_secs(5),
        "took over after {takeover:?}"
    );
    let conn = pool.conn().await.expect("conn");
    let rows = conn
        .query(
            "SELECT fire_at, count(*) FROM remuda.jobs WHERE schedule = 'tick'
             GROUP BY fire_at ORDER BY fire_at",
            &[],
        )
        .await
        .expect("fires");
    let fires: Vec<(chrono::DateTime<chrono::Utc>, i64)> =
        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert!(
        fires.len() >= 28,
        "about 30 seconds of fires: {}",
        fires.len()
    );
    let doubled: Vec<_> = fires.iter().filter(|(_, n)| *n != 1).collect();
    assert!(
        doubled.is_empty(),
        "fire times with more than one job: {doubled:?}"
    );
    for pair in fires.windows(2) {
        assert_eq!(
            (pair[1].0 - pair[0].0).num_seconds(),
            1,
            "no second is missing: {} then {}",
            pair[0].0,
            pair[1].0
        );
    }
    let fired_by_the_schedule: i64 = conn
        .query_one("SELECT runs FROM remuda.schedules WHERE name = 'tick'", &[])
        .await
        .expect("runs")
        .get(0);
    assert_eq!(fired_by_the_schedule, fires.len() as i64);
}

/// `schedule add` of a nightly report in Berlin, as JSON.
const NIGHTLY: &[&str] = &[
    "schedule",
    "add",
    "nightly_report",
    "--kind",
    "report",
    "--args",
    r#"{"scope":"all"}"#,
    "--cron",
    "0 3 * * *",
    "--tz",
    "Europe/Berlin",
    "--json",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_schedule_command_works_and_refuses_bad_input_without_writing() {
    let db = migrated().await;
    let added = remuda(&db, NIGHTLY).await;
    assert_eq!(code(&added), 0, "{}", stderr(&added));
    let added = json(&added);
    assert_eq!(added["change"], "created");
    let next = added["next_run_at"].as_str().expect("next run").to_string();
    assert!(
        next.ends_with("T02:00:00Z") || next.ends_with("T01:00:00Z"),
        "03:00 in Berlin is 02:00 or 01:00 UTC: {next}"
    );
    let again = json(&remuda(&db, NIGHTLY).await);
    assert_eq!(again["change"], "unchanged");
    let listed = json(&remuda(&db, &["schedules", "--json"]).await);
    let row = &listed[0];
    for field in [
        "name",
        "kind",
        "queue",
        "pattern",
        "tz",
        "next_run_at",
        "last_run_at",
        "last_job_id",
        "runs",
        "paused",
        "catch_up",
        "overlap",
    ] {
        assert!(
            row.get(field).is_some(),
            "schedules --json has {field}: {row}"
        );
    }
    assert_eq!(
        (
            &row["pattern"],
            &row["tz"],
            &row["catch_up"],
            &row["overlap"]
        ),
        (
            &"0 3 * * *".into(),
            &"Europe/Berlin".into(),
            &"skip".into(),
            &"allow".into()
        )
    );

    let triggered = json(&remuda(&db, &["schedule", "trigger", "nightly_report", "--json"]).await);
    let id = triggered["job_id"].as_i64().expect("job id");
    let job = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(job["schedule"], "nightly_report");
    assert!(
        job["fire_at"].as_str().is_some_and(|t| t.contains('T')),
        "{job}"
    );
    assert_eq!(job["args"], serde_json::json!({"scope": "all"}));
    let plain = enqueue(&db, &["other"]).await;
    let plain = json(&remuda(&db, &["job", &plain.to_string(), "--json"]).await);
    assert!(
        plain["schedule"].is_null() && plain["fire_at"].is_null(),
        "{plain}"
    );
    let jobs = json(&remuda(&db, &["jobs", "--json"]).await);
    assert!(jobs
        .as_array()
        .is_some_and(|j| j.iter().any(|j| j["schedule"] == "nightly_report")));

    let paused = json(&remuda(&db, &["schedule", "pause", "nightly_report", "--json"]).await);
    assert_eq!(paused["paused"], true);
    assert_eq!(
        json(&remuda(&db, &["schedules", "--json"]).await)[0]["paused"],
        true
    );
    let resumed = json(&remuda(&db, &["schedule", "resume", "nightly_report", "--json"]).await);
    assert_eq!(resumed["paused"], false);
    let listed = json(&remuda(&db, &["schedules", "--json"]).await);
    assert_eq!(
        (&listed[0]["runs"], &listed[0]["last_job_id"]),
        (&1.into(), &id.into())
    );

    let before = stdout(&remuda(&db, &["schedules", "--json"]).await);
    for (args, says) in [
        (vec!["--cron", "61 * * * *"], "invalid cron minute field"),
        (vec!["--cron", "* * * *"], "needs 5"),
        (vec!["--every", "0s"], "at least 1s"),
        (vec!["--daily", "25:00"], "invalid time"),
        (
            vec!["--daily", "03:00", "--tz", "Mars/Olympus"],
            "unknown time zone",
        ),
        (
            vec!["--pattern", "monthly 32 06:00"],
            "day 32 does not exist",
        ),
        (
            vec!["--every", "1m", "--args", "{nope"],
            "--args is not valid JSON",
        ),
        (
            vec!["--every", "1m", "--catch-up", "sometimes"],
            "invalid value 'sometimes'",
        ),
        (
            vec!["--every", "1m", "--daily", "03:00"],
            "cannot be used with",
        ),
        (vec![], "required arguments were not provided"),
    ] {
        let mut all = vec!["schedule", "add", "nightly_report", "--kind", "report"];
        all.extend(args.iter().copied());
        let out = remuda(&db, &all).await;
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(
        stdout(&remuda(&db, &["schedules", "--json"]).await),
        before,
        "nothing was written"
    );
    for action in ["pause", "resume", "trigger", "delete"] {
        let out = remuda(&db, &["schedule", action, "nope", "--json"]).await;
        assert_eq!(code(&out), 2, "{action}");
        assert!(
            stderr(&out).contains("NOT_FOUND"),
            "{action}: {}",
            stderr(&out)
        );
    }
    let deleted = remuda(&db, &["schedule", "delete", "nightly_report"]).await;
    assert_eq!(code(&deleted), 0);
    assert_eq!(
        json(&remuda(&db, &["schedules", "--json"]).await),
        serde_json::json!([])
    );
    let kept = json(&remuda(&db, &["job", &id.to_string(), "--json"]).await);
    assert_eq!(kept["schedule"], "nightly_report", "its jobs stay");
}
