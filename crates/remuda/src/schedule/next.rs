//! The next-fire calculator: the first instant strictly after a given one at which a
//! pattern fires, on a zone's clock.
//!
//! Daylight-saving time, the two rules (the README states them for users):
//! - **A wall-clock time the clocks skip** (spring forward: 02:30 in Berlin on the last
//!   Sunday of March) fires at the first instant after the gap: 03:00 CEST, the moment the
//!   clocks jump. Every time inside one gap fires there, once: `*/15` loses no day and gains
//!   no burst (02:00, 02:15, 02:30 and 02:45 make one fire, not four). The other choices
//!   either drop the day's run (horsies, most cron daemons for daily jobs) or shift it by
//!   the gap (03:30: a time that is not in the pattern at all).
//! - **A wall-clock time the clocks repeat** (fall back: 02:30 twice in Berlin on the last
//!   Sunday of October) fires once, at the earlier instant.
//!
//! Both follow from one definition, which the property test checks by brute force: a
//! pattern fires at each instant whose wall-clock time is the first to reach, or pass, one
//! of its wall-clock times that the clock has not shown before.

use super::calendar::Calendar;
use super::pattern::{Rule, HORIZON_DAYS};
use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

/// Most candidate times tried that turn out not to be after `after`: those of a repeated
/// hour (fall back), at most one per second of it.
const MAX_TRIES: usize = 4000;

/// The first fire of `rule` strictly after `after` in `tz`.
pub(crate) fn next_after(rule: Rule, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match rule {
        Rule::Every(seconds) => {
            let next = after.timestamp().div_euclid(seconds).checked_add(1)? * seconds;
            DateTime::from_timestamp(next, 0)
        }
        Rule::Calendar(calendar) => next_calendar(&calendar, tz, after),
    }
}

/// Walks the pattern's wall-clock times from `after`'s own: an earlier one cannot fire
/// after `after` (the wall-to-instant mapping below never goes backwards), a later one may
/// not either (the second pass of a repeated hour), so the walk goes on until one does.
fn next_calendar(calendar: &Calendar, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut from = after.with_timezone(&tz).naive_local();
    for _ in 0..MAX_TRIES {
        let wall = calendar.first_at_or_after(from, HORIZON_DAYS)?;
        let at = instant_of(tz, wall)?;
        if at > after {
            return Some(at);
        }
        from = wall.checked_add_signed(TimeDelta::seconds(1))?;
    }
    None
}

/// The instant a wall-clock time fires at: itself, the earlier of two when the clocks
/// repeat it, the end of the gap when they skip it.
pub(crate) fn instant_of(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(at) => Some(at.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, b) => Some(a.min(b).with_timezone(&Utc)),
        LocalResult::None => gap_end(tz, wall),
    }
}

/// The instant the clocks jump over `wall`: the first whose wall-clock time is after it.
/// Offsets are within -12 h and +14 h of UTC, so it lies within a day of `wall` read as
/// UTC; found by bisection to the second.
fn gap_end(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let as_utc = wall.and_utc().timestamp();
    let (mut lo, mut hi) = (as_utc - 15 * 3600, as_utc + 13 * 3600);
    let local =
        |t: i64| DateTime::from_timestamp(t, 0).map(|at| at.with_timezone(&tz).naive_local());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if local(mid)? > wall {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    DateTime::from_timestamp(hi, 0)
}

#[cfg(test)]
mod tests;
