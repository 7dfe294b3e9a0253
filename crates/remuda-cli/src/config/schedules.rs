//! `[schedules.<name>]`: schedules a worker declares when it starts (creating or replacing
//! them: see `remuda::Client::set_schedule`). Exactly one pattern key per table.

use remuda::schedule::{CatchUp, Overlap, Pattern, Schedule, Zone};
use serde::Deserialize;

/// One `[schedules.<name>]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSection {
    /// Kind of the jobs it fires.
    pub kind: String,
    /// Their args (a table or any TOML value; default `{}`).
    pub args: Option<serde_json::Value>,
    /// Their queue (default: the kind's queue in `[tasks]`, else "default").
    pub queue: Option<String>,
    /// Their priority.
    pub priority: Option<i32>,
    /// Their attempts.
    pub max_attempts: Option<i32>,
    /// Their fair-share group.
    pub group: Option<String>,
    /// A 5-field cron expression or an alias (`@daily`).
    pub cron: Option<String>,
    /// An interval: `30s`, `5m`, `2h`, `1d`.
    pub every: Option<String>,
    /// `{ minute = 15, second = 0 }`.
    pub hourly: Option<Hourly>,
    /// `"03:00"`.
    pub daily: Option<String>,
    /// `{ days = ["mon", "fri"], at = "09:30" }`.
    pub weekly: Option<Weekly>,
    /// `{ day = 1, at = "06:00" }`.
    pub monthly: Option<Monthly>,
    /// IANA zone of the clock (default "UTC").
    pub tz: Option<String>,
    /// "skip" (default), "all" or "none".
    pub catch_up: Option<String>,
    /// Most missed times fired with catch_up = "all" (default 100).
    pub catch_up_limit: Option<u32>,
    /// "allow" (default) or "skip".
    pub overlap: Option<String>,
}

/// `hourly = { minute = 15, second = 0 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hourly {
    /// 0 to 59.
    pub minute: u32,
    /// 0 to 59 (default 0).
    #[serde(default)]
    pub second: u32,
}

/// `weekly = { days = ["mon", "fri"], at = "09:30" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weekly {
    /// Weekday names.
    pub days: Vec<String>,
    /// HH:MM.
    pub at: String,
}

/// `monthly = { day = 1, at = "06:00" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Monthly {
    /// 1 to 31.
    pub day: u32,
    /// HH:MM.
    pub at: String,
}

/// The pattern keys, as the error lists them.
const PATTERN_KEYS: &str = "cron = \"*/5 * * * *\", every = \"30s\", hourly = { minute = 15 }, daily = \"03:00\", weekly = { days = [\"mon\"], at = \"09:30\" } or monthly = { day = 1, at = \"06:00\" }";

impl ScheduleSection {
    /// The schedule this table declares; `default_queue` is the kind's queue in `[tasks]`.
    /// Errors name the table and key.
    pub fn schedule(&self, name: &str, default_queue: Option<&str>) -> Result<Schedule, String> {
        let at = |key: &str, e: remuda::Error| format!("[schedules.{name}] {key}: {e}");
        let mut schedule = Schedule::new(name, &self.kind, self.pattern(name)?);
        if let Some(args) = &self.args {
            schedule.args = args.clone();
        }
        schedule.queue = self
            .queue
            .clone()
            .or_else(|| default_queue.map(str::to_string))
            .unwrap_or_else(|| "default".into());
        if let Some(priority) = self.priority {
            schedule.priority = priority;
        }
        schedule.max_attempts = self.max_attempts;
        schedule.group = self.group.clone();
        if let Some(tz) = &self.tz {
            schedule.zone = tz.parse::<Zone>().map_err(|e| at("tz", e))?;
        }
        if let Some(catch_up) = &self.catch_up {
            schedule.catch_up = catch_up.parse::<CatchUp>().map_err(|e| at("catch_up", e))?;
        }
        if let Some(limit) = self.catch_up_limit {
            schedule.catch_up_limit = limit;
        }
        if let Some(overlap) = &self.overlap {
            schedule.overlap = overlap.parse::<Overlap>().map_err(|e| at("overlap", e))?;
        }
        schedule
            .validate()
            .map_err(|e| format!("[schedules.{name}] {e}"))?;
        Ok(schedule)
    }

    /// The one pattern key given.
    fn pattern(&self, name: &str) -> Result<Pattern, String> {
        let given = [
            self.cron.is_some(),
            self.every.is_some(),
            self.hourly.is_some(),
            self.daily.is_some(),
            self.weekly.is_some(),
            self.monthly.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(format!(
                "[schedules.{name}] needs exactly one of {PATTERN_KEYS}"
            ));
        }
        let at = |key: &'static str| {
            move |e: remuda::Error| {
                let e = e.to_string();
                // the pattern's own errors often start with its name already
                let e = e
                    .strip_prefix(&format!("{key}: "))
                    .unwrap_or(&e)
                    .to_string();
                format!("[schedules.{name}] {key}: {e}")
            }
        };
        if let Some(cron) = &self.cron {
            return Pattern::cron(cron).map_err(at("cron"));
        }
        if let Some(every) = &self.every {
            return Pattern::every(every).map_err(at("every"));
        }
        if let Some(daily) = &self.daily {
            return Pattern::daily(daily).map_err(at("daily"));
        }
        if let Some(h) = &self.hourly {
            return Pattern::Hourly {
                minute: h.minute,
                second: h.second,
            }
            .checked()
            .map_err(at("hourly"));
        }
        if let Some(w) = &self.weekly {
            return Pattern::weekly(&w.days, &w.at).map_err(at("weekly"));
        }
        let m = self.monthly.as_ref().ok_or("a pattern key")?;
        Pattern::monthly(m.day, &m.at).map_err(at("monthly"))
    }
}
