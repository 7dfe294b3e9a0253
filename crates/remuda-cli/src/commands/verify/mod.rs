//! `remuda verify`: this build of remuda under faults, checked. It starts private PostgreSQL
//! clusters of its own (never the configured database): a primary in verification mode, and
//! with `--failover` a synchronous standby. Worker processes of this binary run command
//! tasks that log every execution, while a feeder enqueues a mix of jobs and random
//! workflow runs and the faults go on: workers SIGKILLed, workers frozen past `rescue_after`
//! and woken, every session terminated, the primary restarted as after a crash, and the
//! primary killed and its standby promoted. Then the load drains, and the history checker,
//! the workflow model and the execution log judge what happened.

mod clusters;
mod fleet;
mod load;
mod report;
mod shapes;
mod tasks;

use crate::args::VerifyArgs;
use crate::error::CliResult;
use crate::output::print_json;
use clusters::Clusters;
use fleet::Fleet;
use report::VerifyReport;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long the load may take to drain after the faults stop.
const DRAIN: Duration = Duration::from_secs(120);

/// Runs a verification and prints its report: 0 when it passed, 1 when it did not.
pub async fn run(args: VerifyArgs) -> CliResult<u8> {
    if args.workers == 0 {
        return Err(crate::error::CliError::Usage(
            "--workers must be at least 1".into(),
        ));
    }
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let home = std::env::temp_dir().join(format!("remuda-verify-{}-{seed:x}", std::process::id()));
    std::fs::create_dir_all(&home)
        .map_err(|e| remuda::Error::Setup(format!("cannot create {}: {e}", home.display())))?;
    if !args.json {
        crate::out!(
            "verify: seed {seed}, {} s, {} workers{}, in {}",
            args.duration.as_secs(),
            args.workers,
            if args.failover { ", with failover" } else { "" },
            home.display()
        );
    }
    let clusters = Clusters::start(&home, args.failover).await;
    let result = match clusters {
        Ok(mut clusters) => {
            // SIGINT or SIGTERM ends the run: the workers die with their handles, the
            // clusters are stopped here, nothing is left running
            let result = tokio::select! {
                result = verify(&args, seed, &home, &mut clusters) => result,
                _ = remuda::worker::shutdown_signal() => Err(remuda::Error::Setup("interrupted".into())),
            };
            clusters.stop();
            result
        }
        Err(e) => Err(e),
    };
    if !args.keep {
        let _ = std::fs::remove_dir_all(&home);
    }
    let report = result?;
    if args.json {
        print_json(&report);
    } else {
        print_text(&report);
    }
    Ok(if report.passed() { 0 } else { 1 })
}

async fn verify(
    args: &VerifyArgs,
    seed: u64,
    home: &Path,
    clusters: &mut Clusters,
) -> remuda::Result<VerifyReport> {
    let log = home.join("executions.log");
    let config = home.join("remuda.toml");
    std::fs::write(&config, tasks::config(&log))
        .map_err(|e| remuda::Error::Setup(format!("cannot write {}: {e}", config.display())))?;
    let url = clusters.url();
    let mut fleet = Fleet::start(&url, &config, &home.join("workers.log"), args.workers)?;
    let client = remuda::Client::connect(&url).await?;
    let stop = CancellationToken::new();
    let feeder = tokio::spawn(load::feed(client.clone(), seed, stop.clone(), DRAIN));
    let mut report = VerifyReport {
        seed,
        duration_secs: args.duration.as_secs(),
        ..VerifyReport::default()
    };
    let faulted = inject(args, seed, clusters, &mut fleet, &client, &mut report).await;
    stop.cancel();
    let fed = feeder
        .await
        .map_err(|e| remuda::Error::Setup(format!("the feeder failed: {e}")))?;
    faulted?;
    fleet.thaw_due(true);
    drain(&client, &mut fleet).await?;
    report.unclean_exits = fleet.stop().await.len();
    report.retried = fed.retried;
    report.retried_runs = fed.retried_runs;
    let check = remuda::verify::check(client.database(), Duration::from_secs(5)).await?;
    report.add_check(&check);
    report::compare(&client, &fed, &mut report).await?;
    report::duplicates(&client, &log, &mut report).await?;
    if !report.passed() {
        histories(&client, &report).await;
    }
    Ok(report)
}

