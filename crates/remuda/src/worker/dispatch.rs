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
                "remuda_cancel" => {
                    let Some((worker, id)) = payload.rsplit_once(':') else {
                        continue;
                    };
                    if worker != &*shared.worker_id {
                        continue;
                    }
                    if let Ok(id) = id.parse::<i64>() {
                        cancel(&shared, id);
                    }
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

/// Stops a running job, or remembers the cancel for an executor about to start.
fn cancel(shared: &Shared, id: i64) {
    if let Some(running) = lock(&shared.running).get(&id) {
        running.stop(crate::task::StopReason::Cancel, shared.config.cancel_grace);
        return;
    }
    let mut early = lock(&shared.early_cancels);
    early.retain(|_, at| at.elapsed() < std::time::Duration::from_secs(60));
    early.insert(id, std::time::Instant::now());
}

/// Stops the running jobs that the database says are no longer this worker's.
async fn reconcile(shared: &Shared) {
    let ids: Vec<i64> = lock(&shared.running).keys().copied().collect();
    if ids.is_empty() {
        return;
    }
    let lost = async {
        let conn = shared.db.conn().await?;
        let rows = conn
            .query(crate::sql::RUNNING_LOST, &[&ids, &&*shared.worker_id])
            .await?;
        Ok::<Vec<i64>, Error>(rows.iter().map(|r| r.get(0)).collect())
    };
    match lost.await {
        Ok(lost) => {
            for id in lost {
                cancel(shared, id);
            }
        }
        Err(e) => tracing::debug!("remuda worker: cannot check its running jobs: {e}"),
    }
}
