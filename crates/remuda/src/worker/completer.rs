//! The batching completer: executors hand it each attempt's outcome and it writes them many
//! at a time with one `UPDATE … FROM unnest(…)` (`complete_jobs.sql`). While one write is in
//! flight the next batch accumulates, so under load batches grow by themselves and when idle
//! a lone completion is written at once (what `wait` needs). Writes that fail for a transient
//! reason are retried; a batch the database refuses as data is written one outcome at a time,
//! and an outcome that still cannot be written fails its job with `OUTCOME_UNWRITABLE`, so one
//! bad outcome never blocks the others. At shutdown the worker gives the last writes a
//! deadline (`give_up`); whatever is left is rescued once the worker is gone.

use super::WorkerStats;
use crate::db::{Database, Jsonb};
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The end of one attempt, as the completer writes it.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A state change of a running job: completed, failed, or back to scheduled/available.
    Write {
        id: i64,
        attempt: i32,
        /// The claim's time (with the attempt, the guard of the write).
        started_at: DateTime<Utc>,
        state: &'static str,
        result: Option<Jsonb>,
        error: Option<Jsonb>,
        run_at: Option<DateTime<Utc>>,
    },
    /// Give the job back untouched (shutdown, or a stop that may not have been a real
    /// cancel): the attempt is not counted. Guarded, so a job really cancelled stays so.
    Release {
        id: i64,
        attempt: i32,
        started_at: DateTime<Utc>,
    },
    /// Everything sent before this is written (or given up) when the sender hears back.
    Flush(tokio::sync::oneshot::Sender<()>),
    /// Everything sent before this is written; the completer stops.
    Stop,
}

impl Outcome {
    /// Bytes of JSON this outcome sends.
    fn size(&self) -> usize {
        match self {
            Outcome::Write { result, error, .. } => {
                result.as_ref().map_or(0, Jsonb::len) + error.as_ref().map_or(0, Jsonb::len)
            }
            _ => 0,
        }
    }
}

/// Most outcomes written by one statement.
pub(crate) const MAX_BATCH: usize = 5000;
/// Most bytes of results and errors written by one statement (results may each be up to the
/// payload limit; PostgreSQL refuses messages over 1 GiB).
const MAX_BATCH_BYTES: usize = 64 << 20;

