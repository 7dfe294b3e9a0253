//! `remuda bench --workers N --processes`: N jobs on one plain queue drained by N worker
//! processes (`remuda worker --once`, each its own process, pool and backends), against the
//! same number of jobs drained by one such process in the same run. Times run from the
//! processes' start (start-up included) to the last one's exit once the queue is empty.
//! Reports `drain_jobs_per_sec` (N processes), `plain_drain_jobs_per_sec` (one process) and
//! each process's share of the jobs.

use super::KIND;
use crate::args::BenchArgs;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use remuda::{Client, Database, NewJob};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// Runs the bench and prints its report.
pub async fn run(db: Database, args: &BenchArgs) -> CliResult<Value> {
    let dir = std::env::temp_dir().join(format!("remuda-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", dir.display())))?;
    let measured = measure(&db, args, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    let report = measured?;
    if args.json {
        print_json(&report);
    } else {
        crate::out!(
            "remuda bench: {} no-op jobs on one queue, worker processes of {} slots",
            args.jobs,
            args.concurrency
        );
        crate::out!(
            "  1 process          {:>10.0} jobs/s",
            report["plain_drain_jobs_per_sec"].as_f64().unwrap_or(0.0)
        );
        crate::out!(
            "  {} processes{:<5}   {:>10.0} jobs/s   ({:.2} of one)",
            args.workers,
            "",
            report["drain_jobs_per_sec"].as_f64().unwrap_or(0.0),
            report["ratio"].as_f64().unwrap_or(0.0)
        );
        crate::out!("  shares             {}", report["shares"]);
    }
    Ok(report)
}

async fn measure(db: &Database, args: &BenchArgs, dir: &Path) -> CliResult<Value> {
    let config = dir.join("remuda.toml");
    std::fs::write(
        &config,
        format!(
            "[worker]\nconcurrency = {}\nclaim_batch = {}\n\n[tasks.{KIND}]\nbuiltin = \"noop\"\nqueue = \"bench_procs\"\n",
            args.concurrency, args.claim_batch
        ),
    )
    .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", config.display())))?;
    let url = remuda::db::conninfo(db.config(), None);
    let one = drain(db, &url, &config, args.jobs, 1).await?;
    reset(db).await?;
    let many = drain(db, &url, &config, args.jobs, args.workers).await?;
    let conn = db.conn().await?;
    let rows = conn
        .query(
            "SELECT count(*) FROM remuda.jobs WHERE state = 'completed' GROUP BY worker_id ORDER BY 1",
            &[],
        )
        .await
        .map_err(remuda::Error::from)?;
    let shares: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    let fair = args.jobs as f64 / args.workers as f64;
    let drain = args.jobs as f64 / many;
    let plain = args.jobs as f64 / one;
    Ok(json!({
        "processes": args.workers,
        "jobs": args.jobs,
        "concurrency": args.concurrency,
        "drain_jobs_per_sec": drain.round(),
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio": (drain / plain * 100.0).round() / 100.0,
        "shares": shares,
        "smallest_share_of_fair": shares.first().map_or(0.0, |&s| s as f64 / fair),
        "largest_share_of_fair": shares.last().map_or(0.0, |&s| s as f64 / fair),
    }))
}

/// Deletes the jobs and forgets the workers of the drain before, and vacuums what they
/// left, so the second drain starts from tables as clean as the first's (its dead rows and
/// index entries otherwise slowed only the drain of many processes, measured second).
async fn reset(db: &Database) -> CliResult<()> {
    let conn = db.conn().await?;
    conn.batch_execute("DELETE FROM remuda.jobs; DELETE FROM remuda.workers")
        .await
        .map_err(remuda::Error::from)?;
    // (VACUUM runs alone, outside any transaction block)
    conn.batch_execute("VACUUM (ANALYZE) remuda.jobs_live, remuda.jobs_finished, remuda.workers")
        .await
        .map_err(remuda::Error::from)?;
    Ok(())
}

/// Enqueues `jobs` no-op jobs, then starts `processes` worker processes with `--once` and
/// waits for them all to exit; seconds from their start.
async fn drain(
    db: &Database,
    url: &str,
    config: &Path,
    jobs: usize,
    processes: usize,
) -> CliResult<f64> {
    let batch: Vec<NewJob> = (0..jobs)
        .map(|i| {
            NewJob::from_json(KIND, remuda::Jsonb(format!("{{\"i\":{i}}}"))).queue("bench_procs")
        })
        .collect();
    Client::new(db.clone()).insert_bulk(&batch).await?;
    drop(batch);
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("cannot find this program to start workers: {e}")))?;
    let started = Instant::now();
    let mut children = Vec::with_capacity(processes);
    for i in 0..processes {
        let child = tokio::process::Command::new(&exe)
            .args(["worker", "--once", "--once-wait", "0s", "--name"])
            .arg(format!("bench-{i}"))
            .arg("--config")
            .arg(config)
            .env("DATABASE_URL", url)
            .env_remove("REMUDA_EMBEDDED")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CliError::Usage(format!("cannot start a worker process: {e}")))?;
        children.push(child);
    }
    let limit = Duration::from_secs(3600);
    let mut failures = Vec::new();
    for child in children {
        let waited = tokio::time::timeout(limit, child.wait_with_output()).await;
        match waited {
            Ok(Ok(out)) if out.status.success() => {}
            Ok(Ok(out)) => failures.push(format!(
                "a worker process exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Ok(Err(e)) => failures.push(format!("a worker process: {e}")),
            Err(_) => failures.push("a worker process ran for an hour".into()),
        }
    }
    if let Some(first) = failures.into_iter().next() {
        return Err(CliError::Usage(first));
    }
    Ok(started.elapsed().as_secs_f64())
}
