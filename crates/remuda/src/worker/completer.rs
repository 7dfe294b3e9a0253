//! The batching completer: executors hand it each attempt's outcome and it writes them many
//! at a time. Successes of plain jobs, the bulk of the work, take the lean lane:
//! `complete_ok.sql`, one statement that finds each row where its claim left it (sent with its
//! planner settings, BEGIN and COMMIT in one round trip: see `db::Pinned`).
//! Every other end takes the general lane, in a task of its own: each batch in one
//! transaction, `complete_jobs.sql` handing the rows it wrote to the finalization seam
//! (`remuda.transitioned`, see migration 8) and `release_jobs.sql` for releases; so a seam
//! hook that keeps failing holds back only the outcomes it would see. While one write is in
//! flight the next batch accumulates, so under load batches grow by themselves and when idle
//! a lone completion is written at once (what `wait` needs).
//! When a write's answer is lost with its connection, the next try settles it first: the
//! general lane keeps each transaction's id and asks the server whether it committed
//! (`pg_xact_status`, ending a session left idle in it), the lean lane counts the rows the
//! lost try completed (`completed_in_run.sql`); so a batch is never counted as stale for
//! having been written once already. Writes that fail for any reason but their data are
//! retried with backoff (a permission or a feature missing during a rolling deploy says
//! nothing about the outcome); a batch the database refuses as data (SQLSTATE 22, 23, 54, see
//! `Error::is_refused_data`) is written one outcome at a time, and an outcome that still
//! cannot be written fails its job with `OUTCOME_UNWRITABLE`, so one bad outcome never blocks
//! the others. At shutdown the worker gives the last writes a deadline (`give_up`); whatever
//! is left is rescued once the worker is gone.

use super::outcome::{Columns, End};
pub(crate) use super::outcome::{Outcome, Run};
use super::WorkerStats;
use crate::db::Sql;
use crate::db::{Database, Jsonb};
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Most outcomes written by one statement.
pub(crate) const MAX_BATCH: usize = 5000;
/// Most bytes of results and errors written by one statement (results may each be up to the
/// payload limit; PostgreSQL refuses messages over 1 GiB).
const MAX_BATCH_BYTES: usize = 64 << 20;
/// Outcomes from which a general-lane batch has its statements planned for their own
/// arguments (see transaction_id.sql): below, the cached plans are kept.
const CUSTOM_PLANS_FROM: usize = 64;

pub(crate) async fn run(
    db: Database,
    worker_id: Arc<str>,
    mut rx: mpsc::Receiver<Outcome>,
    give_up: CancellationToken,
    stats: Arc<WorkerStats>,
    promote_within: Duration,
    counts: Counts,
) {
    let lag = counts.lag.clone();
    // the general lane writes in a task of its own: a seam hook that keeps failing (its
    // error rolls the write back) holds back the outcomes of flagged jobs and failures, not
    // the plain successes the hook never sees
    let (general, mut general_rx) = mpsc::unbounded_channel();
    let general_task = tokio::spawn({
        let (db, worker_id, give_up, stats, lag) = (
            db.clone(),
            worker_id.clone(),
            give_up.clone(),
            stats.clone(),
            lag.clone(),
        );
        async move {
            let mut batch = Batch::default();
            while let Some(first) = general_rx.recv().await {
                let stop = batch.gather(first, || general_rx.try_recv().ok());
                if !batch.outcomes.is_empty() {
                    write_with_retry(&db, &worker_id, &batch.outcomes, &give_up, &stats).await;
                    observe_lag(&lag, &batch.outcomes);
                    super::due_soon::promote_when_due(&db, &batch.outcomes, promote_within);
                }
                batch.answer_flushes();
                if stop {
                    return;
                }
            }
        }
    });
    let general_task = crate::runtime::supervise::AbortOnDrop(general_task);
    let mut batch = Batch::default();
    loop {
        let Some(first) = rx.recv().await else { return };
        // the attempts ready to end beside this one end first (a claim's jobs start together
        // and a no-op ends at its first poll): one write for them all, not one for the first
        // and one for the rest, and under a cap one claim of the room they free, not two
        tokio::task::yield_now().await;
        let stop = batch.gather(first, || rx.try_recv().ok());
        count_attempts(&counts, &batch.outcomes);
        let (lean, rest): (Vec<_>, Vec<_>) = batch.outcomes.drain(..).partition(Outcome::is_lean);
        if !lean.is_empty() {
            write_with_retry(&db, &worker_id, &lean, &give_up, &stats).await;
            observe_lag(&lag, &lean);
        }
        // the general lane answers a flush once it has written everything sent before it
        let forward = rest
            .into_iter()
            .chain(batch.flushes.drain(..).map(Outcome::Flush))
            .chain(stop.then_some(Outcome::Stop));
        for outcome in forward {
            if general.send(outcome).is_err() {
                return;
            }
        }
        if stop {
            let mut task = general_task;
            let _ = (&mut task.0).await;
            return;
        }
    }
}