pub(crate) async fn run(
    db: Database,
    worker_id: Arc<str>,
    mut rx: mpsc::Receiver<Outcome>,
    give_up: CancellationToken,
    stats: Arc<WorkerStats>,
) {
    let mut batch = Vec::with_capacity(256);
    let mut flushes = Vec::new();
    loop {
        let Some(first) = rx.recv().await else { return };
        let mut stop = false;
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some(outcome) = next.take() {
            match outcome {
                Outcome::Stop => stop = true,
                Outcome::Flush(done) => flushes.push(done),
                outcome => {
                    bytes += outcome.size();
                    batch.push(outcome);
                }
            }
            if stop || batch.len() >= MAX_BATCH || bytes >= MAX_BATCH_BYTES {
                break;
            }
            next = rx.try_recv().ok();
        }
        if !batch.is_empty() {
            write_with_retry(&db, &worker_id, &batch, &give_up, &stats).await;
            batch.clear();
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
        if stop {
            return;
        }
    }
}

/// Writes a batch: transient failures are retried until `give_up`, a refused batch is split,
/// and a refused single outcome fails its job instead.
async fn write_with_retry(
    db: &Database,
    worker_id: &str,
    batch: &[Outcome],
    give_up: &CancellationToken,
    stats: &WorkerStats,
) {
    let mut delay = Duration::from_millis(50);
    loop {
        let result = tokio::select! {
            result = write(db, worker_id, batch, stats) => result,
            // a write stuck on a dead connection must not hold the shutdown
            _ = give_up.cancelled() => {
                tracing::error!("remuda completer: giving up on {} outcomes at shutdown; their jobs will be rescued", batch.len());
                return;
            }
        };
        match result {
            Ok(()) => return,
            Err(e) if e.is_transient() => {
                tracing::warn!(
                    "remuda completer: cannot write {} outcomes: {e}; retrying in {delay:?}",
                    batch.len()
                );
                tokio::select! {
                    _ = tokio::time::sleep(jittered(delay)) => {}
                    _ = give_up.cancelled() => {}
                }
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
            Err(e) if batch.len() > 1 => {
                tracing::warn!("remuda completer: a batch of {} outcomes was refused ({e}); writing them one by one", batch.len());
                for outcome in batch {
                    Box::pin(write_with_retry(
                        db,
                        worker_id,
                        std::slice::from_ref(outcome),
                        give_up,
                        stats,
                    ))
                    .await;
                }
                return;
            }
            Err(e) => {
                let Some(fallback) = unwritable(&batch[0], &e) else {
                    return;
                };
                tracing::error!("remuda completer: an outcome was refused ({e}); failing its job with OUTCOME_UNWRITABLE");
                write_fallback(db, worker_id, fallback, give_up, stats).await;
                return;
            }
        }
    }
}

/// Writes the replacement of a refused outcome, retrying transient failures until `give_up`.
async fn write_fallback(
    db: &Database,
    worker_id: &str,
    fallback: Outcome,
    give_up: &CancellationToken,
    stats: &WorkerStats,
) {
    let mut delay = Duration::from_millis(50);
    loop {
        match write(db, worker_id, std::slice::from_ref(&fallback), stats).await {
            Ok(()) => return,
            Err(e) if e.is_transient() && !give_up.is_cancelled() => {
                tokio::select! {
                    _ = tokio::time::sleep(jittered(delay)) => {}
                    _ = give_up.cancelled() => {}
                }
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
            Err(e) => {
                tracing::error!("remuda completer: cannot fail the job either ({e}); it stays running until this worker stops");
                return;
            }
        }
    }
}

/// The outcome written instead of one the database refused: the job fails, saying why.
fn unwritable(outcome: &Outcome, error: &Error) -> Option<Outcome> {
    let Outcome::Write {
        id,
        attempt,
        started_at,
        ..
    } = outcome
    else {
        return None;
    };
    let message = format!("the outcome of this attempt could not be stored: {error}");
    let result = serde_json::json!({"err": {"code": "OUTCOME_UNWRITABLE", "message": message, "data": null}});
    Some(Outcome::Write {
        id: *id,
        attempt: *attempt,
        started_at: *started_at,
        state: "failed",
        result: Some(Jsonb(result.to_string())),
        // not appended to `errors`: the refusal may have been about that very array
        error: None,
        run_at: None,
    })
}

/// Longest wait between retries of a write while the database fails.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// `delay` plus up to 25% at random, so that workers cut off together do not retry in step.
fn jittered(delay: Duration) -> Duration {
    delay + delay.mul_f64(fastrand::f64() / 4.0)
}

async fn write(
    db: &Database,
    worker_id: &str,
    batch: &[Outcome],
    stats: &WorkerStats,
) -> Result<()> {
    let n = batch.len();
    let mut ids = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut states = Vec::with_capacity(n);
    let mut results = Vec::with_capacity(n);
    let mut errors = Vec::with_capacity(n);
    let mut run_ats = Vec::with_capacity(n);
    let mut released = Vec::new();
    let mut released_attempts = Vec::new();
    let mut started = Vec::with_capacity(n);
    let mut released_started = Vec::new();
    for outcome in batch {
        match outcome {
            Outcome::Write {
                id,
                attempt,
                started_at,
                state,
                result,
                error,
                run_at,
            } => {
                ids.push(*id);
                attempts.push(*attempt);
                started.push(*started_at);
                states.push(*state);
                results.push(result.as_ref());
                errors.push(error.as_ref());
                run_ats.push(*run_at);
            }
            Outcome::Release {
                id,
                attempt,
                started_at,
            } => {
                released.push(*id);
                released_attempts.push(*attempt);
                released_started.push(*started_at);
            }
            Outcome::Stop | Outcome::Flush(_) => {}
        }
    }
    let conn = db.conn().await?;
    if !ids.is_empty() {
        let statement = conn.prepare_cached(sql::COMPLETE_JOBS).await?;
        let written = conn
            .execute(
                &statement,
                &[
                    &ids, &attempts, &states, &results, &errors, &run_ats, &worker_id, &started,
                ],
            )
            .await?;
        if written < ids.len() as u64 {
            // stale: the job was cancelled, or rescued while this worker could not heartbeat
            // (or an earlier try of this very write committed and its answer was lost)
            let rejected = ids.len() as u64 - written;
            stats.rejected.fetch_add(rejected, Ordering::Relaxed);
            tracing::warn!(
                "remuda completer: {rejected} of {} outcomes rejected as stale: those jobs were no longer this worker's at that attempt (cancelled, or rescued after this worker went silent)",
                ids.len()
            );
        }
    }
    if !released.is_empty() {
        let statement = conn.prepare_cached(sql::RELEASE_JOBS).await?;
        conn.execute(
            &statement,
            &[&released, &released_attempts, &worker_id, &released_started],
        )
        .await?;
    }
    Ok(())
}
