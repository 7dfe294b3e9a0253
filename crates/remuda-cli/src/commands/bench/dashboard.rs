//! `remuda bench --dashboard`: loads 10 × N finished jobs (completed, a few failed, over four
//! queues, finished over the last week) and N waiting ones, then times every page and API
//! list of a dashboard served on 127.0.0.1 — 50 requests each, interleaved — while a worker
//! drains the waiting jobs at full speed beside it and a feeder keeps them coming. Reports
//! p50 / p95 per path, and for `/metrics`.

use super::percentile_of;
use super::workflows::with_worker_config;
use super::KIND;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use remuda::{Client, Database, NewJob, WorkerConfig};
use remuda_dashboard::{Dashboard, Token};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// Requests per path.
const ROUNDS: usize = 50;

/// The pages and API lists timed (`{job}` is a finished job's id, `{cursor}` the second page
/// of the completed jobs).
const PATHS: [&str; 26] = [
    "/",
    "/jobs",
    "/jobs?state=completed",
    "/jobs?state=failed",
    "/jobs?state=available",
    "/jobs?state=running",
    "/jobs?state=completed&queue=bench_2",
    "/jobs?state=failed&kind=bench_noop",
    "/jobs/{job}",
    "/queues",
    "/workers",
    "/workflows",
    "/schedules",
    "/notifications",
    "/audit",
    "/maintenance",
    "/api/v1/queues",
    "/api/v1/jobs",
    "/api/v1/jobs?state=completed",
    "/api/v1/jobs?state=completed&after={cursor}",
    "/api/v1/jobs?state=available",
    "/api/v1/jobs/{job}",
    "/api/v1/workers",
    "/api/v1/workflows",
    "/api/v1/schedules",
    "/api/v1/notifications",
];

async fn load(db: &Database, waiting: usize) -> CliResult<i64> {
    let conn = db.conn().await?;
    let finished = (waiting * 10) as i64;
    let sql = |e: tokio_postgres::Error| CliError::from(remuda::Error::from(e));
    conn.execute(
        "INSERT INTO remuda.jobs (state, kind, queue, attempt, max_attempts, started_at, finished_at, args, result, errors)
         SELECT s, $2, 'bench_' || (i % 4), 1, 1, t, t, jsonb_build_object('i', i),
                CASE WHEN s = 'completed' THEN jsonb_build_object('ok', i)
                     ELSE '{\"err\": {\"code\": \"BENCH\", \"message\": \"failed on purpose\", \"data\": null}}' END,
                CASE WHEN s = 'completed' THEN '[]'::jsonb
                     ELSE jsonb_build_array(jsonb_build_object('attempt', 1, 'at', t, 'code', 'BENCH',
                                                               'message', 'failed on purpose')) END
         FROM generate_series(1, $1::bigint) i,
              LATERAL (SELECT CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'completed' END::remuda.job_state AS s,
                              now() - (i % 604800) * interval '1 second' AS t) x",
        &[&finished, &KIND],
    )
    .await
    .map_err(sql)?;
    conn.execute(
        "INSERT INTO remuda.jobs (kind, queue, args)
         SELECT $2, 'bench_' || (i % 4), jsonb_build_object('i', i) FROM generate_series(1, $1::bigint) i",
        &[&(waiting as i64), &KIND],
    )
    .await
    .map_err(sql)?;
    conn.batch_execute("VACUUM ANALYZE remuda.jobs")
        .await
        .map_err(sql)?;
    let row = conn
        .query_one(
            "SELECT min(id) FROM remuda.jobs WHERE state = 'failed'",
            &[],
        )
        .await
        .map_err(sql)?;
    Ok(row.try_get::<_, Option<i64>>(0).map_err(sql)?.unwrap_or(1))
}

