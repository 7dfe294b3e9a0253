//! What a schedule's times are: a [`Pattern`] (when) in a [`Zone`] (whose clock). Each
//! pattern has one text form, the one `remuda schedules` shows and the database stores:
//! `every 30s`, `hourly :15`, `daily 03:00`, `weekly mon,fri 09:30`, `monthly 1 06:00`, or
//! a cron expression as written (`*/5 * * * *`, `@daily`).

use super::calendar::{self, Calendar};
use chrono::{DateTime, NaiveDate, NaiveTime, Timelike, Utc};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// When a schedule fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Every interval of elapsed time (whole seconds, at least one), at the multiples of it
    /// since the Unix epoch: `5m` fires at :00, :05, :10…, whichever process computes it and
    /// whenever it was declared. The zone plays no part.
    Every(Duration),
    /// Every hour at this minute and second.
    Hourly {
        /// 0 to 59.
        minute: u32,
        /// 0 to 59.
        second: u32,
    },
    /// Every day at this time.
    Daily(NaiveTime),
    /// On these weekdays at this time.
    Weekly {
        /// The weekdays, in order from Monday, without repeats.
        days: Vec<chrono::Weekday>,
        /// The time of day.
        at: NaiveTime,
    },
    /// On this day of each month at this time; months without that day are skipped.
    Monthly {
        /// 1 to 31.
        day: u32,
        /// The time of day.
        at: NaiveTime,
    },
    /// A 5-field cron expression (or an `@daily`-style alias), as written.
    Cron(String),
}

/// Days a calendar pattern is searched ahead for its next time: more than the 8 years
/// between two 29ths of February (1896 and 1904, 2096 and 2104).
pub(crate) const HORIZON_DAYS: u32 = 3660;

/// A pattern as the calculator uses it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rule {
    /// Every this many seconds since the epoch.
    Every(i64),
    /// At these wall-clock times.
    Calendar(Calendar),
}

impl Pattern {
    /// A cron pattern, checked.
    pub fn cron(expr: &str) -> crate::Result<Pattern> {
        Pattern::Cron(expr.trim().to_string()).checked()
    }

    /// An interval pattern from text (`30s`, `5m`, `2h`, `1d`), checked.
    pub fn every(text: &str) -> crate::Result<Pattern> {
        let interval = crate::duration::parse(text)
            .map_err(|e| crate::Error::InvalidInput(format!("every: {e}")))?;
        Pattern::Every(interval).checked()
    }

    /// A daily pattern from `HH:MM` or `HH:MM:SS`, checked.
    pub fn daily(at: &str) -> crate::Result<Pattern> {
        Ok(Pattern::Daily(parse_time("daily", at)?))
    }

    /// A weekly pattern from weekday names and `HH:MM`, checked.
    pub fn weekly<S: AsRef<str>>(days: &[S], at: &str) -> crate::Result<Pattern> {
        Pattern::Weekly {
            days: parse_weekdays(days)?,
            at: parse_time("weekly", at)?,
        }
        .checked()
    }

    /// A monthly pattern from a day of the month and `HH:MM`, checked.
    pub fn monthly(day: u32, at: &str) -> crate::Result<Pattern> {
        Pattern::Monthly {
            day,
            at: parse_time("monthly", at)?,
        }
        .checked()
    }

    /// Checks the pattern: an interval of whole seconds and at least one, fields in range, a
    /// calendar that fires at all. The error names the field and what it allows.
    pub fn checked(self) -> crate::Result<Pattern> {
        self.rule().map_err(crate::Error::InvalidInput)?;
        Ok(self)
    }

