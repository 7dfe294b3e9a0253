//! The batching completer: executors hand it each attempt's outcome and it writes them many
//! at a time with one `UPDATE … FROM unnest(…)` (`complete_jobs.sql`). While one write is in
//! flight the next batch accumulates, so under load batches grow by themselves and when idle
//! a lone completion is written at once (what `wait` needs). Writes that fail are retried;
//! an outcome is never dropped while the database can be reached.

use crate::db::{Database, Jsonb};
use crate::{sql, Result};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The end of one attempt, as the completer writes it.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A state change of a running job: completed, failed, or back to scheduled/available.
    Write {
        id: i64,
        attempt: i32,
        state: &'static str,
        result: Option<Jsonb>,
        error: Option<Jsonb>,
        run_at: Option<DateTime<Utc>>,
    },
    /// Give the job back untouched (shutdown): the attempt is not counted.
    Release { id: i64 },
    /// Everything sent before this is written; the completer stops.
    Stop,
}

/// Most outcomes written by one statement.
pub(crate) const MAX_BATCH: usize = 5000;

pub(crate) async fn run(db: Database, worker_id: Arc<str>, mut rx: mpsc::Receiver<Outcome>) {
    let mut batch = Vec::with_capacity(256);
    loop {
        let Some(first) = rx.recv().await else { return };
        let mut stop = matches!(first, Outcome::Stop);
        if !stop {
            batch.push(first);
        }
        while !stop && batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(Outcome::Stop) => stop = true,
                Ok(outcome) => batch.push(outcome),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            write_with_retry(&db, &worker_id, &batch).await;
            batch.clear();
        }
        if stop {
            return;
        }
    }
}

async fn write_with_retry(db: &Database, worker_id: &str, batch: &[Outcome]) {
    let mut delay = Duration::from_millis(50);
    loop {
        match write(db, worker_id, batch).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(
                    "remuda completer: cannot write {} outcomes: {e}; retrying in {delay:?}",
                    batch.len()
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn write(db: &Database, worker_id: &str, batch: &[Outcome]) -> Result<()> {
    let n = batch.len();
    let mut ids = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut states = Vec::with_capacity(n);
    let mut results = Vec::with_capacity(n);
    let mut errors = Vec::with_capacity(n);
    let mut run_ats = Vec::with_capacity(n);
    let mut released = Vec::new();
    for outcome in batch {
        match outcome {
            Outcome::Write {
                id,
                attempt,
                state,
                result,
                error,
                run_at,
            } => {
                ids.push(*id);
                attempts.push(*attempt);
                states.push(*state);
                results.push(result.as_ref());
                errors.push(error.as_ref());
                run_ats.push(*run_at);
            }
            Outcome::Release { id } => released.push(*id),
            Outcome::Stop => {}
        }
    }
    let conn = db.conn().await?;
    if !ids.is_empty() {
        let statement = conn.prepare_cached(sql::COMPLETE_JOBS).await?;
        let written = conn
            .execute(
                &statement,
                &[
                    &ids, &attempts, &states, &results, &errors, &run_ats, &worker_id,
                ],
            )
            .await?;
        if written < ids.len() as u64 {
            tracing::info!(
                "remuda completer: {} of {} outcomes were not written: those jobs were cancelled or rescued meanwhile",
                ids.len() as u64 - written,
                ids.len()
            );
        }
    }
    if !released.is_empty() {
        let statement = conn.prepare_cached(sql::RELEASE_JOBS).await?;
        conn.execute(&statement, &[&released, &worker_id]).await?;
    }
    Ok(())
}
