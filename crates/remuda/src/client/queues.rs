//! Queue and cluster settings (flow control): pause, limits, admission control. Stored in
//! `remuda.queues` and `remuda.cluster`; every change notifies `remuda_queue`, and workers
//! also re-read their queues' settings every second.

use super::Client;
use crate::maintenance::Keep;
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// The settings of one queue. A queue never configured has the defaults: running, no limits.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct QueueSettings {
    /// The queue's name.
    pub name: String,
    /// Paused: workers claim nothing from it (it still accepts jobs).
    pub paused: bool,
    /// Most of its jobs running at once, cluster-wide.
    pub max_running: Option<i32>,
    /// Most running jobs per concurrency key, cluster-wide.
    pub key_limit: Option<i32>,
    /// Most starts per period, shared by all workers: (starts, period).
    #[serde(serialize_with = "rate_json")]
    pub rate: Option<(i32, Duration)>,
    /// What the rate applies to: the queue as a whole, each kind, or each concurrency key.
    pub rate_per: RatePer,
    /// Most starts at once (the bucket's size; `None`: the rate's N): 1 spreads the starts
    /// evenly over the period.
    pub rate_burst: Option<i32>,
    /// Most jobs waiting (available or scheduled); an enqueue beyond it is refused.
    pub max_depth: Option<i32>,
    /// How its starts are shared: first come first served, or between the jobs' groups by
    /// weight (see [`Client::set_group_weight`]).
    pub fairness: Fairness,
    /// How long its finished jobs are kept, per final state (`None`: the workers'
    /// `[retention]`).
    pub retention: QueueRetention,
    /// When the settings last changed (`None`: never configured).
    pub updated_at: Option<DateTime<Utc>>,
}

fn rate_json<S: serde::Serializer>(
    rate: &Option<(i32, Duration)>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match rate {
        Some((n, period)) => s.serialize_str(&format!("{n}/{}", crate::duration::format(*period))),
        None => s.serialize_none(),
    }
}

impl QueueSettings {
    /// The settings of a queue never configured.
    pub fn new(name: impl Into<String>) -> Self {
        QueueSettings {
            name: name.into(),
            paused: false,
            max_running: None,
            key_limit: None,
            rate: None,
            rate_per: RatePer::Queue,
            rate_burst: None,
            max_depth: None,
            fairness: Fairness::None,
            retention: QueueRetention::default(),
            updated_at: None,
        }
    }

    /// Whether claims from this queue must count running jobs or tokens (a limit is set), or
    /// share starts between groups.
    pub fn limits_claims(&self) -> bool {
        self.max_running.is_some()
            || self.key_limit.is_some()
            || self.rate.is_some()
            || self.fairness != Fairness::None
    }

    pub(crate) fn from_row(row: &tokio_postgres::Row) -> Result<Self> {
        let rate_limit: Option<i32> = row.try_get("rate_limit")?;
        let period_ms: Option<i64> = row.try_get("rate_period_ms")?;
        Ok(QueueSettings {
            name: row.try_get("name")?,
            paused: row.try_get("paused")?,
            max_running: row.try_get("max_running")?,
            key_limit: row.try_get("key_limit")?,
            rate: rate_limit
                .zip(period_ms)
                .map(|(n, ms)| (n, Duration::from_millis(u64::try_from(ms).unwrap_or(1)))),
            rate_per: row
                .try_get::<_, String>("rate_per")?
                .parse()
                .map_err(Error::InvalidInput)?,
            rate_burst: row.try_get("rate_burst")?,
            max_depth: row.try_get("max_depth")?,
            fairness: row
                .try_get::<_, Option<String>>("fairness")?
                .as_deref()
                .unwrap_or("none")
                .parse()
                .map_err(Error::InvalidInput)?,
            retention: QueueRetention {
                completed: keep(row, "retain_completed_ms")?,
                failed: keep(row, "retain_failed_ms")?,
                cancelled: keep(row, "retain_cancelled_ms")?,
                expired: keep(row, "retain_expired_ms")?,
            },
            updated_at: Some(row.try_get("updated_at")?),
        })
    }
}

/// A queue's own retention per final state; `None` takes the workers' `[retention]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueRetention {
    /// Completed jobs.
    pub completed: Option<Keep>,
    /// Failed jobs.
    pub failed: Option<Keep>,
    /// Cancelled jobs.
    pub cancelled: Option<Keep>,
    /// Expired jobs.
    pub expired: Option<Keep>,
}

