//! Defects put in on purpose, to show that the history checker and the workflow model catch
//! each class of what must never happen. Only in builds with the `testing` feature; a fault
//! acts on every worker of the process (Rust faults) or on one database (SQL faults) until
//! healed.

use crate::{Database, Result};
use std::sync::Mutex;

/// A defect of the workers of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Outcomes are written whoever holds the job now: the completion's fencing guard (the
    /// worker, attempt and claim it ran under) is dropped, so a stale worker's late outcome
    /// is accepted.
    AcceptStaleOutcomes,
    /// Outcomes are written around the history's recorder (`session_replication_role =
    /// replica`): a transition the history never sees.
    DropTransitions,
}

static FAULTS: Mutex<Vec<Fault>> = Mutex::new(Vec::new());

/// Puts `fault` into every worker of this process.
pub fn inject(fault: Fault) {
    FAULTS.lock().unwrap_or_else(|p| p.into_inner()).push(fault);
}

/// Removes every fault put in by [`inject`].
pub fn heal() {
    FAULTS.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// Whether `fault` is in.
pub(crate) fn injected(fault: Fault) -> bool {
    FAULTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&fault)
}

/// Whether any fault is in.
pub(crate) fn any() -> bool {
    !FAULTS.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
}

/// A copy of `remuda.write_outcomes` without its fencing guard (for
/// [`Fault::AcceptStaleOutcomes`]): any running row of the given ids is written. The
/// completer creates it before [`unguarded_completion`] calls it.
pub(crate) fn unguarded_function() -> String {
    let guard = "          AND j.worker_id = write_outcomes.worker\n          AND j.attempt = u.attempt\n          AND j.started_at = u.started_at\n";
    let function = include_str!("../schema/jobs/write_outcomes.sql");
    assert!(
        function.contains(guard),
        "write_outcomes.sql's guard moved: update this fault"
    );
    function
        .replace(guard, "")
        .replace("write_outcomes", "write_outcomes_unguarded")
}

/// The completion statement writing through [`unguarded_function`].
pub(crate) fn unguarded_completion() -> String {
    crate::sql::COMPLETE_JOBS.replace("remuda.write_outcomes(", "remuda.write_outcomes_unguarded(")
}

/// Makes the joins of `db`'s workflows decide early: an `any` or `quorum` join counts the
/// nodes it waits for that ended, not those that completed, so it runs after failures that
/// should skip it. It lasts as long as the database (a test's own): migrating again does not
/// restore the function, whose file has not changed.
pub async fn decide_joins_early(db: &Database) -> Result<()> {
    let right = include_str!("../schema/workflow/wf_decide.sql");
    let early = right.replace("IF ok_on < need THEN", "IF done_on < need THEN");
    assert_ne!(
        right, early,
        "wf_decide.sql's join test moved: update this fault"
    );
    db.conn().await?.batch_execute(&early).await?;
    Ok(())
}

/// A point in remuda's code where it waits while a test holds it: how a test forces one
/// interleaving of two things that race (an answer arriving after what it answers for has
/// moved on). Points: `"reconcile"` (a worker has the database's non-empty answer to "which
/// of my runs are no longer mine" and has not acted on it yet) and `"reconciled"` (it has).
pub struct HoldPoint {
    reached: tokio::sync::Notify,
    released: std::sync::atomic::AtomicBool,
    go: tokio::sync::Notify,
}

static HOLDS: Mutex<Vec<(&'static str, std::sync::Arc<HoldPoint>)>> = Mutex::new(Vec::new());

/// Holds `point`: code of this process that reaches it waits until [`HoldPoint::release`].
pub fn hold(point: &'static str) -> std::sync::Arc<HoldPoint> {
    let held = std::sync::Arc::new(HoldPoint {
        reached: tokio::sync::Notify::new(),
        released: std::sync::atomic::AtomicBool::new(false),
        go: tokio::sync::Notify::new(),
    });
    let mut holds = HOLDS.lock().unwrap_or_else(|p| p.into_inner());
    holds.retain(|(name, _)| *name != point);
    holds.push((point, held.clone()));
    held
}

impl HoldPoint {
    /// Waits until code reaches the point (at once if it already has).
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets what waits at the point, and what reaches it later, go on.
    pub fn release(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.go.notify_waiters();
    }
}

/// Waits at `point` while a test holds it.
pub(crate) async fn pass(point: &str) {
    let held = HOLDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(name, _)| *name == point)
        .map(|(_, h)| h.clone());
    let Some(held) = held else {
        return;
    };
    held.reached.notify_one();
    loop {
        let go = held.go.notified();
        if held.released.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        go.await;
    }
}
