//! `remuda bench --notify N`: N no-op jobs, each with a webhook to a receiver this bench
//! starts on 127.0.0.1, drained by one worker whose dispatcher delivers them; beside a plain
//! drain of as many jobs without notifications, measured in the same run. Reports
//! deliveries/s (enqueue to the last delivery) and the latency from each job's final state
//! to its delivery (p50, p99).

use super::percentile_of;
use super::workflows::{plain_drain, with_worker_config};
use super::KIND;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use remuda::notify::{NotificationConfig, NotifyTarget};
use remuda::{Database, NewJob, WorkerConfig};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The latencies (ms, final state to receipt) of the deliveries so far.
type Latencies = Arc<Mutex<Vec<f64>>>;

/// Starts the receiver: 200 to every request, its latency recorded.
async fn receiver() -> CliResult<(String, Latencies, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::Usage(format!("the bench receiver cannot listen: {e}")))?;
    let url = format!(
        "http://{}/bench",
        listener
            .local_addr()
            .map_err(|e| CliError::Usage(format!("the bench receiver: {e}")))?
    );
    let latencies: Latencies = Arc::default();
    let seen = latencies.clone();
    let handle = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let _ = serve(stream, seen).await;
            });
        }
    });
    Ok((url, latencies, handle))
}

async fn serve(stream: TcpStream, seen: Latencies) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut line = String::new();
    loop {
        let mut length = 0;
        line.clear();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            if read.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        read.read_exact(&mut body).await?;
        if let Some(ms) = latency(&body) {
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(ms);
        }
        write
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await?;
    }
}

/// Milliseconds from the body's `finished_at` to now.
fn latency(body: &[u8]) -> Option<f64> {
    let event: Value = serde_json::from_slice(body).ok()?;
    let finished = event["data"]["finished_at"].as_str()?;
    let at = chrono::DateTime::parse_from_rfc3339(finished).ok()?;
    let ms = (chrono::Utc::now() - at.with_timezone(&chrono::Utc)).num_microseconds()? as f64;
    Some(ms / 1000.0)
}

/// Runs the notification bench and prints its report.
pub async fn run(db: Database, jobs: usize, json_out: bool) -> CliResult<Value> {
    let plain = plain_drain(&db, jobs).await?;
    let (url, latencies, server) = receiver().await?;
    let config = WorkerConfig {
        notifications: NotificationConfig {
            secrets: vec![remuda::notify::Secret::random().map_err(|e| {
                CliError::Usage(format!(
                    "cannot read random bytes for the bench's secret: {e}"
                ))
            })?],
            allow_private_targets: true,
            ..NotificationConfig::default()
        },
        ..WorkerConfig::default()
    };
    let target = NotifyTarget::webhook(&url);
    let secs = with_worker_config(&db, config, async |client| {
        let batch: Vec<NewJob> = (0..jobs)
            .map(|i| {
                NewJob::from_json(KIND, remuda::Jsonb(format!("{{\"i\":{i}}}")))
                    .notify(target.clone())
            })
            .collect();
        let started = Instant::now();
        client.insert_many(&batch).await?;
        let limit = Duration::from_secs(600);
        while latencies.lock().unwrap_or_else(|e| e.into_inner()).len() < jobs {
            if started.elapsed() > limit {
                return Err(CliError::Usage(format!(
                    "the bench's deliveries did not all arrive within {}",
                    remuda::duration::format(limit)
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(started.elapsed().as_secs_f64())
    })
    .await?;
    server.abort();
    let mut delivered = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    delivered.sort_by(f64::total_cmp);
    let rate = jobs as f64 / secs;
    let report = json!({
        "notify": jobs,
        "seconds": secs,
        "deliveries_per_sec": rate.round(),
        "delivery_ms": {
            "p50": percentile_of(&delivered, 0.5),
            "p99": percentile_of(&delivered, 0.99),
        },
        "plain_drain_jobs_per_sec": plain.round(),
        "ratio_to_plain": (rate / plain * 1000.0).round() / 1000.0,
    });
    if json_out {
        print_json(&report);
    } else {
        crate::out!(
            "remuda bench --notify: {jobs} jobs with a webhook each, delivered in {secs:.3} s"
        );
        crate::out!("  deliveries         {rate:>10.0} /s");
        crate::out!(
            "  delivery latency   p50 {:.1} ms, p99 {:.1} ms (final state to receipt)",
            report["delivery_ms"]["p50"].as_f64().unwrap_or(0.0),
            report["delivery_ms"]["p99"].as_f64().unwrap_or(0.0)
        );
        crate::out!("  plain drain        {plain:>10.0} jobs/s (as many jobs without notifications, same run)");
    }
    Ok(report)
}
