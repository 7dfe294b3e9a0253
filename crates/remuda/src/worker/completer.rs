//! The batching completer: executors hand it each attempt's outcome and it writes them many
//! at a time with one `UPDATE … FROM unnest(…)`: successes, the bulk of the work, through the
//! lean `complete_ok.sql`, which finds each row where its claim left it; everything else
//! through `complete_jobs.sql`. While one write is in
//! flight the next batch accumulates, so under load batches grow by themselves and when idle
//! a lone completion is written at once (what `wait` needs). Writes that fail for any reason
//! but their data are retried with backoff (a permission or a feature missing during a
//! rolling deploy says nothing about the outcome); a batch the database refuses as data
//! (SQLSTATE 22, 23, 54, see `Error::is_refused_data`) is written one outcome at a time,
//! and an outcome that still cannot be written fails its job with `OUTCOME_UNWRITABLE`, so one
//! bad outcome never blocks the others. At shutdown the worker gives the last writes a
//! deadline (`give_up`); whatever is left is rescued once the worker is gone.

use super::WorkerStats;
use crate::db::{Database, Jsonb, Tid};
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
        /// Where the claim left the row (a hint: see `complete_ok.sql`).
        tid: Tid,
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
            Err(e) if !e.is_refused_data() => {
                if e.is_transient() {
                    tracing::warn!(
                        "remuda completer: cannot write {} outcomes: {e}; retrying in {delay:?}",
                        batch.len()
                    );
                } else {
                    tracing::error!(
                        "remuda completer: the database refused {} outcomes for a reason that is not their data: {e}; retrying in {delay:?} (their jobs stay running until it accepts them)",
                        batch.len()
                    );
                }
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
            Err(e) if !e.is_refused_data() && !give_up.is_cancelled() => {
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
        tid,
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
        tid: *tid,
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

/// Writes one batch: successes through `complete_ok.sql` (found by their place), the rest and
/// the successes it missed through `complete_jobs.sql` (found by id), releases through
/// `release_jobs.sql`. Outcomes neither statement could write were stale, and are counted.
async fn write(
    db: &Database,
    worker_id: &str,
    batch: &[Outcome],
    stats: &WorkerStats,
) -> Result<()> {
    let mut ok = OkColumns::default();
    let mut rest = WriteColumns::default();
    let mut released = ReleaseColumns::default();
    for outcome in batch {
        match outcome {
            Outcome::Write {
                id,
                attempt,
                started_at,
                tid,
                state: "completed",
                result,
                error: None,
                run_at: None,
            } => ok.push(*tid, *id, *attempt, *started_at, result.as_ref()),
            Outcome::Write { .. } => rest.push(outcome),
            Outcome::Release {
                id,
                attempt,
                started_at,
            } => released.push(*id, *attempt, *started_at),
            Outcome::Stop | Outcome::Flush(_) => {}
        }
    }
    let conn = db.conn().await?;
    // every outcome to write, once: the fallback below writes some of them a second way
    let sent = (ok.ids.len() + rest.ids.len()) as u64;
    let mut written = 0;
    if !ok.ids.is_empty() {
        let statement = conn.prepare_cached(sql::COMPLETE_OK).await?;
        let hit = conn
            .execute(
                &statement,
                &[
                    &ok.tids,
                    &ok.ids,
                    &ok.attempts,
                    &ok.started,
                    &ok.results,
                    &worker_id,
                ],
            )
            .await?;
        written += hit;
        if hit < ok.ids.len() as u64 {
            // some rows moved since their claim: write those by id (the rows written above
            // are no longer running, so this statement cannot write them twice)
            for i in 0..ok.ids.len() {
                rest.push_completed(&ok, i);
            }
        }
    }
    if !rest.ids.is_empty() {
        let statement = conn.prepare_cached(sql::COMPLETE_JOBS).await?;
        let r = &rest;
        written += conn
            .execute(
                &statement,
                &[
                    &r.ids,
                    &r.attempts,
                    &r.states,
                    &r.results,
                    &r.errors,
                    &r.run_ats,
                    &worker_id,
                    &r.started,
                ],
            )
            .await?;
    }
    stats.written.fetch_add(written, Ordering::Relaxed);
    if written < sent {
        // stale: the job was cancelled, or rescued while this worker could not heartbeat
        // (or an earlier try of this very write committed and its answer was lost)
        let rejected = sent - written;
        stats.rejected.fetch_add(rejected, Ordering::Relaxed);
        tracing::warn!(
            "remuda completer: {rejected} of {sent} outcomes rejected as stale: those jobs were no longer this worker's at that attempt (cancelled, or rescued after this worker went silent)"
        );
    }
    if !released.ids.is_empty() {
        let statement = conn.prepare_cached(sql::RELEASE_JOBS).await?;
        let r = &released;
        conn.execute(&statement, &[&r.ids, &r.attempts, &worker_id, &r.started])
            .await?;
    }
    Ok(())
}

/// The parameters of `complete_ok.sql`, one element per successful outcome.
#[derive(Default)]
struct OkColumns<'a> {
    tids: Vec<Tid>,
    ids: Vec<i64>,
    attempts: Vec<i32>,
    started: Vec<DateTime<Utc>>,
    results: Vec<Option<&'a Jsonb>>,
}

impl<'a> OkColumns<'a> {
    fn push(
        &mut self,
        tid: Tid,
        id: i64,
        attempt: i32,
        started_at: DateTime<Utc>,
        result: Option<&'a Jsonb>,
    ) {
        self.tids.push(tid);
        self.ids.push(id);
        self.attempts.push(attempt);
        self.started.push(started_at);
        self.results.push(result);
    }
}

/// The parameters of `complete_jobs.sql`, one element per outcome.
#[derive(Default)]
struct WriteColumns<'a> {
    ids: Vec<i64>,
    attempts: Vec<i32>,
    started: Vec<DateTime<Utc>>,
    states: Vec<&'static str>,
    results: Vec<Option<&'a Jsonb>>,
    errors: Vec<Option<&'a Jsonb>>,
    run_ats: Vec<Option<DateTime<Utc>>>,
}

impl<'a> WriteColumns<'a> {
    fn push(&mut self, outcome: &'a Outcome) {
        if let Outcome::Write {
            id,
            attempt,
            started_at,
            state,
            result,
            error,
            run_at,
            ..
        } = outcome
        {
            self.ids.push(*id);
            self.attempts.push(*attempt);
            self.started.push(*started_at);
            self.states.push(state);
            self.results.push(result.as_ref());
            self.errors.push(error.as_ref());
            self.run_ats.push(*run_at);
        }
    }

    /// The `i`th success of `ok`, to be written by id.
    fn push_completed(&mut self, ok: &OkColumns<'a>, i: usize) {
        self.ids.push(ok.ids[i]);
        self.attempts.push(ok.attempts[i]);
        self.started.push(ok.started[i]);
        self.states.push("completed");
        self.results.push(ok.results[i]);
        self.errors.push(None);
        self.run_ats.push(None);
    }
}

/// The parameters of `release_jobs.sql`.
#[derive(Default)]
struct ReleaseColumns {
    ids: Vec<i64>,
    attempts: Vec<i32>,
    started: Vec<DateTime<Utc>>,
}

impl ReleaseColumns {
    fn push(&mut self, id: i64, attempt: i32, started_at: DateTime<Utc>) {
        self.ids.push(id);
        self.attempts.push(attempt);
        self.started.push(started_at);
    }
}
