//! How long what has ended is kept: finished jobs per final state (a queue's own settings
//! win), workflow runs with their jobs, notifications, activity minutes, audit entries and
//! the failures batched statements set aside.

use crate::{Error, JobState, Result};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How long jobs of one final state are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// This long after they finished.
    For(Duration),
    /// For ever.
    Forever,
}

impl Keep {
    /// Milliseconds as stored (`-1` for ever).
    pub(crate) fn as_ms(self) -> i64 {
        match self {
            Keep::For(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Keep::Forever => -1,
        }
    }

    /// From milliseconds as stored.
    pub(crate) fn from_ms(ms: i64) -> Keep {
        match u64::try_from(ms) {
            Ok(ms) => Keep::For(Duration::from_millis(ms)),
            Err(_) => Keep::Forever,
        }
    }
}

impl Keep {
    /// Checks the age: at most 100 years; `what` names it in the error.
    pub fn validate(self, what: &str) -> Result<()> {
        match self {
            Keep::For(d) if d > crate::duration::MAX => Err(Error::InvalidInput(format!(
                "the retention of {what} jobs is over 100 years: use never to keep them for ever"
            ))),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keep::For(d) => f.write_str(&crate::duration::format(*d)),
            Keep::Forever => f.write_str("never"),
        }
    }
}

impl FromStr for Keep {
    type Err = Error;

    /// A duration (`1h`, `7d`) or `never` (keep for ever).
    fn from_str(text: &str) -> Result<Keep> {
        if text.trim() == "never" {
            return Ok(Keep::Forever);
        }
        crate::duration::parse(text)
            .map(Keep::For)
            .map_err(|e| Error::InvalidInput(format!("{e}, or never to keep them for ever")))
    }
}

impl serde::Serialize for Keep {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How long finished jobs are kept, per final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Retention {
    /// Completed jobs (default 1 day).
    pub completed: Keep,
    /// Failed jobs (default 30 days: long enough to look into and retry).
    pub failed: Keep,
    /// Cancelled jobs (default 7 days).
    pub cancelled: Keep,
    /// Expired jobs (default 7 days).
    pub expired: Keep,
    /// Delivered notifications, from when they were sent (default 7 days).
    pub notifications_sent: Keep,
    /// Dead notifications, from when they died (default 30 days: time to fix the receiver
    /// and retry them).
    pub notifications_dead: Keep,
    /// The workers' minute-by-minute activity the dashboard charts (default 7 days).
    pub activity: Keep,
    /// Entries of the dashboard's audit log (default 90 days).
    pub audit: Keep,
    /// Failures set aside by batched statements (`remuda.failures`), from their last
    /// occurrence (default 30 days, as failed jobs).
    pub failures: Keep,
}

impl Default for Retention {
    fn default() -> Self {
        let days = |n: u64| Keep::For(Duration::from_secs(n * 86_400));
        Retention {
            completed: days(1),
            failed: days(30),
            cancelled: days(7),
            expired: days(7),
            notifications_sent: days(7),
            notifications_dead: days(30),
            activity: days(7),
            audit: days(90),
            failures: days(30),
        }
    }
}

impl Retention {
    /// Checks every age: at most 100 years (or never), naming the state.
    pub fn validate(&self) -> Result<()> {
        for (state, keep) in self.by_state() {
            keep.validate(state.as_str())?;
        }
        self.notifications_sent.validate("sent notifications'")?;
        self.notifications_dead.validate("dead notifications'")?;
        self.activity.validate("activity minutes'")?;
        self.audit.validate("audit entries'")?;
        self.failures.validate("set-aside failures'")?;
        Ok(())
    }

    /// Each final state with its setting, in a fixed order.
    pub fn by_state(&self) -> [(JobState, Keep); 4] {
        [
            (JobState::Completed, self.completed),
            (JobState::Failed, self.failed),
            (JobState::Cancelled, self.cancelled),
            (JobState::Expired, self.expired),
        ]
    }
}
