//! What this worker ran, tallied per queue and minute and added to `remuda.queue_minutes`
//! with each heartbeat: the dashboard's overview reads the last hour there (throughput,
//! failure rate, wait and run percentiles) instead of the job table.
//!
//! Recording is a lock and a few additions per attempt; a tally that cannot be written
//! (the database is away) is kept and added with the next heartbeat.

use crate::db::Database;
use crate::metrics::BUCKETS;
use crate::runtime::lock;
use crate::{sql, Result};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Buckets of a tallied histogram: one per bound of [`BUCKETS`], and one beyond the last.
pub const BINS: usize = BUCKETS.len() + 1;

/// How an attempt ended, as tallied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    Completed,
    /// Failed for good.
    Failed,
    /// Failed and will be tried again.
    Retried,
}

/// One queue's attempts within one minute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub completed: i64,
    pub failed: i64,
    pub retried: i64,
    /// Counts per bucket of the time from `run_at` to the start.
    pub wait: [i64; BINS],
    /// Counts per bucket of the time the attempt ran.
    pub run: [i64; BINS],
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.completed += other.completed;
        self.failed += other.failed;
        self.retried += other.retried;
        for i in 0..BINS {
            self.wait[i] += other.wait[i];
            self.run[i] += other.run[i];
        }
    }
}

/// The bucket a duration in seconds falls in.
pub fn bin(seconds: f64) -> usize {
    BUCKETS
        .iter()
        .position(|bound| seconds <= *bound)
        .unwrap_or(BUCKETS.len())
}

/// The tallies not yet written, by queue and minute (Unix seconds at the minute's start).
#[derive(Debug, Default)]
pub(crate) struct Activity {
    tallies: Mutex<HashMap<String, HashMap<i64, Tally>>>,
    /// Set while a write is under way.
    writing: AtomicBool,
}

impl Activity {
    /// Whether the caller may start a write (none is under way); it calls
    /// [`done_writing`](Self::done_writing) after.
    pub fn start_writing(&self) -> bool {
        !self.writing.swap(true, Ordering::AcqRel)
    }

    /// Ends the write [`start_writing`](Self::start_writing) allowed.
    pub fn done_writing(&self) {
        self.writing.store(false, Ordering::Release);
    }

    /// Counts attempts that ended now, each `(queue, how, waited, ran)`: one clock reading
    /// and one lock for them all (the completer counts a batch of outcomes at once).
    pub fn record<'a>(&self, attempts: impl IntoIterator<Item = (&'a str, Ended, f64, f64)>) {
        let minute = Utc::now().timestamp().div_euclid(60) * 60;
        let mut tallies = lock(&self.tallies);
        for (queue, ended, waited, ran) in attempts {
            let by_minute = match tallies.get_mut(queue) {
                Some(by_minute) => by_minute,
                None => tallies.entry(queue.to_owned()).or_default(),
            };
            let tally = by_minute.entry(minute).or_default();
            match ended {
                Ended::Completed => tally.completed += 1,
                Ended::Failed => tally.failed += 1,
                Ended::Retried => tally.retried += 1,
            }
            tally.wait[bin(waited)] += 1;
            tally.run[bin(ran)] += 1;
        }
    }

    /// Takes every tally out, to write.
    fn take(&self) -> HashMap<String, HashMap<i64, Tally>> {
        std::mem::take(&mut *lock(&self.tallies))
    }

    /// Puts back tallies that could not be written, adding them to what came since.
    fn put_back(&self, taken: HashMap<String, HashMap<i64, Tally>>) {
        let mut tallies = lock(&self.tallies);
        for (queue, by_minute) in taken {
            let into = tallies.entry(queue).or_default();
            for (minute, tally) in by_minute {
                into.entry(minute).or_default().add(&tally);
            }
        }
    }

    /// Adds the tallies to `remuda.queue_minutes` in one transaction; on failure they are
    /// kept for the next call.
    pub async fn flush(&self, db: &Database) -> Result<()> {
        let taken = self.take();
        if taken.is_empty() {
            return Ok(());
        }
        let written = write(db, &taken).await;
        if written.is_err() {
            self.put_back(taken);
        }
        written
    }
}

async fn write(db: &Database, tallies: &HashMap<String, HashMap<i64, Tally>>) -> Result<()> {
    let mut conn = db.conn().await?;
    let tx = conn.transaction().await?;
    // a fixed order: two workers adding to the same minutes never wait on each other in a cycle
    let mut rows: Vec<(&String, &i64, &Tally)> = tallies
        .iter()
        .flat_map(|(queue, by_minute)| by_minute.iter().map(move |(m, t)| (queue, m, t)))
        .collect();
    rows.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (queue, minute, tally) in rows {
        let at: DateTime<Utc> = DateTime::from_timestamp(*minute, 0).unwrap_or_default();
        tx.execute(
            sql::ACTIVITY_ADD,
            &[
                queue,
                &at,
                &tally.completed,
                &tally.failed,
                &tally.retried,
                &tally.wait.as_slice(),
                &tally.run.as_slice(),
            ],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_in_the_bucket_of_their_upper_bound_and_longer_ones_in_the_last() {
        assert_eq!(bin(0.0), 0);
        assert_eq!(bin(0.001), 0);
        assert_eq!(bin(0.0011), 1);
        assert_eq!(bin(300.0), BUCKETS.len() - 1);
        assert_eq!(bin(301.0), BUCKETS.len());
    }

    #[test]
    fn tallies_put_back_add_to_the_ones_recorded_since() {
        let activity = Activity::default();
        activity.record([("q", Ended::Completed, 0.0, 0.0)]);
        let taken = activity.take();
        activity.record([("q", Ended::Failed, 0.0, 10.0)]);
        activity.put_back(taken);
        let all = activity.take();
        let tally = all["q"].values().fold(Tally::default(), |mut sum, t| {
            sum.add(t);
            sum
        });
        assert_eq!((tally.completed, tally.failed, tally.wait[0]), (1, 1, 2));
        assert_eq!(tally.run[bin(10.0)], 1);
    }
}
