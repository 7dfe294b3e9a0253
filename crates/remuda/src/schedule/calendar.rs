//! Calendar patterns: the wall-clock times a schedule fires at, as sets of allowed seconds,
//! minutes, hours, days of the month, months and weekdays. Every pattern but `every` is one
//! (`hourly`, `daily`, `weekly`, `monthly` fix some fields; cron sets them all), so one
//! calculator (`next.rs`) serves them all. This file also reads 5-field cron expressions.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// Allowed wall-clock times, one bit per allowed value of each field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Calendar {
    /// Bits 0..=59.
    pub seconds: u64,
    /// Bits 0..=59.
    pub minutes: u64,
    /// Bits 0..=23.
    pub hours: u32,
    /// Bits 1..=31.
    pub days: u32,
    /// Bits 1..=12.
    pub months: u16,
    /// Bits 0..=6, Sunday = 0.
    pub weekdays: u8,
    /// How the day of the month and the weekday combine.
    pub day_rule: DayRule,
}

/// How a date must match the two day fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DayRule {
    /// Both: the day of the month and the weekday (one of them usually allows every day).
    Both,
    /// Either one: cron's rule when neither field starts with `*` (`0 0 1,15 * MON` fires on
    /// the 1st, the 15th and every Monday), as in Vixie cron and cronie.
    Either,
}

const ALL_HOURS: u32 = (1 << 24) - 1;
const ALL_DAYS: u32 = !1;
const ALL_MONTHS: u16 = ((1 << 13) - 1) & !1;
const ALL_WEEKDAYS: u8 = (1 << 7) - 1;

impl Calendar {
    /// Every day at the times `hours`:`minutes`:`seconds`.
    pub fn daily(hours: u32, minutes: u64, seconds: u64) -> Calendar {
        Calendar {
            seconds,
            minutes,
            hours,
            days: ALL_DAYS,
            months: ALL_MONTHS,
            weekdays: ALL_WEEKDAYS,
            day_rule: DayRule::Both,
        }
    }

    /// Every hour at `minute`:`second`.
    pub fn hourly(minute: u32, second: u32) -> Calendar {
        Calendar::daily(ALL_HOURS, 1 << minute, 1 << second)
    }

    /// At `time` every day.
    pub fn at(time: NaiveTime) -> Calendar {
        Calendar::daily(1 << time.hour(), 1 << time.minute(), 1 << time.second())
    }

    /// At `time` on the weekdays `weekdays` (bits, Sunday = 0).
    pub fn weekly(weekdays: u8, time: NaiveTime) -> Calendar {
        Calendar {
            weekdays,
            ..Calendar::at(time)
        }
    }

    /// At `time` on day `day` of every month that has one.
    pub fn monthly(day: u32, time: NaiveTime) -> Calendar {
        Calendar {
            days: 1 << day,
            ..Calendar::at(time)
        }
    }

    /// Whether the pattern fires on `date` (at some time of it).
    pub fn matches_date(&self, date: NaiveDate) -> bool {
        if self.months & (1 << date.month()) == 0 {
            return false;
        }
        let by_day = self.days & (1 << date.day()) != 0;
        let by_weekday = self.weekdays & (1 << date.weekday().num_days_from_sunday()) != 0;
        match self.day_rule {
            DayRule::Both => by_day && by_weekday,
            DayRule::Either => by_day || by_weekday,
        }
    }

    /// Whether the pattern fires at wall-clock time `wall` (for the calculator's tests).
    #[cfg(test)]
    pub fn matches(&self, wall: NaiveDateTime) -> bool {
        self.matches_date(wall.date())
            && self.hours & (1 << wall.hour()) != 0
            && self.minutes & (1 << wall.minute()) != 0
            && self.seconds & (1 << wall.second()) != 0
    }

    /// The first wall-clock time of the pattern at or after `from`, looking no further than
    /// `days` days ahead.
    pub fn first_at_or_after(&self, from: NaiveDateTime, days: u32) -> Option<NaiveDateTime> {
        let mut date = from.date();
        for _ in 0..=days {
            if self.matches_date(date) {
                let floor = (date == from.date()).then(|| from.time());
                if let Some(time) = self.first_time(floor) {
                    return Some(date.and_time(time));
                }
            }
            date = date.succ_opt()?;
        }
        None
    }