    /// The pattern as the calculator uses it.
    pub(crate) fn rule(&self) -> Result<Rule, String> {
        let calendar = match self {
            Pattern::Every(interval) => {
                if interval.is_zero() || interval.subsec_nanos() != 0 {
                    return Err(format!(
                        "every = {:?} is not allowed: the interval must be whole seconds, at least 1s (like 30s, 5m, 2h, 1d)",
                        crate::duration::format(*interval)
                    ));
                }
                if *interval > crate::duration::MAX {
                    return Err("every: the interval must be at most 100 years".into());
                }
                return Ok(Rule::Every(interval.as_secs() as i64));
            }
            Pattern::Hourly { minute, second } => {
                if *minute > 59 || *second > 59 {
                    return Err(format!(
                        "hourly: minute {minute} and second {second} must each be 0 to 59"
                    ));
                }
                Calendar::hourly(*minute, *second)
            }
            Pattern::Daily(at) => Calendar::at(*at),
            Pattern::Weekly { days, at } => {
                if days.is_empty() {
                    return Err(
                        "weekly: days is empty: name at least one day, like [\"mon\", \"fri\"]"
                            .into(),
                    );
                }
                let bits = days
                    .iter()
                    .fold(0u8, |b, d| b | 1 << d.num_days_from_sunday());
                Calendar::weekly(bits, *at)
            }
            Pattern::Monthly { day, at } => {
                if !(1..=31).contains(day) {
                    return Err(format!(
                        "monthly: day {day} does not exist: the day of the month is 1 to 31 (31 skips the months that have fewer days)"
                    ));
                }
                Calendar::monthly(*day, *at)
            }
            Pattern::Cron(expr) => calendar::parse_cron(expr)?,
        };
        let start = NaiveDate::from_ymd_opt(2001, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .ok_or("the calendar's reference date")?;
        if calendar.first_at_or_after(start, HORIZON_DAYS).is_none() {
            return Err(format!(
                "the pattern {self} never fires: no date matches it"
            ));
        }
        Ok(Rule::Calendar(calendar))
    }

    /// The next time this pattern fires strictly after `after`, on the clock of `zone`
    /// (DST rules in `next.rs`); `None` only for a pattern that never fires.
    pub fn next_after(&self, zone: Zone, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        super::next::next_after(self.rule().ok()?, zone.0, after)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Every(d) => write!(f, "every {}", crate::duration::format(*d)),
            Pattern::Hourly { minute, second: 0 } => write!(f, "hourly :{minute:02}"),
            Pattern::Hourly { minute, second } => write!(f, "hourly :{minute:02}:{second:02}"),
            Pattern::Daily(at) => write!(f, "daily {}", time_text(*at)),
            Pattern::Weekly { days, at } => {
                let days: Vec<String> = days.iter().map(|d| d.to_string().to_lowercase()).collect();
                write!(f, "weekly {} {}", days.join(","), time_text(*at))
            }
            Pattern::Monthly { day, at } => write!(f, "monthly {day} {}", time_text(*at)),
            Pattern::Cron(expr) => f.write_str(expr),
        }
    }
}

impl FromStr for Pattern {
    type Err = crate::Error;

    /// Reads the text form (see the module's doc); anything that does not start with a
    /// pattern's name is read as a cron expression.
    fn from_str(text: &str) -> crate::Result<Pattern> {
        let text = text.trim();
        let (head, rest) = text.split_once(' ').unwrap_or((text, ""));
        let rest = rest.trim();
        let bad = |what: &str| crate::Error::InvalidInput(format!("{what}: got {text:?}"));
        match head {
            "every" => Pattern::every(rest),
            "hourly" => {
                let spec = rest
                    .strip_prefix(':')
                    .ok_or_else(|| bad("hourly takes :MM or :MM:SS (like hourly :15)"))?;
                let (minute, second) = spec.split_once(':').unwrap_or((spec, "0"));
                let number = |s: &str| {
                    s.parse::<u32>()
                        .map_err(|_| bad("hourly takes :MM or :MM:SS (like hourly :15)"))
                };
                Pattern::Hourly {
                    minute: number(minute)?,
                    second: number(second)?,
                }
                .checked()
            }
            "daily" => Pattern::daily(rest),
            "weekly" => {
                let (days, at) = rest.split_once(' ').ok_or_else(|| {
                    bad("weekly takes days and a time (like weekly mon,fri 09:30)")
                })?;
                Pattern::Weekly {
                    days: parse_weekdays(&days.split(',').collect::<Vec<_>>())?,
                    at: parse_time("weekly", at.trim())?,
                }
                .checked()
            }
            "monthly" => {
                let (day, at) = rest
                    .split_once(' ')
                    .ok_or_else(|| bad("monthly takes a day and a time (like monthly 1 06:00)"))?;
                let day = day.parse().map_err(|_| {
                    bad("monthly takes a day 1 to 31 and a time (like monthly 1 06:00)")
                })?;
                Pattern::Monthly {
                    day,
                    at: parse_time("monthly", at.trim())?,
                }
                .checked()
            }
            _ => Pattern::cron(text),
        }
    }
}

