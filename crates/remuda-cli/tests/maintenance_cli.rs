//! Maintenance through the binary: `remuda prune` deletes what is past its age (a dry run
//! only counts), a queue's own retention is set and shown, and `remuda maintenance` shows
//! the leader and each duty's last run; `remuda history` switches verification mode and checks
//! what it recorded.

mod common;

use common::*;
use std::time::Duration;

async fn old_jobs(db: &TestDatabase, queue: &str, state: &str, days: i32, n: i32) {
    db.database()
        .expect("pool")
        .conn()
        .await
        .expect("conn")
        .execute(
            "INSERT INTO remuda.jobs (queue, kind, state, finished_at)
             SELECT $1, 'x', $2::text::remuda.job_state, now() - make_interval(days => $3)
             FROM generate_series(1, $4)",
            &[&queue, &state, &days, &n],
        )
        .await
        .expect("insert");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_what_is_past_its_age_and_a_dry_run_only_counts() {
    let db = migrated().await;
    old_jobs(&db, "default", "completed", 2, 3).await;
    old_jobs(&db, "default", "failed", 2, 2).await;
    old_jobs(&db, "default", "cancelled", 8, 1).await;
    old_jobs(&db, "kept", "completed", 2, 4).await;
    let set = remuda(
        &db,
        &[
            "queue",
            "set",
            "kept",
            "--retain-completed",
            "never",
            "--json",
        ],
    )
    .await;
    assert_eq!(code(&set), 0, "{}", stderr(&set));
    assert_eq!(json(&set)["retention"]["completed"], "never");

    let dry = remuda(&db, &["prune", "--dry-run", "--json"]).await;
    assert_eq!(code(&dry), 0, "{}", stderr(&dry));
    let expected = serde_json::json!({"completed": 3, "failed": 0, "cancelled": 1, "expired": 0, "workflows": 0, "notifications": 0, "activity": 0, "audit": 0, "failures": 0});
    assert_eq!(json(&dry)["deleted"], expected);
    assert_eq!(json(&dry)["dry_run"], true);
    let pruned = json(&remuda(&db, &["prune", "--json"]).await);
    assert_eq!(pruned["deleted"], expected, "what the dry run counted");
    let failed = json(&remuda(&db, &["prune", "--failed", "1d", "--json"]).await);
    assert_eq!(
        failed["deleted"]["failed"], 2,
        "a flag replaces the default age"
    );
    let left = json(&remuda(&db, &["jobs", "--json"]).await);
    assert_eq!(
        left.as_array().map(Vec::len),
        Some(4),
        "the kept queue's jobs: {left}"
    );

    for args in [
        vec!["prune", "--completed", "soon"],
        vec!["queue", "set", "kept", "--retain-failed", "forever"],
    ] {
        let out = remuda(&db, &args).await;
        assert_eq!(code(&out), 2, "{args:?}");
        assert!(stderr(&out).contains("never"), "{args:?}: {}", stderr(&out));
    }
    let back = json(
        &remuda(
            &db,
            &[
                "queue",
                "set",
                "kept",
                "--retain-completed",
                "default",
                "--json",
            ],
        )
        .await,
    );
    assert!(back["retention"]["completed"].is_null(), "{back}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_shows_the_leader_and_each_duty() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        r#"
[worker]
name = "keeper"
maintenance_interval = "200ms"
promote_interval = "100ms"
prune_interval = "200ms"
heartbeat_interval = "200ms"
rescue_after = "1s"

[tasks.x]
builtin = "noop"

[retention]
completed = "1h"
"#,
    );
    old_jobs(&db, "default", "completed", 1, 5).await;
    let worker = WorkerProcess::start(&db, &config);
    let every = [
        "expiry",
        "promotion",
        "rate_buckets",
        "reindex",
        "vacuum",
        "rescue",
        "retention",
        "schedules",
    ];
    // the duties start in turn: wait for each, not for a number of them
    until(
        "every duty to have run and been recorded",
        Duration::from_secs(20),
        async || {
            let status = json(&remuda(&db, &["maintenance", "--json"]).await);
            status["duties"].as_array().is_some_and(|d| {
                every
                    .iter()
                    .all(|duty| d.iter().any(|x| x["duty"].as_str() == Some(duty)))
            })
        },
    )
    .await;
    until(
        "the old completed jobs to be pruned",
        Duration::from_secs(20),
        async || {
            json(&remuda(&db, &["jobs", "--json"]).await)
                .as_array()
                .is_some_and(Vec::is_empty)
        },
    )
    .await;
    let status = json(&remuda(&db, &["maintenance", "--json"]).await);
    worker.stop().await;
    let leader = &status["leader"];
    assert!(
        leader["worker"]
            .as_str()
            .is_some_and(|w| w.starts_with("keeper-")),
        "{status}"
    );
    assert!(
        leader["term"].as_i64().is_some() && leader["since"].is_string(),
        "{status}"
    );
    let duties: Vec<&str> = status["duties"]
        .as_array()
        .expect("duties")
        .iter()
        .filter_map(|d| d["duty"].as_str())
        .collect();
    for duty in every {
        assert!(duties.contains(&duty), "{duty} in {duties:?}");
    }
    let retention = status["duties"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["duty"] == "retention"))
        .expect("retention");
    assert_eq!(retention["ok"], true, "{retention}");
    assert!(retention["duration_ms"].is_number() && retention["started_at"].is_string());
    let out = remuda(&db, &["maintenance"]).await;
    let text = stdout(&out);
    assert!(
        text.contains("leader") && text.contains("retention"),
        "{text}{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_on_records_and_check_reports_a_change_written_around_the_state_machine() {
    let db = migrated().await;
    assert_eq!(code(&remuda(&db, &["history", "on"]).await), 0);
    let id = enqueue(&db, &["noop"]).await;
    let clean = remuda(&db, &["history", "check", "--json"]).await;
    assert_eq!(code(&clean), 0, "{}", stderr(&clean));
    assert_eq!(json(&clean)["jobs"], 1);
    let pool = db.database().expect("pool");
    pool.conn()
        .await
        .expect("connection")
        .execute(
            "UPDATE remuda.jobs SET state = 'completed' WHERE id = $1",
            &[&id],
        )
        .await
        .expect("a completion around the claim");
    let found = remuda(&db, &["history", "check"]).await;
    assert_eq!(code(&found), 1);
    assert!(
        stdout(&found).contains(&format!(
            "illegal transition: job {id}: available → completed"
        )),
        "{}",
        stdout(&found)
    );
    let bad = remuda(&db, &["history", "check", "--slack", "soon"]).await;
    assert_eq!(code(&bad), 2);
    assert!(stderr(&bad).contains("--slack"), "{}", stderr(&bad));
    assert_eq!(code(&remuda(&db, &["history", "off"]).await), 0);
}