    /// The first time of day of the pattern at or after `floor` (any time when `None`).
    fn first_time(&self, floor: Option<NaiveTime>) -> Option<NaiveTime> {
        let (fh, fm, fs) = floor.map_or((0, 0, 0), |t| (t.hour(), t.minute(), t.second()));
        for h in bits(u64::from(self.hours), fh) {
            let min_floor = if h == fh { fm } else { 0 };
            for m in bits(self.minutes, min_floor) {
                let sec_floor = if h == fh && m == fm { fs } else { 0 };
                if let Some(s) = bits(self.seconds, sec_floor).next() {
                    return NaiveTime::from_hms_opt(h, m, s);
                }
            }
        }
        None
    }
}

/// The set bits of `set` from bit `from` up, in order.
fn bits(set: u64, from: u32) -> impl Iterator<Item = u32> {
    (from..64).filter(move |b| set & (1 << b) != 0)
}

/// Reads a 5-field cron expression (minute, hour, day of month, month, weekday) or one of
/// the aliases `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
/// `@hourly`. Fields take `*`, numbers, ranges (`1-5`), lists (`1,15`), steps (`*/5`,
/// `10-50/10`, `5/15`), month and weekday names (`JAN`, `MON-FRI`), and 7 for Sunday.
pub(crate) fn parse_cron(expr: &str) -> Result<Calendar, String> {
    let text = expr.trim();
    let text = match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        alias if alias.starts_with('@') => {
            return Err(format!(
                "unknown cron alias {text:?}: use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly"
            ))
        }
        _ => text,
    };
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "cron expression {expr:?} has {} field{}: it needs 5 (minute hour day-of-month month weekday), like \"*/5 * * * *\"",
            fields.len(),
            if fields.len() == 1 { "" } else { "s" }
        ));
    }
    let minutes = field(fields[0], &MINUTE)?;
    let hours = field(fields[1], &HOUR)?;
    let days = field(fields[2], &DAY)?;
    let months = field(fields[3], &MONTH)?;
    let mut weekdays = field(fields[4], &WEEKDAY)?;
    if weekdays & (1 << 7) != 0 {
        weekdays = (weekdays | 1) & !(1 << 7); // 7 is Sunday too
    }
    // as in Vixie cron: when either day field starts with `*`, a date must match both
    let day_rule = if fields[2].starts_with('*') || fields[4].starts_with('*') {
        DayRule::Both
    } else {
        DayRule::Either
    };
    Ok(Calendar {
        seconds: 1,
        minutes,
        hours: hours as u32,
        days: days as u32,
        months: months as u16,
        weekdays: weekdays as u8,
        day_rule,
    })
}

/// One cron field's range and names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// The value of `names[0]`.
    first_name: u32,
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    first_name: 0,
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    first_name: 0,
};
const DAY: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    first_name: 0,
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    first_name: 1,
};
const WEEKDAY: Field = Field {
    name: "weekday",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    first_name: 0,
};

/// Reads one field into a bit set.
fn field(text: &str, f: &Field) -> Result<u64, String> {
    let allowed = || {
        let names = if f.names.is_empty() {
            String::new()
        } else {
            format!(
                " or names {}-{}",
                f.names[0].to_uppercase(),
                f.names[f.names.len() - 1].to_uppercase()
            )
        };
        format!(
            "the {} field allows *, {}-{}{names}, lists (1,5), ranges (1-5) and steps (*/5)",
            f.name, f.min, f.max
        )
    };
    let bad = |part: &str| {
        format!(
            "invalid cron {} field {text:?} at {part:?}: {}",
            f.name,
            allowed()
        )
    };
    let mut set = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step.parse().map_err(|_| bad(part))?;
                if step == 0 {
                    return Err(format!(
                        "invalid cron {} field {text:?}: a step of 0 never advances; {}",
                        f.name,
                        allowed()
                    ));
                }
                (range, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (f.min, f.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (
                value(a, f).ok_or_else(|| bad(part))?,
                value(b, f).ok_or_else(|| bad(part))?,
            )
        } else {
            let v = value(range, f).ok_or_else(|| bad(part))?;
            // `5/15` means from 5 to the end, every 15
            (v, if part.contains('/') { f.max } else { v })
        };
        if lo > hi {
            return Err(format!(
                "invalid cron {} field {text:?}: the range {range} runs backwards; write it from low to high",
                f.name
            ));
        }
        for v in (lo..=hi).step_by(step as usize) {
            set |= 1 << v;
        }
    }
    Ok(set)
}