/// Keeps about `level` jobs waiting until `stop`.
async fn feed(client: Client, level: i64, stop: tokio_util::sync::CancellationToken) {
    let queues = ["bench_0", "bench_1", "bench_2", "bench_3"];
    while !stop.is_cancelled() {
        let waiting: i64 = client
            .queue_stats_capped(Some(1))
            .await
            .map(|q| q.iter().map(|s| s.count(remuda::JobState::Available)).sum())
            .unwrap_or(level);
        if waiting < level {
            let batch: Vec<NewJob> = (0..5000)
                .map(|i| {
                    NewJob::from_json(KIND, remuda::Jsonb(format!("{{\"i\":{i}}}")))
                        .queue(queues[i % 4])
                })
                .collect();
            let _ = client.insert_bulk(&batch).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn run(db: Database, waiting: usize, json_out: bool) -> CliResult<Value> {
    eprintln!(
        "loading {} finished and {waiting} waiting jobs…",
        waiting * 10
    );
    let job = load(&db, waiting).await?;
    let config = WorkerConfig {
        queues: (0..4).map(|q| format!("bench_{q}")).collect(),
        ..WorkerConfig::default()
    };
    with_worker_config(&db, config, async |client| {
        measure(&db, client, job, waiting, json_out).await
    })
    .await
}

async fn measure(
    db: &Database,
    client: &Client,
    job: i64,
    waiting: usize,
    json_out: bool,
) -> CliResult<Value> {
    let token =
        Token::random("bench").map_err(|e| CliError::Usage(format!("cannot make a token: {e}")))?;
    let secret = token.secret().to_string();
    let router = Dashboard::new(Client::new(db.sibling(8)))
        .token(token)
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::Usage(format!("the bench dashboard cannot listen: {e}")))?;
    let base = format!(
        "http://{}",
        listener
            .local_addr()
            .map_err(|e| CliError::Usage(e.to_string()))?
    );
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| CliError::Usage(format!("the bench HTTP client: {e}")))?;
    let get = |path: String| {
        let request = http.get(format!("{base}{path}")).bearer_auth(&secret);
        async move {
            let started = Instant::now();
            let response = request
                .send()
                .await
                .map_err(|e| CliError::Usage(format!("GET {path}: {e}")))?;
            let status = response.status();
            let body = response
                .text()
                .await
                .map_err(|e| CliError::Usage(format!("GET {path}: {e}")))?;
            if !status.is_success() {
                return Err(CliError::Usage(format!("GET {path}: {status}: {body}")));
            }
            Ok::<_, CliError>((started.elapsed().as_secs_f64() * 1000.0, body))
        }
    };
    let (_, first) = get("/api/v1/jobs?state=completed&limit=100".into()).await?;
    let first: Value = serde_json::from_str(&first)
        .map_err(|e| CliError::Usage(format!("the API's page is not JSON: {e}")))?;
    let cursor = first["next"].as_str().unwrap_or_default().to_string();
    let stop = tokio_util::sync::CancellationToken::new();
    let feeder = tokio::spawn(feed(client.clone(), (waiting / 2) as i64, stop.clone()));
    let started = Instant::now();
    let paths: Vec<String> = PATHS
        .iter()
        .map(|p| {
            p.replace("{job}", &job.to_string())
                .replace("{cursor}", &cursor)
        })
        .chain(std::iter::once("/metrics".to_string()))
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); paths.len()];
    for _ in 0..ROUNDS {
        for (i, path) in paths.iter().enumerate() {
            times[i].push(get(path.clone()).await?.0);
        }
    }
    let elapsed = started.elapsed();
    // the jobs completed meanwhile (the loaded ones finished over a week: a handful fall in)
    let recent = client.throughput(elapsed).await?;
    let drain = recent.iter().map(|q| q.completed).sum::<i64>() as f64 / elapsed.as_secs_f64();
    stop.cancel();
    let _ = feeder.await;
    server.abort();
    Ok(report(&paths, &mut times, waiting, drain, json_out))
}

fn report(
    paths: &[String],
    times: &mut [Vec<f64>],
    waiting: usize,
    drain: f64,
    json_out: bool,
) -> Value {
    let mut pages = Map::new();
    let mut metrics = json!({});
    for (path, t) in paths.iter().zip(times.iter_mut()) {
        t.sort_by(f64::total_cmp);
        let entry = json!({"p50_ms": round(percentile_of(t, 0.50)), "p95_ms": round(percentile_of(t, 0.95))});
        if path == "/metrics" {
            metrics = entry;
        } else {
            pages.insert(path.clone(), entry);
        }
    }
    let all = json!({
        "finished_jobs": waiting * 10, "waiting_jobs": waiting, "requests_per_path": ROUNDS,
        "drain_jobs_per_sec": drain.round(), "pages": pages, "metrics": metrics,
    });
    if json_out {
        print_json(&all);
        return all;
    }
    crate::out!("{} finished and {waiting} waiting jobs; {ROUNDS} requests per path while a worker drained {drain:.0} jobs/s", waiting * 10);
    crate::out!("{:<52}  {:>8}  {:>8}", "PATH", "P50 MS", "P95 MS");
    for (path, entry) in pages
        .iter()
        .chain(std::iter::once((&"/metrics".to_string(), &metrics)))
    {
        crate::out!("{path:<52}  {:>8}  {:>8}", entry["p50_ms"], entry["p95_ms"]);
    }
    all
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}