fn keep(row: &tokio_postgres::Row, column: &str) -> Result<Option<Keep>> {
    Ok(row.try_get::<_, Option<i64>>(column)?.map(Keep::from_ms))
}

/// What a rate limit counts starts of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatePer {
    /// One bucket for the whole queue.
    #[default]
    Queue,
    /// One bucket per kind in the queue.
    Kind,
    /// One bucket per concurrency key in the queue (jobs without a key share one).
    Key,
}

impl RatePer {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            RatePer::Queue => "queue",
            RatePer::Kind => "kind",
            RatePer::Key => "key",
        }
    }
}

impl std::str::FromStr for RatePer {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "queue" => Ok(RatePer::Queue),
            "kind" => Ok(RatePer::Kind),
            "key" => Ok(RatePer::Key),
            other => Err(format!(
                "a rate applies per queue, kind or key, not {other:?}"
            )),
        }
    }
}

/// How a queue shares its starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fairness {
    /// First come first served, by priority (per-key turns with a key limit).
    #[default]
    None,
    /// Weighted fair share between the jobs' groups: under backlog each group's share of the
    /// starts follows its weight, whatever its number of jobs or keys; a group with nothing
    /// waiting leaves its share to the others.
    Group,
}

impl Fairness {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Fairness::None => "none",
            Fairness::Group => "group",
        }
    }
}

impl std::str::FromStr for Fairness {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(Fairness::None),
            "group" => Ok(Fairness::Group),
            other => Err(format!(
                "fairness is group (share starts between groups by weight) or none, not {other:?}"
            )),
        }
    }
}

/// A change to a queue's settings: `None` leaves a setting as it is; `Some(None)` clears a
/// limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueChange {
    /// Pause (true) or resume (false).
    pub paused: Option<bool>,
    /// Most of its jobs running at once.
    pub max_running: Option<Option<i32>>,
    /// Most running jobs per concurrency key.
    pub key_limit: Option<Option<i32>>,
    /// Most starts per period.
    pub rate: Option<Option<(i32, Duration)>>,
    /// What a rate set now applies to (default: the whole queue).
    pub rate_per: Option<RatePer>,
    /// Most starts at once under a rate set now (default: the rate's N).
    pub rate_burst: Option<i32>,
    /// Most jobs waiting.
    pub max_depth: Option<Option<i32>>,
    /// How starts are shared.
    pub fairness: Option<Fairness>,
    /// The queue's own retention per final state: `Some(None)` goes back to the workers'.
    pub retain_completed: Option<Option<Keep>>,
    /// Failed jobs' retention.
    pub retain_failed: Option<Option<Keep>>,
    /// Cancelled jobs' retention.
    pub retain_cancelled: Option<Option<Keep>>,
    /// Expired jobs' retention.
    pub retain_expired: Option<Option<Keep>>,
}

impl QueueChange {
    fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidInput(what.into()));
        if matches!(self.max_running, Some(Some(n)) if n < 0) {
            return bad("max_running must be 0 or more (0 holds every job back)");
        }
        if matches!(self.key_limit, Some(Some(n)) if n < 1) {
            return bad("key_limit must be at least 1");
        }
        if let Some(Some((n, period))) = self.rate {
            if n < 1 || period.as_millis() < 1 || period > crate::duration::MAX {
                return bad(
                    "a rate is N/PERIOD with N at least 1 and PERIOD at least 1ms, e.g. 100/1s",
                );
            }
        }
        if let Some(burst) = self.rate_burst {
            if !matches!(self.rate, Some(Some(_))) {
                return bad("a rate's burst is set with the rate: give the rate too (N/PERIOD)");
            }
            if burst < 1 {
                return bad("a rate's burst must be at least 1 (1 spreads the starts evenly)");
            }
        }
        if matches!(self.max_depth, Some(Some(n)) if n < 0) {
            return bad("max_depth must be 0 or more");
        }
        for (state, keep) in [
            ("completed", self.retain_completed),
            ("failed", self.retain_failed),
            ("cancelled", self.retain_cancelled),
            ("expired", self.retain_expired),
        ] {
            if let Some(Some(keep)) = keep {
                keep.validate(state)?;
            }
        }
        Ok(())
    }
}

/// Cluster-wide settings.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClusterSettings {
    /// Most jobs running at once across every queue.
    pub max_running: Option<i32>,
    /// When they last changed.
    pub updated_at: DateTime<Utc>,
}