/// A number or name within the field's range.
fn value(text: &str, f: &Field) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    let v = match f.names.iter().position(|n| *n == lower) {
        Some(i) => i as u32 + f.first_name,
        None if text.chars().all(|c| c.is_ascii_digit()) && !text.is_empty() => {
            text.parse().ok()?
        }
        None => return None,
    };
    (f.min..=f.max).contains(&v).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect(text)
    }

    #[test]
    fn cron_fields_read_as_cron_does() {
        let c = parse_cron("*/15 9-17 * * MON-FRI").expect("valid");
        assert_eq!(c.minutes, 1 | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(c.hours, ((1 << 18) - 1) & !((1 << 9) - 1));
        assert_eq!(c.weekdays, 0b011_1110);
        assert_eq!(c.day_rule, DayRule::Both);
        let c = parse_cron("5/20 0 1,15 jan,Jul 7").expect("valid");
        assert_eq!(c.minutes, 1 << 5 | 1 << 25 | 1 << 45);
        assert_eq!(c.months, 1 << 1 | 1 << 7);
        assert_eq!(c.weekdays, 1, "7 is Sunday");
        assert_eq!(c.day_rule, DayRule::Either);
        assert_eq!(parse_cron("@daily"), parse_cron("0 0 * * *"));
        assert_eq!(parse_cron("@weekly"), parse_cron("0 0 * * SUN"));
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        let c = parse_cron("0 0 13 * FRI").expect("valid");
        assert!(c.matches(wall("2026-11-13 00:00:00")), "the 13th");
        assert!(c.matches(wall("2026-11-06 00:00:00")), "a Friday");
        assert!(!c.matches(wall("2026-11-07 00:00:00")));
        // a day field starting with `*` makes it "both", as in Vixie cron
        let c = parse_cron("0 0 */2 * FRI").expect("valid");
        assert!(
            !c.matches(wall("2026-11-05 00:00:00")),
            "an odd day, not a Friday"
        );
        assert!(
            !c.matches(wall("2026-11-06 00:00:00")),
            "a Friday, an even day"
        );
        assert!(
            c.matches(wall("2026-11-13 00:00:00")),
            "a Friday, an odd day"
        );
    }

    #[test]
    fn bad_cron_fields_are_named() {
        for (expr, says) in [
            ("* * * *", "has 4 fields"),
            ("60 * * * *", "minute field \"60\""),
            ("* 24 * * *", "hour field"),
            ("* * 0 * *", "day-of-month field"),
            ("* * 32 * *", "day-of-month field"),
            ("* * * 13 *", "month field"),
            ("* * * * 8", "weekday field"),
            ("*/0 * * * *", "step of 0"),
            ("5-1 * * * *", "runs backwards"),
            ("* * * * MON-FUN", "names SUN-SAT"),
            ("@fortnightly", "unknown cron alias"),
            ("a * * * *", "minute field"),
        ] {
            let err = parse_cron(expr).expect_err(expr);
            assert!(err.contains(says), "{expr}: {err}");
        }
    }

    #[test]
    fn the_first_time_at_or_after_skips_short_months() {
        let c = Calendar::monthly(31, NaiveTime::from_hms_opt(6, 0, 0).expect("time"));
        assert_eq!(
            c.first_at_or_after(wall("2026-01-31 06:00:01"), 400),
            Some(wall("2026-03-31 06:00:00"))
        );
        assert_eq!(
            c.first_at_or_after(wall("2026-01-31 06:00:00"), 400),
            Some(wall("2026-01-31 06:00:00"))
        );
        let never = parse_cron("0 0 30 2 *").expect("valid fields");
        assert_eq!(
            never.first_at_or_after(wall("2026-01-01 00:00:00"), 3000),
            None
        );
    }
}
