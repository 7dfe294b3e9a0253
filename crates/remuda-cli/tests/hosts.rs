//! The cluster across machines: eight worker processes, each on a host of its own (a network
//! namespace with a veth link to the database's namespace, `remuda::testing::Hosts`), share
//! one PostgreSQL over that network. Every job runs once, a cap on running jobs holds across
//! them, and a host cut off for longer than `rescue_after` fences its worker, whose jobs are
//! rescued by the others. Skipped, saying why, where network namespaces cannot be made.

mod common;

use common::{
    count, executions_per_job as executions, recording_config, TempDir, WorkerProcess, BIN,
};
use remuda::testing::{Hosts, PrivateCluster};
use std::path::Path;
use std::time::{Duration, Instant};

/// The cluster moved into the database's namespace and `n` hosts, or `None` (printed why).
async fn network(n: usize) -> Option<(PrivateCluster, Hosts)> {
    let hosts = match Hosts::create(n) {
        Ok(hosts) => hosts,
        Err(e) => {
            eprintln!("skipped: cannot create network namespaces here ({e})");
            return None;
        }
    };
    let options = remuda::db::cluster::ClusterOptions {
        files: vec![Hosts::pg_hba()],
        ..Default::default()
    };
    let cluster = PrivateCluster::start_with(&options)
        .await
        .expect("private cluster");
    hosts
        .move_database(&cluster)
        .await
        .expect("the database in its namespace");
    Some((cluster, hosts))
}

/// A worker process on host `i`, its stderr appended to `log`.
fn worker(hosts: &Hosts, i: usize, config: &Path, log: &Path) -> WorkerProcess {
    let mut command = hosts.command(i, Path::new(BIN));
    command.env_remove("REMUDA_DIRECT_URL");
    let name = format!("host{i}");
    WorkerProcess::spawn(command, config, &["--name", &name], &hosts.conninfo(), log)
}

async fn enqueue(client: &remuda::Client, kind: &str, queue: &str, n: usize) {
    let jobs: Vec<remuda::NewJob> = (0..n)
        .map(|i| {
            remuda::NewJob::new(kind, &serde_json::json!({ "i": i }))
                .expect("job")
                .queue(queue)
        })
        .collect();
    client.insert_bulk(&jobs).await.expect("enqueue");
}

