//! remuda behind PgBouncer in transaction pooling mode (`pooler=transaction`): a private
//! PgBouncer (Debian's, which keeps no prepared statement across transactions) in front of a
//! private cluster, with few server connections for many clients, so that consecutive
//! statements of one client really reach different server connections. Worker processes
//! run through it with and without a direct address for LISTEN; jobs run exactly once, a
//! SIGKILLed worker's jobs are rescued, and what needs a session (migrations) asks for the
//! direct address instead of failing half-way.

mod common;

use common::{
    count, executions_per_job as executions, recording_config, TempDir, WorkerProcess, BIN,
};
use remuda::testing::{pgbouncer_program, PgBouncer, PrivateCluster};
use std::path::Path;
use std::time::{Duration, Instant};

/// The private cluster and PgBouncer in front of it (4 server connections), or `None` with
/// the reason printed when PgBouncer is not installed here.
async fn bouncer() -> Option<(PrivateCluster, PgBouncer)> {
    if pgbouncer_program().is_none() {
        eprintln!("skipped: pgbouncer is not installed (scripts/test installs it as root on Debian: apt-get install pgbouncer)");
        return None;
    }
    let cluster = PrivateCluster::start().await.expect("private cluster");
    let bouncer = PgBouncer::start(&cluster, 4).await.expect("pgbouncer");
    Some((cluster, bouncer))
}

/// Runs the remuda binary with `args` and the environment `env`.
async fn run(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("REMUDA_DIRECT_URL");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().await.expect("run remuda")
}

/// A worker process through the pooler; with `direct`, LISTEN goes directly to PostgreSQL.
fn worker(bouncer: &PgBouncer, config: &Path, direct: Option<&str>, log: &Path) -> WorkerProcess {
    let mut command = tokio::process::Command::new(BIN);
    match direct {
        Some(direct) => command.env("REMUDA_DIRECT_URL", direct),
        None => command.env_remove("REMUDA_DIRECT_URL"),
    };
    WorkerProcess::spawn(command, config, &[], &bouncer.conninfo(), log)
}

