//! What the workers ran over the last minutes, per queue and minute, from the tallies they add
//! to `remuda.queue_minutes` with their heartbeats: throughput, failure rate, and wait and
//! run percentiles, read without touching the job table (the dashboard's overview, `GET
//! /api/v1/activity`). Figures are as fresh as the last heartbeat of each worker.

use super::Client;
use crate::metrics::BUCKETS;
use crate::{sql, Error, Result};
use chrono::{DateTime, Duration as Span, Utc};
use serde::Serialize;

/// The longest window read: a week, as long as the minutes are kept by default.
pub const MAX_ACTIVITY_MINUTES: i32 = 7 * 24 * 60;

/// One minute of one queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MinuteActivity {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    /// Attempts that completed.
    pub completed: i64,
    /// Attempts that failed for good.
    pub failed: i64,
    /// Attempts that failed and will be tried again.
    pub retried: i64,
}

/// One queue's work over the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueActivity {
    /// The queue.
    pub queue: String,
    /// Attempts that completed within the window.
    pub completed: i64,
    /// Attempts that failed for good.
    pub failed: i64,
    /// Attempts that failed and will be tried again.
    pub retried: i64,
    /// Finished jobs (completed and failed) per minute over the window.
    pub per_minute: f64,
    /// The share of finished jobs that failed (0 when none finished).
    pub failure_rate: f64,
    /// Median time from when a job was due to its start, in milliseconds (none without work).
    pub wait_p50_ms: Option<f64>,
    /// 95th percentile of the wait.
    pub wait_p95_ms: Option<f64>,
    /// Median run time of an attempt, in milliseconds.
    pub run_p50_ms: Option<f64>,
    /// 95th percentile of the run time.
    pub run_p95_ms: Option<f64>,
    /// Every minute of the window, oldest first, the current one last (zeros where nothing
    /// ran).
    pub minutes: Vec<MinuteActivity>,
}

/// The running sums of one queue while its rows are read.
struct Sums {
    activity: QueueActivity,
    wait: Vec<i64>,
    run: Vec<i64>,
}

impl Client {
    /// Per queue that ran anything, its work over the last `minutes` minutes (the current,
    /// partial minute included), 1 to [`MAX_ACTIVITY_MINUTES`].
    pub async fn activity(&self, minutes: i32) -> Result<Vec<QueueActivity>> {
        if !(1..=MAX_ACTIVITY_MINUTES).contains(&minutes) {
            return Err(Error::InvalidInput(format!(
                "the window is {minutes} minutes: give 1 to {MAX_ACTIVITY_MINUTES} (a week)"
            )));
        }
        let conn = self.database().conn().await?;
        let rows = conn.query(sql::ACTIVITY_READ, &[&minutes]).await?;
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let now: DateTime<Utc> = first.try_get("now_minute")?;
        let start = now - Span::minutes(i64::from(minutes) - 1);
        let mut queues: Vec<Sums> = Vec::new();
        for row in &rows {
            let Some(queue) = row.try_get::<_, Option<String>>("queue")? else {
                continue;
            };
            if queues
                .last()
                .map(|q| q.activity.queue != queue)
                .unwrap_or(true)
            {
                queues.push(Sums::new(queue, start, minutes));
            }
            let Some(sums) = queues.last_mut() else {
                continue;
            };
            let minute: DateTime<Utc> = row.try_get("minute")?;
            let entry = MinuteActivity {
                minute,
                completed: row.try_get("completed")?,
                failed: row.try_get("failed")?,
                retried: row.try_get("retried")?,
            };
            sums.add(
                start,
                entry,
                &row.try_get::<_, Vec<i64>>("wait")?,
                &row.try_get::<_, Vec<i64>>("run")?,
            );
        }
        Ok(queues.into_iter().map(Sums::finish).collect())
    }
}

