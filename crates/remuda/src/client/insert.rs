//! Enqueueing: [`NewJob`] describes one job; the client inserts one, a batch (any size, one
//! statement), or inside the caller's own transaction.

use crate::db::Jsonb;
use crate::task::Task;
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use futures_util::pin_mut;
use postgres_types::Type;
use serde::Serialize;
use std::time::Duration;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::GenericClient;

/// A job to enqueue.
#[derive(Clone, Debug)]
pub struct NewJob {
    /// Task kind that will run it.
    pub kind: String,
    /// Arguments as JSON.
    pub args: Jsonb,
    /// Queue (default `default`).
    pub queue: String,
    /// Priority, lower first (default 0).
    pub priority: i32,
    /// Attempts allowed; `None` lets the worker's default for the kind decide.
    pub max_attempts: Option<i32>,
    /// Earliest start; `None` for now.
    pub run_at: Option<DateTime<Utc>>,
    /// Deadline for starting: past it, the job expires instead of running.
    pub expires_at: Option<DateTime<Utc>>,
    /// Timeout of each attempt, overriding the task's.
    pub timeout: Option<Duration>,
}

impl NewJob {
    /// A job of `kind` with these arguments, all else default.
    pub fn new(kind: impl Into<String>, args: &impl Serialize) -> Result<Self> {
        Ok(NewJob::from_json(kind, Jsonb::encode(args)?))
    }

    /// A job with arguments that are already JSON text.
    pub fn from_json(kind: impl Into<String>, args: Jsonb) -> Self {
        NewJob {
            kind: kind.into(),
            args,
            queue: "default".into(),
            priority: 0,
            max_attempts: None,
            run_at: None,
            expires_at: None,
            timeout: None,
        }
    }

    /// A job for task `T`, with `T`'s defaults for queue, priority, attempts and timeout.
    pub fn for_task<T: Task>(args: &T::Args) -> Result<Self> {
        let options = T::options();
        let mut job = NewJob::new(T::KIND, args)?;
        job.queue = options.queue;
        job.priority = options.priority;
        job.max_attempts = Some(options.max_attempts);
        job.timeout = options.timeout;
        Ok(job)
    }

    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Sets the number of attempts allowed.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }
    /// Runs no earlier than `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self
    }
    /// Runs no earlier than `delay` from now.
    pub fn delay(mut self, delay: Duration) -> Self {
        let at = chrono::Duration::from_std(delay)
            .ok()
            .and_then(|d| Utc::now().checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        self.run_at = Some(at);
        self
    }
    /// Expires unless started before `at`.
    pub fn expires_at(mut self, at: DateTime<Utc>) -> Self {
        self.expires_at = Some(at);
        self
    }
    /// Sets the timeout of each attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The timeout as stored (`timeout_ms`): whole milliseconds, at least 1.
    fn timeout_ms(&self) -> Option<i64> {
        self.timeout
            .map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX).max(1))
    }

    fn validate(&self, max_payload: usize) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidInput(what));
        if self.kind.trim().is_empty() {
            return bad("a job needs a kind (the task name)".into());
        }
        if self.queue.trim().is_empty() {
            return bad(format!("job {}: the queue name is empty", self.kind));
        }
        if self.args.len() > max_payload {
            return bad(format!(
                "job {}: args are {} bytes, over the limit of {} bytes; store large data elsewhere and pass a reference, or raise the limit",
                self.kind,
                self.args.len(),
                max_payload
            ));
        }
        if self.args.0.contains("\\u0000") {
            return bad(format!(
                "job {}: args contain a NUL character (\\u0000), which PostgreSQL's jsonb cannot store; encode binary data (base64)",
                self.kind
            ));
        }
        if matches!(self.max_attempts, Some(n) if n < 1) {
            return bad(format!(
                "job {}: max_attempts must be at least 1",
                self.kind
            ));
        }
        if matches!(self.timeout, Some(t) if t.is_zero()) {
            return bad(format!("job {}: timeout must be more than zero", self.kind));
        }
        Ok(())
    }
}

/// Inserts jobs with one statement (`insert_jobs.sql`, already prepared on `conn`, a pooled
/// connection or the caller's transaction) and returns their ids in the same order.
pub(crate) async fn insert_many<C: GenericClient>(
    conn: &C,
    statement: &tokio_postgres::Statement,
    jobs: &[NewJob],
    max_payload: usize,
) -> Result<Vec<i64>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    for job in jobs {
        job.validate(max_payload)?;
    }
    let n = jobs.len();
    let mut queues = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    let mut priorities = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut run_ats = Vec::with_capacity(n);
    let mut expires = Vec::with_capacity(n);
    let mut timeouts = Vec::with_capacity(n);
    let mut args = Vec::with_capacity(n);
    for job in jobs {
        queues.push(job.queue.as_str());
        kinds.push(job.kind.as_str());
        priorities.push(job.priority);
        max_attempts.push(job.max_attempts);
        run_ats.push(job.run_at);
        expires.push(job.expires_at);
        timeouts.push(job.timeout_ms());
        args.push(&job.args);
    }
    let rows = conn
        .query(
            statement,
            &[
                &queues,
                &kinds,
                &priorities,
                &max_attempts,
                &run_ats,
                &expires,
                &timeouts,
                &args,
            ],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Inserts jobs inside `tx` the fastest way: jobs due now with binary COPY, jobs with a
/// `run_at` with `insert_jobs.sql`. Returns how many were inserted (COPY returns no ids).
pub(crate) async fn insert_bulk(
    tx: &tokio_postgres::Transaction<'_>,
    jobs: &[NewJob],
    max_payload: usize,
) -> Result<u64> {
    for job in jobs {
        job.validate(max_payload)?;
    }
    let (now, later): (Vec<&NewJob>, Vec<&NewJob>) = jobs.iter().partition(|j| j.run_at.is_none());
    let mut inserted = 0;
    if !later.is_empty() {
        let later: Vec<NewJob> = later.into_iter().cloned().collect();
        let statement = tx.prepare(sql::INSERT_JOBS).await?;
        inserted += insert_many(tx, &statement, &later, max_payload)
            .await?
            .len() as u64;
    }
    if !now.is_empty() {
        let sink = tx.copy_in(sql::COPY_JOBS).await?;
        let writer = BinaryCopyInWriter::new(
            sink,
            &[
                Type::TEXT,
                Type::TEXT,
                Type::INT4,
                Type::INT4,
                Type::TIMESTAMPTZ,
                Type::INT8,
                Type::JSONB,
            ],
        );
        pin_mut!(writer);
        for job in now {
            let timeout = job.timeout_ms();
            writer
                .as_mut()
                .write(&[
                    &job.queue,
                    &job.kind,
                    &job.priority,
                    &job.max_attempts,
                    &job.expires_at,
                    &timeout,
                    &job.args,
                ])
                .await?;
        }
        inserted += writer.finish().await?;
    }
    Ok(inserted)
}