/// The faults, one every 1.5 to 4 s until the duration has passed; the database's own
/// (restarts, failovers) spread evenly, at most one each 15 s.
async fn inject(
    args: &VerifyArgs,
    seed: u64,
    clusters: &mut Clusters,
    fleet: &mut Fleet,
    client: &remuda::Client,
    report: &mut VerifyReport,
) -> remuda::Result<()> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    let started = Instant::now();
    // with a standby, at least one failover and one restart
    let least = if args.failover { 2 } else { 1 };
    let database_events = (args.duration.as_secs() / 30).max(least) as u32;
    let gap = args.duration / (database_events + 1);
    let mut next_database = started + gap;
    let mut next = started + Duration::from_millis(rng.u64(1500..4000));
    let mut failover_next = args.failover;
    while started.elapsed() < args.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        fleet.thaw_due(false);
        fleet.replace_exited()?;
        let now = Instant::now();
        if now >= next_database && report.db_restarts + report.failovers < database_events as usize
        {
            let held = running(client, None).await;
            if failover_next && clusters.fail_over().await? {
                report.failovers += 1;
            } else {
                clusters.restart().await?;
                report.db_restarts += 1;
            }
            report.duplicate_bound += held;
            failover_next = args.failover && !failover_next;
            // on a fixed beat from the start, however long the last one took
            next_database += gap;
            continue;
        }
        if now < next {
            continue;
        }
        next = now + Duration::from_millis(rng.u64(1500..4000));
        match rng.u32(..100) {
            0..=44 => {
                if let Some(pid) = fleet.pick() {
                    let held = running(client, Some(pid)).await;
                    fleet.kill(pid).await?;
                    report.kills += 1;
                    report.duplicate_bound += held;
                }
            }
            45..=69 => {
                if let Some(pid) = fleet.pick() {
                    let held = running(client, Some(pid)).await;
                    let wake =
                        now + tasks::RESCUE_AFTER + Duration::from_millis(rng.u64(1000..3000));
                    if fleet.freeze(pid, wake) {
                        report.stops += 1;
                        report.duplicate_bound += held;
                    }
                }
            }
            _ => {
                let held = running(client, None).await;
                if clusters.terminate_sessions().await.is_ok() {
                    report.terminations += 1;
                    report.duplicate_bound += held;
                }
            }
        }
    }
    Ok(())
}

/// Running jobs (of worker process `pid`, or all): what a fault can make run twice. Read
/// generously: a query that fails counts nothing, so it is tried a few times.
async fn running(client: &remuda::Client, pid: Option<u32>) -> i64 {
    let pid = pid.map(|p| p as i32);
    for _ in 0..5 {
        let counted = async {
            let conn = client.database().conn().await.ok()?;
            let row = conn
                .query_one(
                    "SELECT count(*) FROM remuda.jobs j LEFT JOIN remuda.workers w ON j.worker_id = w.id
                     WHERE j.state = 'running' AND ($1::int IS NULL OR w.pid = $1)",
                    &[&pid],
                )
                .await
                .ok()?;
            row.try_get::<_, i64>(0).ok()
        };
        if let Ok(Some(n)) = tokio::time::timeout(Duration::from_secs(2), counted).await {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    0
}

/// Waits until no job waits or runs and no run is running, for at most [`DRAIN`].
async fn drain(client: &remuda::Client, fleet: &mut Fleet) -> remuda::Result<()> {
    let started = Instant::now();
    while started.elapsed() < DRAIN {
        fleet.replace_exited()?;
        let busy = async {
            let conn = client.database().conn().await.ok()?;
            let row = conn
                .query_one(
                    "SELECT (SELECT count(*) FROM remuda.jobs WHERE NOT remuda.is_final(state))
                          + (SELECT count(*) FROM remuda.workflows WHERE state IN ('running', 'paused'))",
                    &[],
                )
                .await
                .ok()?;
            row.try_get::<_, i64>(0).ok()
        };
        if let Ok(Some(0)) = tokio::time::timeout(Duration::from_secs(5), busy).await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// Prints the recorded history of the first jobs and runs found wrong, to stderr.
async fn histories(client: &remuda::Client, report: &VerifyReport) {
    let Ok(conn) = client.database().conn().await else {
        return;
    };
    for finding in report.findings.iter().take(20) {
        let id = |word: &str| {
            finding
                .split_once(&format!("{word} "))
                .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<i64>().ok())
        };
        let (sql, id) = match (id("job"), id("run")) {
            (Some(job), _) => (
                "SELECT format('%s attempt %s: %s -> %s (worker %s, token %s, xid %s)', at, attempt,
                               coalesce(from_state, 'new'), coalesce(to_state, 'deleted'), worker_id, token, xid)
                 FROM remuda.history WHERE job_id = $1 ORDER BY seq",
                job,
            ),
            (None, Some(run)) => (
                "SELECT format('%s %s: %s -> %s (xid %s)', at, coalesce('node ' || node, 'run'),
                               coalesce(from_state, 'new'), coalesce(to_state, 'deleted'), xid)
                 FROM remuda.run_history WHERE run_id = $1 ORDER BY seq",
                run,
            ),
            _ => continue,
        };
        eprintln!("{finding}");
        if let Ok(rows) = conn.query(sql, &[&id]).await {
            for row in rows {
                eprintln!("    {}", row.try_get::<_, String>(0).unwrap_or_default());
            }
        }
    }
}

fn print_text(report: &VerifyReport) {
    crate::out!(
        "{} jobs, {} workflow runs, {} executions; faults: {} kills, {} stops, {} session terminations, {} database restarts, {} failovers",
        report.jobs,
        report.workflows,
        report.executions,
        report.kills,
        report.stops,
        report.terminations,
        report.db_restarts,
        report.failovers
    );
    crate::out!(
        "lost {}, illegal transitions {}, accepted twice {}, workflow mismatches {}, stuck {}, duplicate runs {} (bound {})",
        report.lost,
        report.illegal_transitions,
        report.accepted_twice,
        report.workflow_mismatches,
        report.stuck,
        report.duplicate_runs,
        report.duplicate_bound
    );
    for finding in &report.findings {
        crate::out!("{finding}");
    }
    crate::out!(
        "{}",
        if report.passed() {
            "passed"
        } else {
            "FAILED (seed {seed} repeats the choices)"
        }
        .replace("{seed}", &report.seed.to_string())
    );
}
