//! What maintenance reports: each duty's latest run (when, how long, what it did or its
//! error), kept in memory by the duties and written to `remuda.maintenance_runs` by the
//! election loop once per round, under the lease, for `remuda maintenance`.

use super::leader::Lease;
use crate::db::Database;
use crate::{sql, Result};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One run of a duty.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub started_at: DateTime<Utc>,
    pub duration_ms: f64,
    pub outcome: std::result::Result<String, String>,
}

/// The runs not written yet, by duty.
#[derive(Default)]
pub(crate) struct Journal {
    pending: Mutex<BTreeMap<&'static str, Entry>>,
}

impl Journal {
    /// Records a run of `duty` (replacing an earlier one not written yet).
    pub fn record(&self, duty: &'static str, entry: Entry) {
        crate::runtime::lock(&self.pending).insert(duty, entry);
    }

    /// Writes the pending runs under `lease`; on failure they are kept for the next round.
    pub async fn flush(&self, db: &Database, lease: &Lease) -> Result<()> {
        let pending = std::mem::take(&mut *crate::runtime::lock(&self.pending));
        if pending.is_empty() {
            return Ok(());
        }
        let mut duties = Vec::new();
        let mut started = Vec::new();
        let mut durations = Vec::new();
        let mut ok = Vec::new();
        let mut results = Vec::new();
        for (duty, entry) in &pending {
            duties.push(duty.to_string());
            started.push(entry.started_at);
            durations.push(entry.duration_ms);
            ok.push(entry.outcome.is_ok());
            results.push(match &entry.outcome {
                Ok(what) | Err(what) => what.clone(),
            });
        }
        let written = async {
            let conn = db.conn().await?;
            conn.execute(
                sql::MAINTENANCE_RECORD,
                &[
                    &duties,
                    &started,
                    &durations,
                    &ok,
                    &results,
                    &lease.leader_id,
                    &lease.term,
                ],
            )
            .await?;
            Ok(())
        };
        let result: Result<()> = written.await;
        if result.is_err() {
            let mut now = crate::runtime::lock(&self.pending);
            for (duty, entry) in pending {
                now.entry(duty).or_insert(entry);
            }
        }
        result
    }
}

/// Who leads maintenance, and each duty's latest run: `remuda maintenance`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MaintenanceStatus {
    /// The lease, if anyone ever held it.
    pub leader: Option<LeaderInfo>,
    /// Each duty's latest run, by name.
    pub duties: Vec<DutyRun>,
}

/// The leader lease.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LeaderInfo {
    /// The leading worker's id.
    pub worker: String,
    /// Since when it leads.
    pub since: DateTime<Utc>,
    /// The lease's term: it grows at every change of leader.
    pub term: i64,
    /// When the lease runs out unless renewed (`None`: the leader resigned).
    pub expires_at: Option<DateTime<Utc>>,
    /// Whether the lease is current (false: the leader stopped renewing it).
    pub current: bool,
}

/// A duty's latest run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DutyRun {
    /// The duty: rescue, expiry, promotion, schedules, retention, rate_buckets.
    pub duty: String,
    /// The leader that ran it.
    pub worker: String,
    /// At which term.
    pub term: i64,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
    /// Whether it succeeded.
    pub ok: bool,
    /// What it did, or its error.
    pub result: String,
}
