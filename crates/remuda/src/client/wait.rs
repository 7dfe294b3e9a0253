//! Waiting for a job's result. The waiter marks the job `awaited` (one write, paid only by
//! awaited jobs); the completer then sends `remuda_done` for it at its final write, which the
//! shared listener hands to the waiter. A slow poll covers a listener that is reconnecting.

use super::Client;
use crate::db::listener::Event;
use crate::job::Job;
use crate::{sql, Error, Result};
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;

/// How often a waiter re-reads the job in case a notification was missed.
const FALLBACK_POLL: Duration = Duration::from_secs(1);

impl Client {
    /// Waits until the job reaches a final state (completed, failed, cancelled, expired) and
    /// returns it; [`Error::WaitTimeout`] if it has not after `timeout`.
    pub async fn wait(&self, id: i64, timeout: Duration) -> Result<Job> {
        // Duration::MAX means "as long as it takes": cap at a century
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 86_400));
        let listener = self.listener();
        let mut events = listener.subscribe();
        // Listening must be in place before the mark, or a completion in between is missed.
        let listening = listener.ready(timeout.min(Duration::from_secs(5))).await;
        {
            let conn = self.database().conn().await?;
            conn.execute(sql::WAIT_MARK, &[&id]).await?;
        }
        let wanted = id.to_string();
        loop {
            let job = self.job(id).await?.ok_or(Error::NotFound(id))?;
            if job.state.is_final() {
                return Ok(job);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::WaitTimeout { id, after: timeout });
            }
            let poll = if listening {
                FALLBACK_POLL
            } else {
                Duration::from_millis(100)
            };
            // Wait for our notification (or a reconnect, or the poll interval).
            notice(
                &mut events,
                "remuda_done",
                &wanted,
                deadline.min(now + poll),
            )
            .await;
        }
    }
}

/// Waits until `until` for notification (`channel`, `payload`), returning early also when
/// the listener reconnected or fell behind (the caller then reads the state again).
pub(crate) async fn notice(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    channel: &str,
    payload: &str,
    until: Instant,
) {
    loop {
        match tokio::time::timeout_at(until.into(), events.recv()).await {
            Err(_) => return,
            Ok(Ok(Event::Notification {
                channel: c,
                payload: p,
            })) => {
                if &*c == channel && *p == *payload {
                    return;
                }
            }
            Ok(Ok(Event::Listening)) | Ok(Err(RecvError::Lagged(_))) => return,
            Ok(Err(RecvError::Closed)) => {
                tokio::time::sleep_until(until.into()).await;
                return;
            }
        }
    }
}