/// Where the completer counts the attempts it is handed: the worker's activity tally, its
/// metrics by queue and kind, and how long outcomes waited to be written.
pub(crate) struct Counts {
    pub activity: Arc<super::activity::Activity>,
    pub metrics: super::KindMetrics,
    pub lag: prometheus_client::metrics::histogram::Histogram,
}

/// Counts the ended attempts of a batch, before it is written (a job seen finished is
/// counted): one clock reading and one lock of the tally for the batch, where each executor
/// took them for its job.
fn count_attempts(counts: &Counts, batch: &[Outcome]) {
    use super::activity::Ended;
    let tallies = || {
        batch.iter().filter_map(|outcome| match outcome {
            Outcome::Ended {
                tally: Some(tally), ..
            } => Some(tally),
            _ => None,
        })
    };
    counts
        .activity
        .record(tallies().map(|t| (&*t.queue, t.ended, t.waited, t.ran)));
    for tally in tallies() {
        let Some(metrics) = counts
            .metrics
            .get(&*tally.queue)
            .and_then(|kinds| kinds.get(&tally.kind))
        else {
            continue;
        };
        match tally.ended {
            Ended::Completed => metrics.completed.inc(),
            Ended::Failed => metrics.failed.inc(),
            Ended::Retried => metrics.retried.inc(),
        };
        metrics.wait.observe(tally.waited);
        metrics.run.observe(tally.ran);
    }
}

/// Records, for each attempt of a batch just written, how long its outcome waited.
fn observe_lag(lag: &prometheus_client::metrics::histogram::Histogram, batch: &[Outcome]) {
    for outcome in batch {
        if let Outcome::Ended { run, .. } = outcome {
            lag.observe(run.ended.elapsed().as_secs_f64());
        }
    }
}

