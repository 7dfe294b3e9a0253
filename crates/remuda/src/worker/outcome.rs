//! The end of an attempt as the executor hands it to the completer: a typed outcome, and the
//! parameter columns of the statements that write a batch of them.

use crate::db::{Jsonb, Tid};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// One run of a job: what guards every write about it (id, attempt and claim time), where the
/// claim left the row, and the job's flags (which lane its success takes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    pub id: i64,
    pub attempt: i32,
    /// The claim's time (with the attempt, the guard of the write).
    pub started_at: DateTime<Utc>,
    /// Where the claim left the row (a hint: see `complete_ok.sql`).
    pub tid: Tid,
    /// The job's flags as claimed: 0 for a plain job, whose success takes the lean lane.
    pub flags: i32,
    /// When the attempt's outcome was made (the completion lag runs from here).
    pub ended: std::time::Instant,
}

/// What an ended attempt adds to the worker's metrics and activity tally: its queue and
/// kind, how it ended (a retryable error on the last attempt counts as failed, as the
/// database will decide), how long it waited to start and ran, in seconds.
#[derive(Debug)]
pub(crate) struct AttemptTally {
    pub queue: std::sync::Arc<str>,
    pub kind: String,
    pub ended: super::activity::Ended,
    pub waited: f64,
    pub ran: f64,
}

/// How an attempt ended.
#[derive(Debug)]
pub(crate) enum End {
    /// The task returned a value (`result` is `{"ok": …}`).
    Completed { result: Jsonb },
    /// An error that is not to be retried; `error` is its entry in the job's error history
    /// (none when the history itself could not be stored).
    Failed { result: Jsonb, error: Option<Jsonb> },
    /// An error to retry after `delay`, if the job has attempts left (decided by the database,
    /// `remuda.retry_or_fail`); otherwise the job fails with `result`.
    Retry {
        result: Jsonb,
        error: Jsonb,
        delay: Duration,
    },
    /// Run again after `delay` without counting the attempt or recording an error.
    Snooze { delay: Duration },
}

impl End {
    /// The outcome's name in `complete_jobs.sql` (see `remuda.outcome_state`).
    pub fn name(&self) -> &'static str {
        match self {
            End::Completed { .. } => "completed",
            End::Failed { .. } => "failed",
            End::Retry { .. } => "retry",
            End::Snooze { .. } => "snooze",
        }
    }

    fn result(&self) -> Option<&Jsonb> {
        match self {
            End::Completed { result } | End::Failed { result, .. } | End::Retry { result, .. } => {
                Some(result)
            }
            End::Snooze { .. } => None,
        }
    }

    fn error(&self) -> Option<&Jsonb> {
        match self {
            End::Failed { error, .. } => error.as_ref(),
            End::Retry { error, .. } => Some(error),
            End::Completed { .. } | End::Snooze { .. } => None,
        }
    }

    /// Milliseconds to wait before the next run (0: at once).
    fn delay_ms(&self) -> i64 {
        match self {
            End::Retry { delay, .. } | End::Snooze { delay } => {
                // a century at most: beyond, the next run time would leave timestamptz's range
                let ms = delay.as_millis().min(MAX_DELAY_MS as u128);
                ms as i64
            }
            End::Completed { .. } | End::Failed { .. } => 0,
        }
    }
}

/// The longest wait before a next run, in milliseconds (a century).
const MAX_DELAY_MS: i64 = 100 * 366 * 86_400_000;

/// What the completer is handed.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The end of an attempt of a running job.
    Ended {
        run: Run,
        end: End,
        /// What it adds to the worker's metrics and activity tally (none for a snooze):
        /// counted by the completer for a whole batch at once.
        tally: Option<AttemptTally>,
    },
    /// Give the job back untouched (shutdown, or a stop that may not have been a real
    /// cancel): the attempt is not counted. Guarded, so a job really cancelled stays so.
    Release { run: Run },
    /// Everything sent before this is written (or given up) when the sender hears back.
    Flush(tokio::sync::oneshot::Sender<()>),
    /// Everything sent before this is written; the completer stops.
    Stop,
}

impl Outcome {
    /// Whether the lean lane writes it: the success of a plain job (flags 0).
    pub fn is_lean(&self) -> bool {
        matches!(self, Outcome::Ended { run, end: End::Completed { .. }, .. } if run.flags == 0)
    }

