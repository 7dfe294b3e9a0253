//! Schedules in `remuda.schedules`: declaring, listing, pausing, resuming, triggering and
//! deleting them, through the [`Client`].

use super::{CatchUp, Overlap, Pattern, Schedule, Zone};
use crate::client::Client;
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};

/// What a declaration changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Declared {
    /// A new schedule, first firing at this time.
    Created(DateTime<Utc>),
    /// A changed definition; the next fire time is recomputed only if the pattern or zone
    /// changed.
    Changed(DateTime<Utc>),
    /// The stored definition was the same: nothing was written.
    Unchanged,
}

/// A schedule as stored, for `remuda schedules` and dashboards.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// Kind of the jobs it fires.
    pub kind: String,
    /// Their queue.
    pub queue: String,
    /// The pattern's text form (`every 30s`, `daily 03:00`, a cron expression as written).
    pub pattern: String,
    /// The zone of its clock.
    pub tz: String,
    /// Its next fire time.
    pub next_run_at: DateTime<Utc>,
    /// The fire time of the latest job it fired.
    pub last_run_at: Option<DateTime<Utc>>,
    /// That job.
    pub last_job_id: Option<i64>,
    /// Jobs fired.
    pub runs: i64,
    /// Whether it is paused.
    pub paused: bool,
    /// What happens to missed times.
    pub catch_up: CatchUp,
    /// What happens while the previous job runs.
    pub overlap: Overlap,
    /// Most missed times fired at once with `catch_up = all`.
    pub catch_up_limit: i32,
    /// Their args.
    pub args: serde_json::Value,
    /// Their priority.
    pub priority: i32,
    /// Their attempts, if set.
    pub max_attempts: Option<i32>,
    /// Their fair-share group, if any.
    pub group: Option<String>,
    /// Fire times that got no job (catch-up, overlap, a full queue).
    pub skipped: i64,
    /// When the last of them was skipped.
    pub last_skipped_at: Option<DateTime<Utc>>,
    /// Why.
    pub last_skip_reason: Option<String>,
    /// When it was declared first.
    pub created_at: DateTime<Utc>,
    /// When its definition last changed.
    pub updated_at: DateTime<Utc>,
}

