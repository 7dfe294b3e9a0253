//! Schedules: jobs enqueued at recurring times — an interval, hourly, daily, weekly, monthly
//! or a cron expression — on the clock of an IANA time zone.
//!
//! A schedule is declared once ([`Client::set_schedule`](crate::Client::set_schedule),
//! [`Worker::schedule`](crate::Worker::schedule), a worker config's `[schedules.NAME]`, or
//! `remuda schedule add`) and stored in `remuda.schedules`; the maintenance leader fires it.
//! **Each fire time makes exactly one job**, decided by the database and not by the leader:
//! firing locks the schedule's row, inserts the job with its schedule and fire time (unique
//! together), and moves `next_run_at` on only if it still holds the value read, all in one
//! transaction. A leader that dies mid-fire leaves the time due for the next one; two
//! processes that both think they lead make one job.
//!
//! ```no_run
//! # async fn demo(client: remuda::Client) -> remuda::Result<()> {
//! use remuda::schedule::{Pattern, Schedule};
//! let nightly = Schedule::new("nightly_report", "report", Pattern::cron("0 3 * * *")?)
//!     .args(serde_json::json!({"scope": "all"}))
//!     .zone("Europe/Berlin".parse()?);
//! client.set_schedule(&nightly).await?;
//! # Ok(()) }
//! ```

mod calendar;
mod next;
mod pattern;
pub(crate) mod plan;
mod store;

pub use pattern::{Pattern, Zone};
pub use store::{Declared, ScheduleInfo};

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// What firing does about fire times that passed while no worker could fire them (all
/// workers down, the schedule's leader lost).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Fire once, for the latest missed time; the others are recorded as skipped.
    #[default]
    Skip,
    /// Fire every missed time, the latest `catch_up_limit` of them at most.
    All,
    /// Fire none of them: the schedule goes on from its next time. A time less than a
    /// minute late is not missed (see [`plan::LATE_AFTER`]).
    None,
}

/// What firing does while the previous fire's job has not finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Fire anyway: jobs of one schedule may run at the same time.
    #[default]
    Allow,
    /// Skip the fire (recorded as skipped) while the last job fired is still waiting or
    /// running; with catch-up, at most one job is fired at a time.
    Skip,
}

macro_rules! text_enum {
    ($ty:ty, $what:literal, $($variant:path => $text:literal),+) => {
        impl $ty {
            /// The name used in config files, flags and the database.
            pub fn as_str(self) -> &'static str {
                match self { $($variant => $text),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = Error;
            fn from_str(text: &str) -> Result<Self> {
                match text {
                    $($text => Ok($variant),)+
                    _ => Err(Error::InvalidInput(format!(
                        concat!($what, " {:?} is not one of: ", $($text, " "),+), text
                    ))),
                }
            }
        }
    };
}
text_enum!(CatchUp, "catch_up", CatchUp::Skip => "skip", CatchUp::All => "all", CatchUp::None => "none");
text_enum!(Overlap, "overlap", Overlap::Allow => "allow", Overlap::Skip => "skip");

/// Default of [`Schedule::catch_up_limit`].
pub const DEFAULT_CATCH_UP_LIMIT: u32 = 100;

/// A schedule's definition: what it enqueues and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Unique name; declaring the same name again replaces the definition.
    pub name: String,
    /// Kind of the jobs it enqueues.
    pub kind: String,
    /// Their args.
    pub args: serde_json::Value,
    /// Their queue.
    pub queue: String,
    /// Their priority (lower runs first).
    pub priority: i32,
    /// Their attempts (`None`: the worker's default for the kind).
    pub max_attempts: Option<i32>,
    /// When it fires.
    pub pattern: Pattern,
    /// On whose clock (calendar patterns only; `every` counts elapsed time).
    pub zone: Zone,
    /// What to do about missed fire times.
    pub catch_up: CatchUp,
    /// With [`CatchUp::All`], most missed times fired at once.
    pub catch_up_limit: u32,
    /// What to do while the previous job has not finished.
    pub overlap: Overlap,
    /// Their fair-share group (see [`crate::NewJob::group`]), if any.
    pub group: Option<String>,
}

impl Schedule {
    /// A schedule of jobs of `kind` with empty args, in queue `default`, in UTC.
    pub fn new(name: impl Into<String>, kind: impl Into<String>, pattern: Pattern) -> Schedule {
        Schedule {
            name: name.into(),
            kind: kind.into(),
            args: serde_json::json!({}),
            queue: "default".into(),
            priority: 0,
            max_attempts: None,
            pattern,
            zone: Zone::UTC,
            catch_up: CatchUp::Skip,
            catch_up_limit: DEFAULT_CATCH_UP_LIMIT,
            overlap: Overlap::Allow,
            group: None,
        }
    }

    /// Sets the jobs' args.
    pub fn args(mut self, args: serde_json::Value) -> Schedule {
        self.args = args;
        self
    }

    /// Sets the jobs' queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Schedule {
        self.queue = queue.into();
        self
    }

    /// Sets the jobs' fair-share group.
    pub fn group(mut self, group: impl Into<String>) -> Schedule {
        self.group = Some(group.into());
        self
    }

    /// Sets the zone whose clock calendar patterns follow.
    pub fn zone(mut self, zone: Zone) -> Schedule {
        self.zone = zone;
        self
    }

    /// Sets what happens to missed fire times.
    pub fn catch_up(mut self, catch_up: CatchUp) -> Schedule {
        self.catch_up = catch_up;
        self
    }

    /// Sets what happens while the previous job has not finished.
    pub fn overlap(mut self, overlap: Overlap) -> Schedule {
        self.overlap = overlap;
        self
    }

    /// Checks the definition: names, pattern, limits in range. The error names the field.
    pub fn validate(&self) -> Result<()> {
        crate::names::check_name("schedule", &self.name)?;
        crate::names::check_name("kind", &self.kind)
            .map_err(|e| Error::InvalidInput(format!("schedule {}: {e}", self.name)))?;
        crate::names::check_name("queue", &self.queue)
            .map_err(|e| Error::InvalidInput(format!("schedule {}: {e}", self.name)))?;
        self.pattern
            .rule()
            .map_err(|e| Error::InvalidInput(format!("schedule {}: {e}", self.name)))?;
        if let Some(group) = &self.group {
            crate::names::check_group(group, crate::client::MAX_UNIQUE_KEY)
                .map_err(|e| Error::InvalidInput(format!("schedule {}: {e}", self.name)))?;
        }
        if self.catch_up_limit == 0 || self.catch_up_limit > 100_000 {
            return Err(Error::InvalidInput(format!(
                "schedule {}: catch_up_limit is {}: it must be 1 to 100000",
                self.name, self.catch_up_limit
            )));
        }
        if self.max_attempts.is_some_and(|m| m < 1) {
            return Err(Error::InvalidInput(format!(
                "schedule {}: max_attempts must be at least 1",
                self.name
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_schedule_name_is_said_once() {
        let every: Pattern = "every 1m".parse().expect("pattern");
        let e = Schedule::new("", "k", every)
            .validate()
            .expect_err("refused");
        assert_eq!(e.to_string(), "the schedule name is empty");
    }
}
