//! The queues' counts and settings, shared by every page, API call and scrape of one
//! dashboard: counted at most once a second however many people and scrapers look.
//!
//! Counting reads each state's index (see `queue_counts.sql`): tens of milliseconds with
//! 100 000 waiting jobs, up to a second while workers drain beside it. So, as Oban's and
//! Sidekiq's dashboards keep their stats, the last count is kept: while it is fresh it is
//! served as it is; up to [`USABLE`] old it is served while one count runs in the
//! background; older (or none yet) it is counted first, once for every request waiting. A
//! count is fresh for [`FRESH`], or for ten times as long as it took if that is longer, so
//! that counting never takes more than a tenth of a database connection's time however
//! many look. Every change the dashboard makes drops it, so what a page shows after an
//! action includes that action.

use remuda::{Client, QueueStats, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How old a count is at least served without counting again.
pub const FRESH: Duration = Duration::from_secs(1);
/// How old a count may be served while a new one is made.
pub const USABLE: Duration = Duration::from_secs(30);

/// A count: when it was begun, how long it stays fresh, what it found.
#[derive(Clone)]
struct Count {
    at: Instant,
    fresh_for: Duration,
    queues: Arc<Vec<QueueStats>>,
}

impl Count {
    fn fresh(&self) -> bool {
        self.at.elapsed() < self.fresh_for
    }
}

/// The last count, and what it was made for.
#[derive(Default)]
pub(crate) struct QueueCounts {
    last: Mutex<Option<Count>>,
    /// Held while counting: one count at a time.
    counting: tokio::sync::Mutex<()>,
    /// Bumped by every change: a count begun before one is not kept.
    generation: AtomicU64,
}

impl QueueCounts {
    /// The queues, counted no longer than [`USABLE`] ago (see the module's doc).
    pub async fn get(self: &Arc<Self>, client: &Client) -> Result<Arc<Vec<QueueStats>>> {
        match self.last() {
            Some(count) if count.fresh() => return Ok(count.queues),
            Some(count) if count.at.elapsed() < USABLE => {
                self.count_in_background(client);
                return Ok(count.queues);
            }
            _ => {}
        }
        let _counting = self.counting.lock().await;
        // another request may have counted while this one waited
        match self.last() {
            Some(count) if count.fresh() => Ok(count.queues),
            _ => self.count(client).await,
        }
    }

    /// Forgets the last count: the next request counts again.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        *self.slot() = None;
    }

    fn last(&self) -> Option<Count> {
        self.slot().clone()
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Count>> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts (the caller holds `counting`) and keeps the count unless a change came since.
    async fn count(&self, client: &Client) -> Result<Arc<Vec<QueueStats>>> {
        let generation = self.generation.load(Ordering::SeqCst);
        let started = Instant::now();
        let queues = Arc::new(client.queue_stats_capped(Some(remuda::COUNT_CAP)).await?);
        let fresh_for = (started.elapsed() * 10).clamp(FRESH, USABLE);
        let mut slot = self.slot();
        if self.generation.load(Ordering::SeqCst) == generation {
            *slot = Some(Count {
                at: started,
                fresh_for,
                queues: queues.clone(),
            });
        }
        Ok(queues)
    }

    /// Starts a count unless one is under way.
    fn count_in_background(self: &Arc<Self>, client: &Client) {
        let (counts, client) = (self.clone(), client.clone());
        tokio::spawn(async move {
            let Ok(_counting) = counts.counting.try_lock() else {
                return;
            };
            if counts.last().is_some_and(|count| count.fresh()) {
                return;
            }
            if let Err(e) = counts.count(&client).await {
                tracing::warn!("remuda dashboard: counting the queues failed: {e}");
            }
        });
    }
}