/// `HH:MM` or `HH:MM:SS`, 24-hour.
pub(crate) fn parse_time(field: &str, text: &str) -> crate::Result<NaiveTime> {
    let t = text.trim();
    NaiveTime::parse_from_str(t, "%H:%M:%S")
        .or_else(|_| NaiveTime::parse_from_str(t, "%H:%M"))
        .map_err(|_| {
            crate::Error::InvalidInput(format!(
                "{field}: invalid time {text:?}: use HH:MM (00:00 to 23:59) or HH:MM:SS, on the 24-hour clock"
            ))
        })
}

/// Weekday names (`mon`…`sun`, or the full names), in order from Monday, without repeats.
pub(crate) fn parse_weekdays<S: AsRef<str>>(names: &[S]) -> crate::Result<Vec<chrono::Weekday>> {
    let mut days = Vec::new();
    for name in names {
        let name = name.as_ref().trim();
        let day: chrono::Weekday = name.parse().map_err(|_| {
            crate::Error::InvalidInput(format!(
                "weekly: unknown day {name:?}: use mon, tue, wed, thu, fri, sat or sun"
            ))
        })?;
        if !days.contains(&day) {
            days.push(day);
        }
    }
    days.sort_by_key(|d| d.num_days_from_monday());
    Ok(days)
}

fn time_text(t: NaiveTime) -> String {
    if t.second() == 0 {
        t.format("%H:%M").to_string()
    } else {
        t.format("%H:%M:%S").to_string()
    }
}

/// An IANA time zone (`Europe/Berlin`, `America/New_York`, `UTC`): the clock a calendar
/// pattern is read on. The zone database is compiled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone(pub(crate) chrono_tz::Tz);

impl Zone {
    /// Coordinated Universal Time, the default.
    pub const UTC: Zone = Zone(chrono_tz::Tz::UTC);

    /// `t` on this zone's clock, with the zone's abbreviation of that moment (`2026-03-29
    /// 03:00 CEST`): how a schedule's next run reads where it was set.
    pub fn clock(&self, t: chrono::DateTime<chrono::Utc>) -> String {
        t.with_timezone(&self.0)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string()
    }
}

impl Default for Zone {
    fn default() -> Self {
        Zone::UTC
    }
}

impl FromStr for Zone {
    type Err = crate::Error;

    fn from_str(name: &str) -> crate::Result<Zone> {
        name.trim().parse::<chrono_tz::Tz>().map(Zone).map_err(|_| {
            crate::Error::InvalidInput(format!(
                "unknown time zone {name:?}: use an IANA name like UTC, Europe/Berlin or America/New_York (case matters)"
            ))
        })
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_reads_back() {
        for text in [
            "every 30s",
            "every 1d",
            "hourly :15",
            "hourly :15:30",
            "daily 03:00",
            "daily 03:00:30",
            "weekly mon,fri 09:30",
            "monthly 31 06:00",
            "*/5 * * * MON-FRI",
            "@daily",
        ] {
            let pattern: Pattern = text.parse().expect(text);
            assert_eq!(pattern.to_string(), text);
        }
        let weekly: Pattern = "weekly fri,Monday,mon 09:30".parse().expect("names");
        assert_eq!(weekly.to_string(), "weekly mon,fri 09:30");
    }

    #[test]
    fn bad_patterns_say_what_is_allowed() {
        for (text, says) in [
            ("every 0s", "at least 1s"),
            ("every 1500ms", "whole seconds"),
            ("every soon", "invalid duration"),
            ("hourly 15", "hourly takes :MM"),
            ("hourly :61", "0 to 59"),
            ("daily 25:00", "invalid time \"25:00\""),
            ("daily 3pm", "HH:MM"),
            ("weekly funday 09:00", "unknown day \"funday\""),
            ("monthly 32 06:00", "day 32 does not exist"),
            ("monthly 0 06:00", "day 0 does not exist"),
            ("0 0 30 2 *", "never fires"),
            ("61 * * * *", "minute field"),
        ] {
            let err = text.parse::<Pattern>().expect_err(text).to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        let err = "Europe/Berln"
            .parse::<Zone>()
            .expect_err("typo")
            .to_string();
        assert!(err.contains("unknown time zone \"Europe/Berln\""), "{err}");
        assert_eq!(
            "Europe/Berlin".parse::<Zone>().expect("zone").to_string(),
            "Europe/Berlin"
        );
    }
}