impl Client {
    /// The settings of `queue` (defaults if it was never configured).
    pub async fn queue(&self, queue: &str) -> Result<QueueSettings> {
        Ok(self
            .queues_settings(&[queue.to_string()])
            .await?
            .pop()
            .unwrap_or_else(|| QueueSettings::new(queue)))
    }

    /// The settings of the queues that have some, among `queues`.
    pub(crate) async fn queues_settings(&self, queues: &[String]) -> Result<Vec<QueueSettings>> {
        let conn = self.database().conn().await?;
        conn.query(sql::QUEUE_GET, &[&queues])
            .await?
            .iter()
            .map(QueueSettings::from_row)
            .collect()
    }

    /// Pauses a queue cluster-wide: workers stop claiming from it within a second; it keeps
    /// accepting jobs, and running jobs finish.
    pub async fn pause_queue(&self, queue: &str) -> Result<QueueSettings> {
        self.change_queue(
            queue,
            &QueueChange {
                paused: Some(true),
                ..QueueChange::default()
            },
        )
        .await
    }

    /// Resumes a paused queue.
    pub async fn resume_queue(&self, queue: &str) -> Result<QueueSettings> {
        self.change_queue(
            queue,
            &QueueChange {
                paused: Some(false),
                ..QueueChange::default()
            },
        )
        .await
    }

    /// Changes a queue's settings; returns them as they are now.
    pub async fn change_queue(&self, queue: &str, change: &QueueChange) -> Result<QueueSettings> {
        if queue.trim().is_empty() {
            return Err(Error::InvalidInput("the queue name is empty".into()));
        }
        change.validate()?;
        let mut conn = self.database().conn().await?;
        // (one transaction: the workers hear of a change of fair share once its jobs' start
        // tags agree with it)
        let tx = conn.transaction().await?;
        if change.fairness.is_some() {
            // under the claims' lock of the queue, as the tags change under their walk
            tx.query(sql::CLAIM_LOCK, &[&queue]).await?;
        }
        let rate = change.rate.flatten();
        let row = tx
            .query_one(
                sql::QUEUE_SET,
                &[
                    &queue,
                    &change.paused.is_some(),
                    &change.paused,
                    &change.max_running.is_some(),
                    &change.max_running.flatten(),
                    &change.key_limit.is_some(),
                    &change.key_limit.flatten(),
                    &change.rate.is_some(),
                    &rate.map(|r| r.0),
                    &rate.map(|r| i64::try_from(r.1.as_millis()).unwrap_or(i64::MAX)),
                    &change.max_depth.is_some(),
                    &change.max_depth.flatten(),
                    &change.rate_per.unwrap_or_default().as_str(),
                    &change.retain_completed.is_some(),
                    &change.retain_completed.flatten().map(Keep::as_ms),
                    &change.retain_failed.is_some(),
                    &change.retain_failed.flatten().map(Keep::as_ms),
                    &change.retain_cancelled.is_some(),
                    &change.retain_cancelled.flatten().map(Keep::as_ms),
                    &change.retain_expired.is_some(),
                    &change.retain_expired.flatten().map(Keep::as_ms),
                    &change.fairness.is_some(),
                    &change.fairness.map(|f| match f {
                        Fairness::None => None,
                        Fairness::Group => Some(f.as_str()),
                    }),
                    &change.rate_burst,
                ],
            )
            .await?;
        if change.fairness.is_some() {
            tx.execute(sql::FAIR_TAG_QUEUE, &[&queue]).await?;
        }
        tx.commit().await?;
        QueueSettings::from_row(&row)
    }

    /// The cluster-wide settings.
    pub async fn cluster(&self) -> Result<ClusterSettings> {
        let conn = self.database().conn().await?;
        let row = conn.query_one(sql::CLUSTER_GET, &[]).await?;
        Ok(ClusterSettings {
            max_running: row.try_get("max_running")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    /// Sets (or with `None` clears) the cap on jobs running at once across every queue.
    pub async fn set_cluster_max_running(&self, max: Option<i32>) -> Result<ClusterSettings> {
        if matches!(max, Some(n) if n < 0) {
            return Err(Error::InvalidInput(
                "the cluster's max_running must be 0 or more".into(),
            ));
        }
        let conn = self.database().conn().await?;
        let row = conn.query_one(sql::CLUSTER_SET, &[&max]).await?;
        Ok(ClusterSettings {
            max_running: row.try_get("max_running")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}
