//! The step writer of a worker: the steps its runs record are written in batches, one
//! statement and one commit for the steps of many jobs (`step_record.sql`), as the completer
//! writes outcomes. A step is durable before its task goes on, so each costs a commit; a
//! commit a step bound a worker to 6 000 steps a second on a 2-core machine, batches to
//! 13 000. The first step of each run reads what the job recorded before, and those reads are
//! batched the same way (`steps_read.sql`), beside the writes.
//!
//! A batch the database refuses is written again one step at a time, so one bad step fails
//! only its own job's step.

use crate::db::Database;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Steps written in one statement at most.
const MAX_BATCH: usize = 500;

/// What the writer answers a step: `Ok(Some(output))` recorded (the output now recorded
/// under its name), `Ok(None)` refused (its run no longer holds the job), `Err` the database
/// could not be used.
pub(crate) type Answer = Result<Option<String>, String>;

/// One step to record.
pub(crate) struct Record {
    pub job: i64,
    pub name: String,
    pub output: String,
    pub attempt: i32,
    pub started_at: DateTime<Utc>,
    pub reply: oneshot::Sender<Answer>,
}

/// The steps a job recorded (name → output), or why they could not be read.
pub(crate) type Recorded = Result<std::collections::HashMap<String, String>, String>;

/// A run's read of what its job recorded.
pub(crate) struct Read {
    pub job: i64,
    pub reply: oneshot::Sender<Recorded>,
}

/// Starts the reader of a worker's runs; it stops when every sender is dropped.
pub(crate) fn spawn_reader(db: Database) -> mpsc::Sender<Read> {
    let (tx, mut rx) = mpsc::channel::<Read>(MAX_BATCH * 4);
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            read(&db, std::mem::take(&mut batch)).await;
        }
    });
    tx
}

/// Reads the steps of every job of `batch` in one statement and answers each run.
async fn read(db: &Database, batch: Vec<Read>) {
    let jobs: Vec<i64> = batch.iter().map(|r| r.job).collect();
    let rows = async {
        let conn = db.conn().await?;
        let rows = conn
            .query_pinned(crate::sql::STEPS_READ_PINNED, &[&jobs])
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("job_id")?,
                    r.try_get("name")?,
                    r.try_get("output")?,
                ))
            })
            .collect::<crate::Result<Vec<(i64, String, String)>>>()
    };
    match rows.await {
        Ok(rows) => {
            let mut by_job: std::collections::HashMap<
                i64,
                std::collections::HashMap<String, String>,
            > = Default::default();
            for (job, name, output) in rows {
                by_job.entry(job).or_default().insert(name, output);
            }
            for one in batch {
                let _ = one
                    .reply
                    .send(Ok(by_job.get(&one.job).cloned().unwrap_or_default()));
            }
        }
        Err(e) => {
            let message = e.to_string();
            for one in batch {
                let _ = one.reply.send(Err(message.clone()));
            }
        }
    }
}

/// Starts the writer of worker `worker`; it stops when every sender is dropped.
pub(crate) fn spawn(db: Database, worker: Arc<str>) -> mpsc::Sender<Record> {
    let (tx, mut rx) = mpsc::channel::<Record>(MAX_BATCH * 4);
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            write(&db, &worker, std::mem::take(&mut batch)).await;
        }
    });
    tx
}

/// Writes a batch and answers each step. A batch refused for its data (a row the database
/// will not take, a hook's error) is written again step by step, so that only that step
/// fails; any other error (the connection, a timeout) is every step's, at once.
pub(super) async fn write(db: &Database, worker: &str, batch: Vec<Record>) {
    let answers = match record(db, worker, &batch).await {
        Ok(answers) => answers.into_iter().map(Ok).collect(),
        Err(e) if batch.len() == 1 || !refused_for_its_data(&e) => {
            let message = e.to_string();
            batch.iter().map(|_| Err(message.clone())).collect()
        }
        Err(_) => {
            let mut answers = Vec::with_capacity(batch.len());
            for one in &batch {
                answers.push(
                    record(db, worker, std::slice::from_ref(one))
                        .await
                        .map(|mut a| a.pop().flatten())
                        .map_err(|e| e.to_string()),
                );
            }
            answers
        }
    };
    for (step, answer) in batch.into_iter().zip(answers) {
        // a run that stopped waiting (aborted) no longer listens
        let _ = step.reply.send(answer);
    }
}

/// Whether the database refused a statement for the data of one of its rows: an invalid
/// value (class 22), a constraint (23) or an error a trigger raised (P0001).
fn refused_for_its_data(e: &crate::Error) -> bool {
    e.is_bad_data()
        || matches!(e, crate::Error::Db(db) if db.code().is_some_and(|c| c.code() == "P0001"))
}

/// One statement for the steps `batch`: for each, in order, what is recorded under its name
/// now (`None`: its run no longer holds its job).
async fn record(
    db: &Database,
    worker: &str,
    batch: &[Record],
) -> crate::Result<Vec<Option<String>>> {
    let jobs: Vec<i64> = batch.iter().map(|r| r.job).collect();
    let names: Vec<&str> = batch.iter().map(|r| r.name.as_str()).collect();
    let outputs: Vec<&str> = batch.iter().map(|r| r.output.as_str()).collect();
    let attempts: Vec<i32> = batch.iter().map(|r| r.attempt).collect();
    let started: Vec<DateTime<Utc>> = batch.iter().map(|r| r.started_at).collect();
    let conn = db.conn().await?;
    let rows = conn
        .query_pinned(
            crate::sql::STEP_RECORD_PINNED,
            &[&jobs, &names, &outputs, &attempts, &started, &worker],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let held: bool = r.try_get("held")?;
            let output: Option<String> = r.try_get("output")?;
            Ok(output.filter(|_| held))
        })
        .collect()
}
