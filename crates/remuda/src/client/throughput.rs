//! Throughput and failure rate per queue over a recent window (`remuda stats`), counted in
//! the index of finished jobs: only the window's entries are read.

use super::Client;
use crate::{sql, Error, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// One queue's recent work.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Throughput {
    /// The queue.
    pub queue: String,
    /// Jobs that completed within the window.
    pub completed: i64,
    /// Jobs that failed for good within the window.
    pub failed: i64,
    /// Finished jobs (completed and failed) per second over the window.
    pub per_second: f64,
    /// The share of finished jobs that failed (0 when none finished).
    pub failure_rate: f64,
    /// The window, in seconds.
    pub window_seconds: f64,
}

impl Client {
    /// Per queue, how many jobs completed and failed within `window` before now.
    pub async fn throughput(&self, window: Duration) -> Result<Vec<Throughput>> {
        let ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        if ms <= 0 {
            return Err(Error::InvalidInput(
                "the window must be at least 1ms".into(),
            ));
        }
        let conn = self.database().conn().await?;
        let mut by_queue: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for row in conn.query(sql::THROUGHPUT, &[&ms]).await? {
            let queue: String = row.try_get("queue")?;
            let state: String = row.try_get("state")?;
            let jobs: i64 = row.try_get("jobs")?;
            let entry = by_queue.entry(queue).or_default();
            if state == "completed" {
                entry.0 += jobs;
            } else {
                entry.1 += jobs;
            }
        }
        let seconds = window.as_secs_f64();
        Ok(by_queue
            .into_iter()
            .map(|(queue, (completed, failed))| {
                let finished = (completed + failed) as f64;
                Throughput {
                    queue,
                    completed,
                    failed,
                    per_second: finished / seconds,
                    failure_rate: if finished > 0.0 {
                        failed as f64 / finished
                    } else {
                        0.0
                    },
                    window_seconds: seconds,
                }
            })
            .collect())
    }
}