impl Sums {
    fn new(queue: String, start: DateTime<Utc>, minutes: i32) -> Sums {
        let minutes = (0..i64::from(minutes))
            .map(|i| MinuteActivity {
                minute: start + Span::minutes(i),
                ..MinuteActivity::default()
            })
            .collect();
        Sums {
            activity: QueueActivity {
                queue,
                completed: 0,
                failed: 0,
                retried: 0,
                per_minute: 0.0,
                failure_rate: 0.0,
                wait_p50_ms: None,
                wait_p95_ms: None,
                run_p50_ms: None,
                run_p95_ms: None,
                minutes,
            },
            wait: vec![0; BUCKETS.len() + 1],
            run: vec![0; BUCKETS.len() + 1],
        }
    }

    fn add(&mut self, start: DateTime<Utc>, entry: MinuteActivity, wait: &[i64], run: &[i64]) {
        let a = &mut self.activity;
        a.completed += entry.completed;
        a.failed += entry.failed;
        a.retried += entry.retried;
        add_counts(&mut self.wait, wait);
        add_counts(&mut self.run, run);
        let index = (entry.minute - start).num_minutes();
        if let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|i| a.minutes.get_mut(i))
        {
            slot.completed += entry.completed;
            slot.failed += entry.failed;
            slot.retried += entry.retried;
        }
    }

    fn finish(mut self) -> QueueActivity {
        let a = &mut self.activity;
        let finished = (a.completed + a.failed) as f64;
        a.per_minute = finished / a.minutes.len().max(1) as f64;
        a.failure_rate = if finished > 0.0 {
            a.failed as f64 / finished
        } else {
            0.0
        };
        let ms = |q: Option<f64>| q.map(|s| s * 1000.0);
        a.wait_p50_ms = ms(quantile(&self.wait, 0.5));
        a.wait_p95_ms = ms(quantile(&self.wait, 0.95));
        a.run_p50_ms = ms(quantile(&self.run, 0.5));
        a.run_p95_ms = ms(quantile(&self.run, 0.95));
        self.activity
    }
}

/// Adds counts bucket by bucket (buckets beyond the known ones go to the last).
fn add_counts(into: &mut [i64], counts: &[i64]) {
    let last = into.len() - 1;
    for (i, n) in counts.iter().enumerate() {
        into[i.min(last)] += n;
    }
}

/// The `q` quantile, in seconds, of a histogram of counts per bucket of [`BUCKETS`] (the last
/// bucket beyond them), interpolated within its bucket as Prometheus' `histogram_quantile`
/// does; the last bound for anything beyond it; none for an empty histogram.
fn quantile(counts: &[i64], q: f64) -> Option<f64> {
    let total: i64 = counts.iter().sum();
    if total <= 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0i64;
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let Some(&upper) = BUCKETS.get(i) else {
                return BUCKETS.last().copied();
            };
            let lower = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
            let within = (rank - below as f64) / n as f64;
            return Some(lower + (upper - lower) * within);
        }
        below += n;
    }
    BUCKETS.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(usize, i64)]) -> Vec<i64> {
        let mut c = vec![0; BUCKETS.len() + 1];
        for &(i, n) in pairs {
            c[i] = n;
        }
        c
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_that_holds_the_rank() {
        // 100 attempts between 10 ms and 25 ms: the median halfway
        let c = counts(&[(4, 100)]);
        let p50 = quantile(&c, 0.5).expect("p50");
        assert!((p50 - 0.0175).abs() < 1e-9, "{p50}");
        // 90 fast ones and 10 between 1 s and 2.5 s: the 95th percentile among the slow
        let c = counts(&[(0, 90), (10, 10)]);
        let p95 = quantile(&c, 0.95).expect("p95");
        assert!((p95 - 1.75).abs() < 1e-9, "{p95}");
        assert!(quantile(&c, 0.5).expect("p50") <= 0.001);
    }

    #[test]
    fn an_empty_histogram_has_no_quantile_and_beyond_the_last_bound_is_the_last_bound() {
        assert_eq!(quantile(&counts(&[]), 0.5), None);
        let c = counts(&[(BUCKETS.len(), 3)]);
        assert_eq!(quantile(&c, 0.5), BUCKETS.last().copied());
    }
}