/// Waits up to two minutes until `n` jobs are completed, the workers' and PgBouncer's logs in
/// the failure; returns the most jobs of the capped queue seen running at once meanwhile.
async fn wait_completed(
    client: &remuda::Client,
    n: usize,
    stderr: &Path,
    bouncer: &PgBouncer,
) -> i64 {
    let started = Instant::now();
    let completed = "SELECT count(*) FROM remuda.jobs WHERE state = 'completed'";
    let capped = "SELECT count(*) FROM remuda.jobs WHERE queue = 'capped' AND state = 'running'";
    let mut most = 0;
    while count(client, completed).await < n as i64 {
        most = most.max(count(client, capped).await);
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not all jobs completed through pgbouncer; workers said: {}\npgbouncer said: {}",
            std::fs::read_to_string(stderr).unwrap_or_default(),
            bouncer.log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    most
}

/// Enqueues `n` jobs through the pooler: half plain, half in the capped queue, some unique
/// (the unique path runs several statements in one transaction).
async fn enqueue(client: &remuda::Client, n: usize) {
    let jobs: Vec<remuda::NewJob> = (0..n)
        .map(|i| {
            let job = if i % 2 == 0 {
                remuda::NewJob::new("record", &serde_json::json!({ "i": i }))
            } else {
                remuda::NewJob::new("record_capped", &serde_json::json!({ "i": i }))
                    .map(|j| j.queue("capped"))
            }
            .expect("job");
            if i % 10 == 0 {
                job.unique_key(format!("u{i}"))
            } else {
                job
            }
        })
        .collect();
    for chunk in jobs.chunks(50) {
        client
            .insert_many(chunk)
            .await
            .expect("enqueue through pgbouncer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_exactly_once_through_pgbouncer_in_transaction_mode() {
    let Some((cluster, bouncer)) = bouncer().await else {
        return;
    };
    let direct = cluster.conninfo();
    // what needs a session asks for PostgreSQL's own address instead of failing half-way
    let migrate = run(&["migrate"], &[("DATABASE_URL", &bouncer.conninfo())]).await;
    assert!(!migrate.status.success(), "{migrate:?}");
    let said = String::from_utf8_lossy(&migrate.stderr);
    assert!(said.contains("direct address"), "{said}");
    let migrate = run(
        &["migrate"],
        &[
            ("DATABASE_URL", &bouncer.conninfo()),
            ("REMUDA_DIRECT_URL", &direct),
        ],
    )
    .await;
    assert!(migrate.status.success(), "{migrate:?}");
    // the capped queue's claims run in a transaction under an advisory lock
    let set = run(
        &["queue", "set", "capped", "--max-running", "3"],
        &[("DATABASE_URL", &bouncer.conninfo())],
    )
    .await;
    assert!(set.status.success(), "{set:?}");

    let client = remuda::Client::connect(&bouncer.conninfo())
        .await
        .expect("client through pgbouncer");
    let n = 600;
    enqueue(&client, n).await;
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let stderr = dir.path().join("workers.log");
    let config = recording_config(&dir, &log, "0.02", 8, "100ms", "1s");
    // two poll (no direct address), one listens directly
    let mut workers = vec![
        worker(&bouncer, &config, None, &stderr),
        worker(&bouncer, &config, None, &stderr),
        worker(&bouncer, &config, Some(&direct), &stderr),
    ];
    let most = wait_completed(&client, n, &stderr, &bouncer).await;
    assert!(
        most <= 3,
        "{most} jobs of the capped queue ran at once (cap 3)"
    );
    // a job enqueued to idle workers that only poll is picked up too
    let listening = workers.pop().expect("the listening worker");
    let stopped = listening.stop().await;
    assert!(
        stopped.success(),
        "the listening worker ended with {stopped}; workers said: {}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    let late = client
        .insert(remuda::NewJob::new("record", &serde_json::json!({"late": true})).expect("job"))
        .await
        .expect("enqueue");
    let job = client
        .wait(late, Duration::from_secs(30))
        .await
        .expect("the late job runs");
    assert_eq!(job.state, remuda::JobState::Completed);
    for w in workers {
        assert!(w.stop().await.success(), "a worker exited with an error");
    }
    let runs = executions(&log);
    assert_eq!(runs.len(), n + 1, "every job ran");
    let twice: Vec<_> = runs.iter().filter(|(_, &c)| c > 1).collect();
    assert!(twice.is_empty(), "jobs ran more than once: {twice:?}");
    let workers_said = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(
        !workers_said.contains("prepared statement"),
        "no prepared statement leaked across the pooler: {workers_said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_behind_pgbouncer_has_its_jobs_rescued() {
    let Some((_cluster, bouncer)) = bouncer().await else {
        return;
    };
    let client = remuda::Client::connect(&bouncer.conninfo())
        .await
        .expect("client through pgbouncer");
    let n = 40;
    enqueue(&client, n).await;
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let stderr = dir.path().join("workers.log");
    let config = recording_config(&dir, &log, "0.3", 8, "100ms", "1s");
    let victim = worker(&bouncer, &config, None, &stderr);
    let victim_pid = victim.pid();
    // the victim holds jobs before anyone else can take them
    let held_by_victim = format!(
        "SELECT count(*) FROM remuda.jobs j JOIN remuda.workers w ON j.worker_id = w.id
         WHERE w.pid = {victim_pid} AND j.state = 'running'"
    );
    let started = Instant::now();
    while count(&client, &held_by_victim).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the victim never ran a job: {}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    victim.kill().await;
    // what it held when it died (nobody rescues before the next worker starts)
    let held = count(&client, &held_by_victim).await;
    let survivor = worker(&bouncer, &config, None, &stderr);
    wait_completed(&client, n, &stderr, &bouncer).await;
    let rescued = count(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE errors @> '[{\"code\": \"WORKER_LOST\"}]'",
    )
    .await;
    assert!(survivor.stop().await.success());
    assert!(rescued >= 1, "a job of the killed worker was rescued");
    let runs = executions(&log);
    assert_eq!(runs.len(), n, "every job ran");
    let extra = runs.values().sum::<usize>() as i64 - n as i64;
    assert!(
        extra <= held,
        "{extra} executions beyond one per job, but the killed worker held only {held}"
    );
}
