//! A worker's view of its queues' settings (pause, limits) and the cluster's: read at start,
//! every second, and at once when `remuda_queue` says one changed, so a pause takes effect
//! cluster-wide within a second. Limits themselves are enforced by the database at claim
//! time (`claim_limited.sql`), never by this cache alone.

use super::Shared;
use crate::client::QueueSettings;
use crate::runtime::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Longest a change of settings goes unseen when its notification is lost.
const REFRESH: Duration = Duration::from_secs(1);

/// The cached settings.
#[derive(Default)]
pub(crate) struct Cache {
    queues: Mutex<HashMap<String, QueueSettings>>,
    cluster_max_running: Mutex<Option<i32>>,
    /// Notified when `remuda_queue` announces a change.
    pub changed: Notify,
}

impl Cache {
    /// The settings of `queue` (defaults when it has none).
    pub fn queue(&self, queue: &str) -> Option<QueueSettings> {
        lock(&self.queues).get(queue).cloned()
    }

    /// The cluster-wide cap on running jobs.
    pub fn cluster_max_running(&self) -> Option<i32> {
        *lock(&self.cluster_max_running)
    }
}

/// Reads the settings once; on failure the previous ones stay.
pub(crate) async fn refresh(shared: &Shared) {
    let read = async {
        let conn = shared.db.conn().await?;
        let rows = conn
            .query(crate::sql::QUEUE_GET, &[&shared.config.queues])
            .await?;
        let settings = rows
            .iter()
            .map(QueueSettings::from_row)
            .collect::<crate::Result<Vec<_>>>()?;
        let max: Option<i32> = conn
            .query_one(crate::sql::CLUSTER_GET, &[])
            .await?
            .try_get("max_running")?;
        Ok::<_, crate::Error>((settings, max))
    };
    match tokio::time::timeout(REFRESH * 2, read).await {
        Ok(Ok((settings, max))) => {
            let unpaused = {
                let mut queues = lock(&shared.settings.queues);
                let was_paused: Vec<String> = queues
                    .values()
                    .filter(|s| s.paused)
                    .map(|s| s.name.clone())
                    .collect();
                queues.clear();
                for s in settings {
                    queues.insert(s.name.clone(), s);
                }
                was_paused
                    .iter()
                    .any(|q| !queues.get(q).is_some_and(|s| s.paused))
            };
            *lock(&shared.settings.cluster_max_running) = max;
            if unpaused {
                shared.wake.notify_one();
            }
        }
        Ok(Err(e)) => tracing::debug!("remuda worker: cannot read queue settings: {e}"),
        Err(_) => tracing::debug!("remuda worker: reading queue settings got no answer"),
    }
}

/// Refreshes every second and on notifications, until `stop`.
pub(crate) async fn run(shared: std::sync::Arc<Shared>, stop: CancellationToken) {
    loop {
        crate::runtime::supervise::fault_point("settings");
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(REFRESH) => {}
            _ = shared.settings.changed.notified() => {}
        }
        refresh(&shared).await;
    }
}