/// Waits up to `limit` until `n` jobs are completed, sampling the capped queue's running
/// jobs meanwhile; returns the most seen running there.
async fn drain(client: &remuda::Client, n: usize, limit: Duration, stderr: &Path) -> i64 {
    let started = Instant::now();
    let mut most = 0;
    while count(
        client,
        "SELECT count(*) FROM remuda.jobs WHERE state = 'completed'",
    )
    .await
        < n as i64
    {
        most = most.max(
            count(
                client,
                "SELECT count(*) FROM remuda.jobs WHERE queue = 'capped' AND state = 'running'",
            )
            .await,
        );
        assert!(
            started.elapsed() < limit,
            "not every job completed; the workers said: {}",
            std::fs::read_to_string(stderr).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_hosts_run_every_job_once_and_hold_a_cap() {
    let Some((cluster, hosts)) = network(8).await else {
        return;
    };
    // the test reads and writes through the cluster's socket; the workers only over the network
    let client = remuda::Client::connect(&cluster.conninfo())
        .await
        .expect("client");
    client
        .change_queue(
            "capped",
            &remuda::QueueChange {
                max_running: Some(Some(3)),
                ..Default::default()
            },
        )
        .await
        .expect("cap");
    let (plain, capped) = (800, 200);
    enqueue(&client, "record", "default", plain).await;
    enqueue(&client, "record_capped", "capped", capped).await;
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let stderr = dir.path().join("workers.log");
    let config = recording_config(&dir, &log, "0.05", 4, "200ms", "5s");
    let workers: Vec<WorkerProcess> = (0..8)
        .map(|i| worker(&hosts, i, &config, &stderr))
        .collect();
    let most = drain(&client, plain + capped, Duration::from_secs(180), &stderr).await;
    for w in workers {
        assert!(w.stop().await.success(), "a worker exited with an error");
    }
    assert!(
        most <= 3,
        "{most} jobs of the capped queue ran at once (cap 3)"
    );
    let runs = executions(&log);
    assert_eq!(runs.len(), plain + capped, "every job ran");
    let twice: Vec<_> = runs.iter().filter(|(_, &c)| c > 1).collect();
    assert!(twice.is_empty(), "jobs ran more than once: {twice:?}");
    let hosts_used = count(
        &client,
        "SELECT count(DISTINCT worker_id) FROM remuda.jobs WHERE state = 'completed'",
    )
    .await;
    assert!(
        hosts_used >= 4,
        "the work spread over the hosts ({hosts_used} did some)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_cut_off_longer_than_rescue_after_is_fenced_and_its_jobs_rescued() {
    let Some((cluster, hosts)) = network(3).await else {
        return;
    };
    let client = remuda::Client::connect(&cluster.conninfo())
        .await
        .expect("client");
    let n = 60;
    enqueue(&client, "record", "default", n).await;
    let dir = TempDir::new();
    let log = dir.path().join("executions.log");
    let stderr = dir.path().join("workers.log");
    let cut_log = dir.path().join("cut.log");
    let config = recording_config(&dir, &log, "1", 4, "200ms", "2s");
    // host 0 starts first and takes jobs; then it is cut off, and hosts 1 and 2 come
    let cut_worker = worker(&hosts, 0, &config, &cut_log);
    let held_by_host0 =
        "SELECT count(*) FROM remuda.jobs j JOIN remuda.workers w ON j.worker_id = w.id
         WHERE w.name = 'host0' AND j.state = 'running'";
    let started = Instant::now();
    while count(&client, held_by_host0).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "host 0 never ran a job: {}",
            std::fs::read_to_string(&cut_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hosts.cut(0).expect("cut host 0");
    let held = count(&client, held_by_host0).await;
    let others: Vec<WorkerProcess> = (1..3)
        .map(|i| worker(&hosts, i, &config, &stderr))
        .collect();
    // cut for three times rescue_after: declared dead and rescued meanwhile
    let until_rescued = Instant::now();
    while count(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE errors @> '[{\"code\": \"WORKER_LOST\"}]'",
    )
    .await
        == 0
    {
        if until_rescued.elapsed() > Duration::from_secs(30) {
            let conn = client.database().conn().await.expect("conn");
            let rows = conn
                .query(
                    "SELECT w.name || ' hb ' || w.heartbeat_at::text || ' running ' || w.running || ' now ' || now()::text || coalesce(' leader ' || (SELECT l.leader_id FROM remuda.leader l LIMIT 1), '') || ' ' || w.id FROM remuda.workers w",
                    &[],
                )
                .await
                .expect("workers");
            let mut workers: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
            let rows = conn
                .query(
                    "SELECT coalesce(client_addr::text, 'local') || ' ' || coalesce(state, '') || ' ' || coalesce(wait_event_type, '') || ' ' || left(query, 60) FROM pg_stat_activity WHERE datname = 'remuda'",
                    &[],
                )
                .await
                .expect("activity");
            workers.extend(rows.iter().map(|r| r.get::<_, String>(0)));
            panic!(
                "host 0's jobs were not rescued; workers {workers:?}; they said: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(until_rescued.elapsed())).await;
    hosts.heal(0).expect("heal host 0");
    drain(&client, n, Duration::from_secs(180), &stderr).await;
    for w in others {
        assert!(w.stop().await.success(), "a worker exited with an error");
    }
    let _ = cut_worker.stop().await;
    let said = std::fs::read_to_string(&cut_log).unwrap_or_default();
    assert!(
        said.contains("no heartbeat got through"),
        "the cut-off worker fenced itself: {said}"
    );
    let runs = executions(&log);
    assert_eq!(runs.len(), n, "every job ran");
    let extra = runs.values().sum::<usize>() as i64 - n as i64;
    assert!(
        extra <= held,
        "{extra} executions beyond one per job, but host 0 held only {held} when cut off"
    );
    let completed = count(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE state = 'completed'",
    )
    .await;
    assert_eq!(completed, n as i64);
}