impl ScheduleInfo {
    fn from_row(row: &tokio_postgres::Row) -> Result<ScheduleInfo> {
        let catch_up: String = row.try_get("catch_up")?;
        let overlap: String = row.try_get("overlap")?;
        Ok(ScheduleInfo {
            name: row.try_get("name")?,
            kind: row.try_get("kind")?,
            queue: row.try_get("queue")?,
            pattern: row.try_get("pattern")?,
            tz: row.try_get("tz")?,
            next_run_at: row.try_get("next_run_at")?,
            last_run_at: row.try_get("last_run_at")?,
            last_job_id: row.try_get("last_job_id")?,
            runs: row.try_get("runs")?,
            paused: row.try_get("paused")?,
            catch_up: catch_up.parse()?,
            overlap: overlap.parse()?,
            catch_up_limit: row.try_get("catch_up_limit")?,
            args: row.try_get("args")?,
            priority: row.try_get("priority")?,
            max_attempts: row.try_get("max_attempts")?,
            group: row.try_get("group_key")?,
            skipped: row.try_get("skipped")?,
            last_skipped_at: row.try_get("last_skipped_at")?,
            last_skip_reason: row.try_get("last_skip_reason")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

impl Client {
    /// Creates or replaces a schedule. An unchanged pattern and zone keep the stored next
    /// fire time (a restart or a second worker declaring it changes nothing); a new or
    /// changed one fires first at its next time after now, on the database's clock.
    pub async fn set_schedule(&self, schedule: &Schedule) -> Result<Declared> {
        schedule.validate()?;
        let size = serde_json::to_string(&schedule.args)?.len();
        if size > self.max_payload() {
            return Err(Error::InvalidInput(format!(
                "schedule {}: args are {size} bytes, over the limit of {} bytes",
                schedule.name,
                self.max_payload()
            )));
        }
        let conn = self.database().conn().await?;
        let now: DateTime<Utc> = conn.query_one(sql::CLOCK, &[]).await?.try_get("now")?;
        let next = first_after(&schedule.pattern, schedule.zone, now, &schedule.name)?;
        let limit = i32::try_from(schedule.catch_up_limit).unwrap_or(i32::MAX);
        let row = conn
            .query_opt(
                sql::SCHEDULE_UPSERT,
                &[
                    &schedule.name,
                    &schedule.kind,
                    &schedule.args,
                    &schedule.queue,
                    &schedule.priority,
                    &schedule.max_attempts,
                    &schedule.pattern.to_string(),
                    &schedule.zone.to_string(),
                    &schedule.catch_up.as_str(),
                    &limit,
                    &schedule.overlap.as_str(),
                    &next,
                    &schedule.group,
                ],
            )
            .await?;
        Ok(match row {
            None => Declared::Unchanged,
            Some(row) if row.try_get("created")? => Declared::Created(row.try_get("next_run_at")?),
            Some(row) => Declared::Changed(row.try_get("next_run_at")?),
        })
    }

    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.list_schedules(None).await
    }

    /// One schedule, if it exists.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        Ok(self.list_schedules(Some(name)).await?.pop())
    }

    async fn list_schedules(&self, name: Option<&str>) -> Result<Vec<ScheduleInfo>> {
        let conn = self.database().conn().await?;
        conn.query(sql::SCHEDULE_LIST, &[&name])
            .await?
            .iter()
            .map(ScheduleInfo::from_row)
            .collect()
    }

    /// Pauses a schedule: it fires nothing until resumed.
    pub async fn pause_schedule(&self, name: &str) -> Result<()> {
        self.set_paused(name, true, None).await
    }

    /// Resumes a schedule from its next time after now: the times it was paused over are
    /// not caught up.
    pub async fn resume_schedule(&self, name: &str) -> Result<DateTime<Utc>> {
        let info = self
            .schedule(name)
            .await?
            .ok_or_else(|| no_schedule(name))?;
        if !info.paused {
            return Ok(info.next_run_at);
        }
        let pattern: Pattern = info.pattern.parse()?;
        let zone: Zone = info.tz.parse()?;
        let conn = self.database().conn().await?;
        let now: DateTime<Utc> = conn.query_one(sql::CLOCK, &[]).await?.try_get("now")?;
        let next = first_after(&pattern, zone, now, name)?;
        self.set_paused(name, false, Some(next)).await?;
        Ok(next)
    }

    async fn set_paused(
        &self,
        name: &str,
        paused: bool,
        next: Option<DateTime<Utc>>,
    ) -> Result<()> {
        let conn = self.database().conn().await?;
        match conn
            .query_opt(sql::SCHEDULE_PAUSE, &[&name, &paused, &next])
            .await?
        {
            Some(_) => Ok(()),
            // already so, or no such schedule
            None => match self.schedule(name).await? {
                Some(_) => Ok(()),
                None => Err(no_schedule(name)),
            },
        }
    }

    /// Fires a schedule now, outside its pattern (paused or not): returns the job's id. Its
    /// next fire time stays as it was.
    pub async fn trigger_schedule(&self, name: &str) -> Result<i64> {
        let conn = self.database().conn().await?;
        match conn.query_opt(sql::SCHEDULE_TRIGGER, &[&name]).await? {
            Some(row) => Ok(row.try_get("id")?),
            None => Err(no_schedule(name)),
        }
    }

    /// Deletes a schedule; the jobs it fired stay.
    pub async fn delete_schedule(&self, name: &str) -> Result<()> {
        let conn = self.database().conn().await?;
        match conn.query_opt(sql::SCHEDULE_DELETE, &[&name]).await? {
            Some(_) => Ok(()),
            None => Err(no_schedule(name)),
        }
    }
}

/// The first fire time of a pattern after `now`.
fn first_after(
    pattern: &Pattern,
    zone: Zone,
    now: DateTime<Utc>,
    name: &str,
) -> Result<DateTime<Utc>> {
    pattern.next_after(zone, now).ok_or_else(|| {
        Error::InvalidInput(format!(
            "schedule {name}: the pattern {pattern} never fires"
        ))
    })
}

fn no_schedule(name: &str) -> Error {
    Error::ScheduleNotFound(name.to_string())
}
