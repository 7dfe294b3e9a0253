//! Maintenance as operators and scripts see it: who leads it and what each duty did last, and
//! retention run by hand (the leader runs it by itself every `prune_interval`).

use crate::maintenance::{DutyRun, LeaderInfo, MaintenanceStatus, Pruned, Retention};
use crate::{sql, Client, Result};

impl Client {
    /// Who leads maintenance and what each duty did last.
    pub async fn maintenance_status(&self) -> Result<MaintenanceStatus> {
        let conn = self.database().conn().await?;
        let leader = match conn.query_opt(sql::MAINTENANCE_STATUS, &[]).await? {
            Some(row) => Some(LeaderInfo {
                worker: row.try_get("leader_id")?,
                since: row.try_get("elected_at")?,
                term: row.try_get("term")?,
                expires_at: row.try_get("expires_at")?,
                current: row.try_get("current")?,
            }),
            None => None,
        };
        let duties = conn
            .query(sql::MAINTENANCE_RUNS, &[])
            .await?
            .iter()
            .map(|row| {
                Ok(DutyRun {
                    duty: row.try_get("duty")?,
                    worker: row.try_get("leader_id")?,
                    term: row.try_get("term")?,
                    started_at: row.try_get("started_at")?,
                    duration_ms: row.try_get("duration_ms")?,
                    ok: row.try_get("ok")?,
                    result: row.try_get("result")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MaintenanceStatus { leader, duties })
    }
}

impl Client {
    /// Deletes now the finished jobs past their age (the queue's own, else `retention`);
    /// with `dry_run`, counts them instead. The maintenance leader does this by itself
    /// every `prune_interval`; this is for operators and scripts.
    pub async fn prune(&self, retention: &Retention, dry_run: bool) -> Result<Pruned> {
        retention.validate()?;
        crate::maintenance::prune(self.database(), retention, None, dry_run).await
    }
}