/// The outcomes gathered for one write, and the flushes to answer once it is done.
#[derive(Default)]
struct Batch {
    outcomes: Vec<Outcome>,
    flushes: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Batch {
    /// Gathers `first` and whatever `next` has ready, up to the batch limits; true when a
    /// `Stop` came (nothing after it is taken).
    fn gather(&mut self, first: Outcome, mut next: impl FnMut() -> Option<Outcome>) -> bool {
        self.outcomes.clear();
        let mut bytes = 0;
        let mut outcome = Some(first);
        while let Some(o) = outcome.take() {
            match o {
                Outcome::Stop => return true,
                Outcome::Flush(done) => self.flushes.push(done),
                o => {
                    bytes += o.size();
                    self.outcomes.push(o);
                }
            }
            if self.outcomes.len() >= MAX_BATCH || bytes >= MAX_BATCH_BYTES {
                return false;
            }
            outcome = next();
        }
        false
    }

    /// Tells every flush waiting on this batch that it is written.
    fn answer_flushes(&mut self) {
        for done in self.flushes.drain(..) {
            let _ = done.send(());
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
    let mut doubt = Doubt::default();
    loop {
        let result = tokio::select! {
            result = write(db, worker_id, batch, stats, &mut doubt) => result,
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
    let mut doubt = Doubt::default();
    loop {
        let batch = std::slice::from_ref(&fallback);
        match write(db, worker_id, batch, stats, &mut doubt).await {
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
    let Outcome::Ended { run, .. } = outcome else {
        return None;
    };
    let message = format!("the outcome of this attempt could not be stored: {error}");
    let result = serde_json::json!({"err": {"code": "OUTCOME_UNWRITABLE", "message": message, "data": null}});
    Some(Outcome::Ended {
        run: *run,
        end: End::Failed {
            result: Jsonb(result.to_string()),
            // not appended to `errors`: the refusal may have been about that very array
            error: None,
        },
        // counted already, as the end that could not be written
        tally: None,
    })
}

/// Longest wait between retries of a write while the database fails.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// `delay` plus up to 25% at random, so that workers cut off together do not retry in step.
fn jittered(delay: Duration) -> Duration {
    delay + delay.mul_f64(fastrand::f64() / 4.0)
}

/// What a batch's write did, as the database counted it.
#[derive(Clone, Copy, Debug, Default)]
struct Written {
    /// Outcomes in the batch (releases aside).
    sent: u64,
    completed: u64,
    failed: u64,
    retried: u64,
    snoozed: u64,
}

impl Written {
    fn accepted(&self) -> u64 {
        self.completed + self.failed + self.retried + self.snoozed
    }

    /// Adds the counts to the worker's and says how many outcomes were stale.
    fn record(&self, stats: &WorkerStats) {
        stats.completed.fetch_add(self.completed, Ordering::Relaxed);
        stats.failed.fetch_add(self.failed, Ordering::Relaxed);
        stats.retried.fetch_add(self.retried, Ordering::Relaxed);
        stats.snoozed.fetch_add(self.snoozed, Ordering::Relaxed);
        stats.written.fetch_add(self.accepted(), Ordering::Relaxed);
        let rejected = self.sent.saturating_sub(self.accepted());
        if rejected > 0 {
            // stale: the job was cancelled, or rescued while this worker could not heartbeat
            stats.rejected.fetch_add(rejected, Ordering::Relaxed);
            tracing::warn!(
                "remuda completer: {rejected} of {} outcomes rejected as stale: those jobs were no longer this worker's at that attempt (cancelled, or rescued after this worker went silent)",
                self.sent
            );
        }
    }
}

/// What a write whose answer was lost may have written, for the next try to settle.
#[derive(Default)]
struct Doubt {
    /// A transaction of the general lane whose commit answer was lost.
    transaction: Option<InDoubt>,
    /// A lean write (plain successes, no transaction id kept) whose answer was lost: some of its rows
    /// may be written.
    lean: bool,
}

/// A transaction whose commit answer was lost: its id, the server's start time and the
/// session that ran it (see `transaction_status.sql`), and what it wrote had it committed.
struct InDoubt {
    xid: String,
    server_started: DateTime<Utc>,
    pid: i32,
    written: Written,
}

/// Asks whether the transaction in `doubt` committed. `Ok(true)`: it did, and is counted.
/// `Ok(false)`: it did not, or that cannot be known: write again (the guards reject what was
/// written already). An error while it is still in progress.
async fn settle(
    conn: &crate::db::Conn,
    doubt: &mut Option<InDoubt>,
    stats: &WorkerStats,
) -> Result<bool> {
    let Some(earlier) = doubt.as_ref() else {
        return Ok(false);
    };
    let row = conn
        .query_one(
            sql::TRANSACTION_STATUS,
            &[&earlier.xid, &earlier.server_started, &earlier.pid],
        )
        .await?;
    let status: Option<String> = row.try_get("status")?;
    match status.as_deref() {
        Some("committed") => {
            earlier.written.record(stats);
            *doubt = None;
            Ok(true)
        }
        Some("in progress") => Err(Error::CommitInDoubt(format!(
            "transaction {} (an earlier try of this write) is still open on the server; its session is being ended",
            earlier.xid
        ))),
        Some(_) => {
            *doubt = None;
            Ok(false)
        }
        None => {
            tracing::warn!(
                "remuda completer: the server restarted since transaction {} (an earlier try of this write) whose commit answer was lost; writing again (outcomes it wrote are counted as stale)",
                earlier.xid
            );
            *doubt = None;
            Ok(false)
        }
    }
}

/// Writes one batch and counts what the database accepted. A batch of plain successes only
/// (the lean lane) is written by single statements, the fewest the server can run; any
/// other batch in one transaction, through the finalization seam. When an earlier try's
/// answer was lost (`doubt`), what it wrote is found first and counted once.
async fn write(
    db: &Database,
    worker_id: &str,
    batch: &[Outcome],
    stats: &WorkerStats,
    doubt: &mut Doubt,
) -> Result<()> {
    let mut conn = db.conn().await?;
    if settle(&conn, &mut doubt.transaction, stats).await? {
        return Ok(());
    }
    let columns = Columns::new(batch);
    if !columns.ok.ids.is_empty() {
        // the completer's own lean batches: plain successes only
        return write_lean(&conn, worker_id, &columns, stats, &mut doubt.lean).await;
    }
    let tx = conn.transaction().await?;
    let (id, written) = write_in(&tx, worker_id, &columns).await?;
    match tx.commit().await.map_err(Error::from) {
        Ok(()) => {
            written.record(stats);
            Ok(())
        }
        Err(e) => {
            if e.outcome_unknown() {
                doubt.transaction = Some(InDoubt {
                    xid: id.xid,
                    server_started: id.server_started,
                    pid: id.pid,
                    written,
                });
            }
            Err(e)
        }
    }
}

/// Writes plain successes without keeping a transaction id: `complete_ok.sql`, then its
/// misses by id. After a try whose answer was lost (`unsure`), the rows it completed are
/// counted first (`completed_in_run.sql`); the guards reject them when they are written again.
async fn write_lean(
    conn: &crate::db::Conn,
    worker_id: &str,
    columns: &Columns<'_>,
    stats: &WorkerStats,
    unsure: &mut bool,
) -> Result<()> {
    let ok = &columns.ok;
    let mut written = Written {
        sent: ok.ids.len() as u64,
        ..Written::default()
    };
    let result = async {
        if *unsure {
            let row = conn
                .query_one(
                    sql::COMPLETED_IN_RUN,
                    &[&ok.ids, &ok.attempts, &ok.started, &worker_id],
                )
                .await?;
            written.completed = count(&row, "completed")?;
        }
        write_ok(conn, worker_id, columns, &mut written).await?;
        Ok::<_, Error>(())
    }
    .await;
    match result {
        Ok(()) => {
            *unsure = false;
            written.record(stats);
            Ok(())
        }
        Err(e) => {
            *unsure |= e.outcome_unknown();
            Err(e)
        }
    }
}

/// What `transaction_id.sql` returns.
struct TransactionId {
    xid: String,
    server_started: DateTime<Utc>,
    pid: i32,
}

impl TransactionId {
    fn from_row(row: &tokio_postgres::Row) -> Result<Self> {
        Ok(TransactionId {
            xid: row.try_get("xid")?,
            server_started: row.try_get("server_started")?,
            pid: row.try_get("pid")?,
        })
    }
}

/// The statements of a general batch, inside its transaction: its id, the ends through
/// `complete_jobs.sql` (found by id, through the seam), releases through `release_jobs.sql`.
/// Returns the transaction's id and the counts.
async fn write_in(
    tx: &crate::db::Tx<'_>,
    worker_id: &str,
    columns: &Columns<'_>,
) -> Result<(TransactionId, Written)> {
    // (plain successes never come here: the completer hands them to `write_lean`)
    let mut written = Written {
        sent: columns.rest.ids.len() as u64,
        ..Written::default()
    };
    let large = columns.rest.ids.len() >= CUSTOM_PLANS_FROM;
    let id = TransactionId::from_row(&tx.query_one(sql::TRANSACTION_ID, &[&large]).await?)?;
    if !columns.rest.ids.is_empty() {
        write_general(tx, worker_id, &columns.rest, &mut written).await?;
    }
    let released = &columns.released;
    if !released.ids.is_empty() {
        let r = released;
        tx.query_one(
            sql::RELEASE_JOBS,
            &[&r.ids, &r.attempts, &worker_id, &r.started],
        )
        .await?;
    }
    Ok((id, written))
}

/// Plain successes through `complete_ok.sql` (found by their place); the ones it missed
/// (moved or flagged since their claim) by id through `complete_jobs.sql`.
async fn write_ok(
    conn: &crate::db::Conn,
    worker_id: &str,
    columns: &Columns<'_>,
    written: &mut Written,
) -> Result<()> {
    let ok = &columns.ok;
    let hit = if lean_lane_open() {
        conn.execute_pinned(
            sql::COMPLETE_OK_PINNED,
            &[
                &ok.tids,
                &ok.ids,
                &ok.attempts,
                &ok.started,
                &ok.results,
                &worker_id,
            ],
        )
        .await?
    } else {
        0
    };
    written.completed += hit;
    if hit < ok.ids.len() as u64 {
        // the rows written above (and any written before) are no longer running: this
        // cannot write them twice
        let mut all = super::outcome::WriteColumns::default();
        all.push_completed(ok);
        write_general(conn, worker_id, &all, written).await?;
    }
    Ok(())
}

/// Ends of any kind through `complete_jobs.sql` (found by id, through the seam).
async fn write_general(
    client: &impl Sql,
    worker_id: &str,
    r: &super::outcome::WriteColumns<'_>,
    written: &mut Written,
) -> Result<()> {
    let statement = completion_statement();
    #[cfg(feature = "testing")]
    if crate::testing::fault::injected(crate::testing::fault::Fault::AcceptStaleOutcomes) {
        client
            .execute(&crate::testing::fault::unguarded_function(), &[])
            .await?;
    }
    #[cfg(feature = "testing")]
    let around = crate::testing::fault::injected(crate::testing::fault::Fault::DropTransitions);
    #[cfg(feature = "testing")]
    if around {
        client
            .execute("SET session_replication_role = replica", &[])
            .await?;
    }
    let row = client
        .query_one(
            &statement,
            &[
                &r.ids,
                &r.attempts,
                &r.started,
                &r.outcomes,
                &r.results,
                &r.errors,
                &r.delays,
                &worker_id,
            ],
        )
        .await;
    #[cfg(feature = "testing")]
    if around {
        // (whether or not the write went through: the pooled connection goes back as it was)
        client
            .execute("RESET session_replication_role", &[])
            .await?;
    }
    let row = row?;
    written.completed += count(&row, "completed")?;
    written.failed += count(&row, "failed")?;
    written.retried += count(&row, "retried")?;
    written.snoozed += count(&row, "snoozed")?;
    Ok(())
}

/// Whether plain successes may take the lean lane: always, but while a fault of the
/// `testing` feature is in every outcome goes through `complete_jobs.sql`, where it acts.
fn lean_lane_open() -> bool {
    #[cfg(feature = "testing")]
    if crate::testing::fault::any() {
        return false;
    }
    true
}

/// `complete_jobs.sql`, or with [`crate::testing::fault::Fault::AcceptStaleOutcomes`] in,
/// the same without its fencing guard.
fn completion_statement() -> std::borrow::Cow<'static, str> {
    #[cfg(feature = "testing")]
    if crate::testing::fault::injected(crate::testing::fault::Fault::AcceptStaleOutcomes) {
        return crate::testing::fault::unguarded_completion().into();
    }
    sql::COMPLETE_JOBS.into()
}

fn count(row: &tokio_postgres::Row, column: &str) -> Result<u64> {
    let n: i64 = row.try_get(column)?;
    Ok(u64::try_from(n).unwrap_or(0))
}
