//! Maintenance, run by one elected worker at a time: promote due scheduled jobs, rescue the
//! jobs of dead workers (and forget those workers), expire jobs past their start deadline,
//! fire schedules, delete finished jobs past their retention and idle rate buckets (the
//! duties of `duties.rs`), and report each duty's latest run (`journal.rs`).
//!
//! Every worker runs [`run`]: its election loop tries each interval to take or renew the
//! leader lease (`leader_elect.sql`) and publishes the lease it holds, if any. Each duty is a
//! supervised task of its own with its own pace (rescue and expiry each interval, promotion
//! and schedules as they fall due, retention each `prune_interval`), acting only while a lease is published, so a slow one (a big expiry
//! backlog) never delays rescue or promotion. The lease lasts three maintenance intervals,
//! but a leader whose worker is dead by liveness (silent past its own `rescue_after`) loses
//! it at once: a killed leader is replaced, and its jobs rescued, within
//! `rescue_after + maintenance_interval`, like any other dead worker's. One that stops
//! cleanly resigns at once.

mod duties;
mod firer;
mod journal;
mod leader;
mod promoter;
mod reindexer;
mod rescuer;
mod retention;
mod timers;

pub use journal::{DutyRun, LeaderInfo, MaintenanceStatus};
pub(crate) use retention::prune;
pub use retention::{Keep, Pruned, Retention};

pub(crate) use leader::resign;

use crate::db::Database;
use crate::runtime::supervise::{self, Failures};
use journal::Journal;
use leader::Lease;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How maintenance runs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub interval: Duration,
    pub promote_interval: Duration,
    pub prune_interval: Duration,
    pub reindex_interval: Duration,
    pub retention: Retention,
    /// Where the rescues are counted.
    pub metrics: crate::metrics::Metrics,
    /// Rounds of the rescue run so far (every few, it also looks for workers the registry
    /// lost: see `duties.rs`).
    pub rescue_rounds: Arc<std::sync::atomic::AtomicU32>,
}

/// Connections maintenance may hold at once: the election and each duty.
pub(crate) const CONNECTIONS: usize = 1 + duties::DUTIES.len();

/// Runs maintenance for this worker until `stop`: the election loop here, each duty as a
/// supervised task reporting to `failures`. Every write goes under the lease it was given
/// (see `leader.rs`).
pub(crate) async fn run(
    db: Database,
    worker_id: Arc<str>,
    settings: Settings,
    stop: CancellationToken,
    failures: Arc<Failures>,
) {
    let (publish, lease) = watch::channel(None);
    let interval = settings.interval;
    let settings = Arc::new(settings);
    let journal = Arc::new(Journal::default());
    // aborted with this task (a worker that cannot wait for maintenance to end), the duties
    // are aborted too
    let duties: Vec<_> = duties::DUTIES
        .iter()
        .enumerate()
        .map(|(position, (name, step))| {
            let duty = Duty {
                name,
                step: *step,
                db: db.clone(),
                settings: settings.clone(),
                journal: journal.clone(),
                turn: stagger(interval, position),
            };
            supervise::AbortOnDrop(spawn_duty(duty, &lease, &stop, &failures))
        })
        .collect();
    elect_until(&db, &worker_id, interval, &publish, &journal, &stop).await;
    for mut duty in duties {
        let _ = (&mut duty.0).await;
    }
}

/// Takes or renews the lease each `interval` until `stop`, publishing the lease held (a
/// change of holder or term only: a renewal wakes no duty).
async fn elect_until(
    db: &Database,
    worker_id: &str,
    interval: Duration,
    publish: &watch::Sender<Option<Lease>>,
    journal: &Journal,
    stop: &CancellationToken,
) {
    let lease = interval * 3;
    loop {
        crate::runtime::supervise::fault_point("maintenance");
        let next_round = Instant::now() + interval;
        let held = match leader::elect(db, worker_id, lease).await {
            Ok(elected) => elected,
            Err(e) => {
                tracing::warn!("remuda maintenance: leader election failed: {e}");
                None
            }
        };
        publish.send_if_modified(|current| {
            if *current == held {
                return false;
            }
            if held.is_some() && current.is_none() {
                tracing::info!("remuda worker {worker_id} is now the maintenance leader");
            }
            *current = held.clone();
            true
        });
        if let Some(held) = &held {
            if let Err(e) = journal.flush(db, held).await {
                tracing::debug!("remuda maintenance: cannot record the duties' runs: {e}");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next_round.into()) => {}
        }
    }
}

/// A duty and what its step needs.
struct Duty {
    name: &'static str,
    step: duties::Step,
    db: Database,
    settings: Arc<Settings>,
    journal: Arc<Journal>,
    /// How long after the lease is taken its first step waits (see [`stagger`]).
    turn: Duration,
}

/// When the duty at `position` first runs after this worker takes the lease: the duties
/// take turns, `interval / duties` apart (at most 100 ms, so the last of the ten runs
/// within a second), in the order of `duties::DUTIES` (rescue first). Run all at once, each
/// opened a connection and planned its statements on the cores that a worker just started
/// needs for its first claims and completions: the first claim of 2 000 jobs took 41 ms
/// instead of 17 and the first completions 35-57 ms each (a 100 000-job drain on two cores).
fn stagger(interval: Duration, position: usize) -> Duration {
    let count = u32::try_from(duties::DUTIES.len()).unwrap_or(u32::MAX);
    let step = (interval / count).min(Duration::from_millis(100));
    step * u32::try_from(position).unwrap_or(u32::MAX)
}

impl Duty {
    /// One step with `held`, journaled; when to run again.
    async fn run(&self, held: Lease) -> Instant {
        let started_at = chrono::Utc::now();
        let clock = Instant::now();
        let ran = (self.step)(self.db.clone(), held, self.settings.clone()).await;
        if let Err(e) = &ran.outcome {
            tracing::warn!("remuda maintenance: {} failed: {e}", self.name);
        }
        let entry = journal::Entry {
            started_at,
            duration_ms: clock.elapsed().as_secs_f64() * 1000.0,
            outcome: ran.outcome,
        };
        self.journal.record(self.name, entry);
        ran.next
    }
}

/// Spawns `duty`: while a lease is published, its step runs with it and says when to run
/// again; a new lease (or none) is taken into account at once. A lease taken when none was
/// held runs the first step after the duty's turn (see [`stagger`]).
fn spawn_duty(
    duty: Duty,
    lease: &watch::Receiver<Option<Lease>>,
    stop: &CancellationToken,
    failures: &Arc<Failures>,
) -> tokio::task::JoinHandle<()> {
    let mut lease = lease.clone();
    let until = stop.clone();
    let name = duty.name;
    let task = async move {
        let mut leading = false;
        loop {
            let held = lease.borrow_and_update().clone();
            let next = match held {
                Some(_) if !leading => {
                    leading = true;
                    Some(Instant::now() + duty.turn)
                }
                Some(held) => Some(duty.run(held).await),
                None => {
                    leading = false;
                    None
                }
            };
            tokio::select! {
                _ = until.cancelled() => return,
                changed = lease.changed() => if changed.is_err() { return },
                _ = sleep_until(next) => {}
            }
        }
    };
    crate::runtime::supervise::spawn(name, task, supervise::until(stop), failures.clone())
}

/// Sleeps until `at`, or for ever when there is nothing to wait for.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod reindex_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod schedule_tests;
#[cfg(test)]
mod test_leases;
#[cfg(test)]
mod tests;
