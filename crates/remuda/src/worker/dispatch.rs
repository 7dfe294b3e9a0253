//! The notification dispatcher of a worker: new jobs wake the producer, cancels stop running
//! jobs, and a periodic check stops jobs that are no longer the worker's own.

use super::Shared;
use crate::db::listener::Event;
use crate::runtime::lock;
use crate::Error;
use std::collections::HashSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Routes listener events: new jobs wake the producer, cancels stop running jobs. Every
/// heartbeat interval, and after the listener missed anything (reconnect, lag), it also asks
/// the database which of its running jobs are no longer its own (cancelled, rescued) and stops
/// them, so a lost notification cannot leave a cancelled command running.
pub(crate) async fn run(
    shared: Arc<Shared>,
    mut events: tokio::sync::broadcast::Receiver<Event>,
    stop: CancellationToken,
) {
    use tokio::sync::broadcast::error::RecvError;
    let queues: HashSet<String> = shared.config.queues.iter().cloned().collect();
    let mut reconcile_every = tokio::time::interval(shared.config.heartbeat_interval);
    reconcile_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        crate::runtime::supervise::fault_point("dispatch");
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            _ = reconcile_every.tick() => {
                reconcile(&shared).await;
                continue;
            }
            event = events.recv() => event,
        };
        match event {
            Ok(Event::Notification { channel, payload }) => match &*channel {
                "remuda_insert" if queues.contains(&*payload) => shared.wake.notify_one(),
                "remuda_queue" if &*payload == "*" || queues.contains(&*payload) => {
                    shared.settings.changed.notify_one();
                }
                "remuda_cancel_run" => {
                    let Some((worker, id, attempt)) = cancelled_run(&payload) else {
                        continue;
                    };
                    if worker != &*shared.worker_id {
                        continue;
                    }
                    #[cfg(feature = "testing")]
                    crate::testing::fault::pass("cancel heard").await;
                    cancel(&shared, id, attempt);
                    #[cfg(feature = "testing")]
                    crate::testing::fault::pass("cancel seen").await;
                }
                _ => {}
            },
            Ok(Event::Listening) | Err(RecvError::Lagged(_)) => {
                shared.wake.notify_one();
                reconcile(&shared).await;
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// The run a `remuda_cancel_run` payload names: its worker, job and attempt
/// (`worker:job:attempt`; read as well without the attempt, `worker:job`, which stands for
/// whatever run of the job the worker has).
fn cancelled_run(payload: &str) -> Option<(&str, i64, Option<i32>)> {
    let (rest, last) = payload.rsplit_once(':')?;
    let last = last.parse::<i64>().ok()?;
    // a worker's id ends in hex after a '-', never in ':' and digits
    match rest.rsplit_once(':') {
        Some((worker, id)) if !worker.is_empty() => match id.parse::<i64>() {
            Ok(id) => Some((worker, id, i32::try_from(last).ok())),
            Err(_) => Some((rest, last, None)),
        },
        _ => Some((rest, last, None)),
    }
}

/// Stops the run `attempt` of job `id` (any run when `None`), or remembers the cancel for an
/// executor about to start it: a cancel of an earlier run that arrives late never stops a
/// later one (a retry of the cancelled job that this worker claimed again).
fn cancel(shared: &Shared, id: i64, attempt: Option<i32>) {
    if let Some(running) = lock(&shared.running).get(&id) {
        match attempt {
            // a cancel of a later run than this one (being given back): for that run
            Some(a) if a > running.run.0 => {}
            Some(a) if a < running.run.0 => return,
            _ => {
                running.stop(crate::task::StopReason::Cancel, shared.config.cancel_grace);
                return;
            }
        }
    }
    let mut early = lock(&shared.early_cancels);
    early.retain(|_, (_, at)| at.elapsed() < std::time::Duration::from_secs(60));
    early.insert(id, (attempt, std::time::Instant::now()));
}

/// Stops the runs that the database says are no longer this worker's: each by its attempt
/// and claim time, so an answer about a run that has ended since cannot stop a later run of
/// the same job (which then ran a third time), and never remembered as an early cancel.
async fn reconcile(shared: &Shared) {
    let mut ids = Vec::new();
    let mut attempts = Vec::new();
    let mut started = Vec::new();
    for (id, running) in lock(&shared.running).iter() {
        ids.push(*id);
        attempts.push(running.run.0);
        started.push(running.run.1);
    }
    if ids.is_empty() {
        return;
    }
    let lost = async {
        let conn = shared.db.conn().await?;
        let rows = conn
            .query(
                crate::sql::RUNNING_LOST,
                &[&ids, &attempts, &started, &&*shared.worker_id],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?))))
            .collect::<Result<Vec<(i64, (i32, chrono::DateTime<chrono::Utc>))>, Error>>()
    };
    // an answer held up past a heartbeat is stale by then: the next check asks again
    let limit = shared
        .config
        .heartbeat_interval
        .max(std::time::Duration::from_secs(1));
    match tokio::time::timeout(limit, lost).await {
        Ok(Ok(lost)) => {
            #[cfg(feature = "testing")]
            if !lost.is_empty() {
                crate::testing::fault::pass("reconcile").await;
            }
            stop_runs(shared, &lost);
            #[cfg(feature = "testing")]
            if !lost.is_empty() {
                crate::testing::fault::pass("reconciled").await;
            }
        }
        Ok(Err(e)) => tracing::debug!("remuda worker: cannot check its running jobs: {e}"),
        Err(_) => tracing::debug!("remuda worker: the check of its running jobs timed out"),
    }
}

/// Stops each of the runs `lost` that is still the one running (the same attempt and claim).
fn stop_runs(shared: &Shared, lost: &[(i64, (i32, chrono::DateTime<chrono::Utc>))]) {
    let running = lock(&shared.running);
    for (id, run) in lost {
        if let Some(entry) = running.get(id).filter(|e| e.run == *run) {
            entry.stop(crate::task::StopReason::Cancel, shared.config.cancel_grace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cancelled_run;

    #[test]
    fn a_cancel_names_its_worker_job_and_attempt_and_an_older_release_any_run() {
        assert_eq!(
            cancelled_run("box:1-42-00ab12cd:7:3"),
            Some(("box:1-42-00ab12cd", 7, Some(3)))
        );
        assert_eq!(
            cancelled_run("box-42-00ab12cd:7"),
            Some(("box-42-00ab12cd", 7, None))
        );
        assert_eq!(
            cancelled_run("box:1-42-00ab12cd:7"),
            Some(("box:1-42-00ab12cd", 7, None)),
            "a worker's name may hold a colon"
        );
        assert_eq!(cancelled_run("nonsense"), None);
        assert_eq!(cancelled_run("w:x"), None);
    }
}