    /// Bytes of JSON this outcome sends.
    pub fn size(&self) -> usize {
        match self {
            Outcome::Ended { end, .. } => {
                end.result().map_or(0, Jsonb::len) + end.error().map_or(0, Jsonb::len)
            }
            _ => 0,
        }
    }
}

/// The parameters of the three statements that write a batch, one element per outcome:
/// successes of plain jobs (`complete_ok.sql`), every other end (`complete_jobs.sql`) and
/// releases (`release_jobs.sql`).
#[derive(Default)]
pub(crate) struct Columns<'a> {
    pub ok: OkColumns<'a>,
    pub rest: WriteColumns<'a>,
    pub released: ReleaseColumns,
}

impl<'a> Columns<'a> {
    pub fn new(batch: &'a [Outcome]) -> Self {
        let mut columns = Columns::default();
        for outcome in batch {
            match outcome {
                Outcome::Ended {
                    run,
                    end: End::Completed { result },
                    ..
                } if outcome.is_lean() => columns.ok.push(run, result),
                Outcome::Ended { run, end, .. } => columns.rest.push(run, end.name(), end),
                Outcome::Release { run } => columns.released.push(run),
                Outcome::Stop | Outcome::Flush(_) => {}
            }
        }
        columns
    }
}

/// The parameters of `complete_ok.sql`.
#[derive(Default)]
pub(crate) struct OkColumns<'a> {
    pub tids: Vec<Tid>,
    pub ids: Vec<i64>,
    pub attempts: Vec<i32>,
    pub started: Vec<DateTime<Utc>>,
    pub results: Vec<&'a Jsonb>,
}

impl<'a> OkColumns<'a> {
    fn push(&mut self, run: &Run, result: &'a Jsonb) {
        self.tids.push(run.tid);
        self.ids.push(run.id);
        self.attempts.push(run.attempt);
        self.started.push(run.started_at);
        self.results.push(result);
    }
}

/// The parameters of `complete_jobs.sql`.
#[derive(Default)]
pub(crate) struct WriteColumns<'a> {
    pub ids: Vec<i64>,
    pub attempts: Vec<i32>,
    pub started: Vec<DateTime<Utc>>,
    pub outcomes: Vec<&'static str>,
    pub results: Vec<Option<&'a Jsonb>>,
    pub errors: Vec<Option<&'a Jsonb>>,
    pub delays: Vec<i64>,
}

impl<'a> WriteColumns<'a> {
    fn push(&mut self, run: &Run, outcome: &'static str, end: &'a End) {
        self.ids.push(run.id);
        self.attempts.push(run.attempt);
        self.started.push(run.started_at);
        self.outcomes.push(outcome);
        self.results.push(end.result());
        self.errors.push(end.error());
        self.delays.push(end.delay_ms());
    }

    /// Every success of `ok`, to be written by id (the lean lane missed some: those rows
    /// moved, or became flagged, since their claim).
    pub fn push_completed(&mut self, ok: &OkColumns<'a>) {
        for i in 0..ok.ids.len() {
            self.ids.push(ok.ids[i]);
            self.attempts.push(ok.attempts[i]);
            self.started.push(ok.started[i]);
            self.outcomes.push("completed");
            self.results.push(Some(ok.results[i]));
            self.errors.push(None);
            self.delays.push(0);
        }
    }
}

/// The parameters of `release_jobs.sql`.
#[derive(Default)]
pub(crate) struct ReleaseColumns {
    pub ids: Vec<i64>,
    pub attempts: Vec<i32>,
    pub started: Vec<DateTime<Utc>>,
}

impl ReleaseColumns {
    fn push(&mut self, run: &Run) {
        self.ids.push(run.id);
        self.attempts.push(run.attempt);
        self.started.push(run.started_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_capped_at_a_century_so_the_next_run_time_stays_storable() {
        let end = End::Snooze {
            delay: Duration::MAX,
        };
        assert_eq!(end.delay_ms(), MAX_DELAY_MS);
        let end = End::Snooze {
            delay: Duration::from_millis(1500),
        };
        assert_eq!(end.delay_ms(), 1500);
    }
}
