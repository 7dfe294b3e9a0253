//! What one firing of a due schedule does: which of its due times get a job, how many are
//! skipped and why, and its next fire time. Pure: the firer (`maintenance/firer.rs`) reads
//! the row and the database's clock, asks this, and writes the answer in one transaction.

use super::{CatchUp, Overlap, Pattern, Zone};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::VecDeque;

/// How late a fire time may be and still fire with `catch_up = "none"`: a time is missed
/// only when no firer could fire it for this long — everything down, or a leader's death
/// noticed late (`rescue_after` plus `maintenance_interval`, 35 s by default, stay within
/// it).
pub const LATE_AFTER: TimeDelta = TimeDelta::minutes(1);

/// Fire times walked at most in one firing (a calendar pattern far behind: a minutely
/// cron down for more than two months), while the firer holds the schedule's row: beyond
/// it, only the latest time fires and the others are skipped.
const MAX_WALK: usize = 100_000;

/// The decision for one schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Fire times that get a job, oldest first.
    pub fires: Vec<DateTime<Utc>>,
    /// Due times that get none.
    pub skipped: i64,
    /// Why they get none (when `skipped > 0`).
    pub reason: Option<&'static str>,
    /// The first fire time after now.
    pub next: DateTime<Utc>,
}

/// A due schedule as the firer read it.
pub(crate) struct Due<'a> {
    pub pattern: &'a Pattern,
    pub zone: Zone,
    pub catch_up: CatchUp,
    pub catch_up_limit: u32,
    pub overlap: Overlap,
    /// The last job fired is still waiting or running.
    pub busy: bool,
    pub next_run_at: DateTime<Utc>,
}

/// Plans the firing of `due` at `now`; `None` for a pattern that never fires again.
pub(crate) fn plan(due: &Due<'_>, now: DateTime<Utc>) -> Option<Plan> {
    let keep = match due.catch_up {
        // the times less than LATE_AFTER late are kept, then filtered below
        CatchUp::All | CatchUp::None => due.catch_up_limit.max(1) as usize,
        CatchUp::Skip => 1,
    };
    let rule = due.pattern.rule().ok()?;
    let next_after = |at| super::next::next_after(rule, due.zone.0, at);
    let (mut fires, total) = due_times(due, now, keep, &next_after)?;
    let next = next_after(now.max(due.next_run_at))?;
    let mut reason = match due.catch_up {
        CatchUp::Skip => {
            "missed while no worker could fire it (catch_up = skip: only the latest fires)"
        }
        CatchUp::All => "missed while no worker could fire it, beyond catch_up_limit",
        CatchUp::None => "missed while no worker could fire it (catch_up = none)",
    };
    if due.catch_up == CatchUp::None {
        fires.retain(|t| now - *t <= LATE_AFTER);
    }
    if due.overlap == Overlap::Skip {
        if due.busy {
            fires.clear();
            reason = "overlap = skip: the previous job was still waiting or running";
        } else if fires.len() > 1 {
            fires.drain(..fires.len() - 1);
            reason = "overlap = skip: one job at a time";
        }
    }
    let skipped = total - fires.len() as i64;
    Some(Plan {
        fires,
        skipped,
        reason: (skipped > 0).then_some(reason),
        next,
    })
}

/// The latest `keep` due times (from `next_run_at` up to `now`), and how many there are.
fn due_times(
    due: &Due<'_>,
    now: DateTime<Utc>,
    keep: usize,
    next_after: &dyn Fn(DateTime<Utc>) -> Option<DateTime<Utc>>,
) -> Option<(Vec<DateTime<Utc>>, i64)> {
    if due.next_run_at > now {
        return Some((Vec::new(), 0));
    }
    if let Pattern::Every(interval) = due.pattern {
        // arithmetic: a 1s schedule down for a month is 2.6 million times
        let step = TimeDelta::from_std(*interval).ok()?;
        let step_ms = step.num_milliseconds().max(1);
        let total = (now - due.next_run_at).num_milliseconds() / step_ms + 1;
        let kept = total.min(keep as i64);
        let fires = (total - kept..total)
            .map(|k| {
                let offset = TimeDelta::try_milliseconds(k.checked_mul(step_ms)?)?;
                due.next_run_at.checked_add_signed(offset)
            })
            .collect::<Option<Vec<_>>>()?;
        return Some((fires, total));
    }
    let mut fires = VecDeque::with_capacity(keep.min(1024));
    let mut total = 0i64;
    let mut at = due.next_run_at;
    while at <= now && (total as usize) < MAX_WALK {
        if fires.len() == keep {
            fires.pop_front();
        }
        fires.push_back(at);
        total += 1;
        at = next_after(at)?;
    }
    if at <= now {
        // walked as far as allowed: only the latest fires (the count of the others is a
        // lower bound: they were not all walked)
        let latest = latest_at_or_before(now, next_after)?;
        return Some((vec![latest], total + 1));
    }
    Some((fires.into(), total))
}

/// The latest fire time at or before `now`, found backwards from it a day at a time.
fn latest_at_or_before(
    now: DateTime<Utc>,
    next_after: &dyn Fn(DateTime<Utc>) -> Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    let mut from = now - TimeDelta::days(1);
    loop {
        let mut at = next_after(from)?;
        if at <= now {
            let mut latest = at;
            while at <= now {
                latest = at;
                at = next_after(at)?;
            }
            return Some(latest);
        }
        from -= TimeDelta::days(30);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect(text)
            .with_timezone(&Utc)
    }

    fn due(pattern: &Pattern, catch_up: CatchUp, overlap: Overlap, busy: bool) -> Due<'_> {
        Due {
            pattern,
            zone: Zone::UTC,
            catch_up,
            catch_up_limit: 3,
            overlap,
            busy,
            next_run_at: utc("2026-12-01T10:00:00Z"),
        }
    }

    #[test]
    fn after_a_ten_minute_gap_each_catch_up_fires_as_it_says() {
        let minutely = Pattern::every("1m").expect("pattern");
        let now = utc("2026-12-01T10:10:30Z"); // 11 times due: 10:00 … 10:10
        let skip = plan(&due(&minutely, CatchUp::Skip, Overlap::Allow, false), now).expect("plan");
        assert_eq!(skip.fires, [utc("2026-12-01T10:10:00Z")]);
        assert_eq!((skip.skipped, skip.next), (10, utc("2026-12-01T10:11:00Z")));
        let all = plan(&due(&minutely, CatchUp::All, Overlap::Allow, false), now).expect("plan");
        assert_eq!(
            all.fires,
            ["10:08", "10:09", "10:10"].map(|t| utc(&format!("2026-12-01T{t}:00Z"))),
            "the latest catch_up_limit (3) of them"
        );
        assert_eq!(all.skipped, 8);
        let none = plan(&due(&minutely, CatchUp::None, Overlap::Allow, false), now).expect("plan");
        assert_eq!(
            none.fires,
            [utc("2026-12-01T10:10:00Z")],
            "30 s late is on time"
        );
        let late = plan(
            &due(&minutely, CatchUp::None, Overlap::Allow, false),
            utc("2026-12-01T10:11:59Z"),
        )
        .expect("plan");
        assert_eq!((late.fires.len(), late.skipped), (1, 11));
        let calendar: Pattern = "* * * * *".parse().expect("cron");
        let cron = plan(&due(&calendar, CatchUp::All, Overlap::Allow, false), now).expect("plan");
        assert_eq!(
            (cron.fires, cron.skipped),
            (all.fires, 8),
            "calendar patterns agree"
        );
    }

    #[test]
    fn overlap_skip_fires_nothing_while_the_last_job_runs_and_one_job_at_a_time() {
        let minutely = Pattern::every("1m").expect("pattern");
        let now = utc("2026-12-01T10:02:00Z");
        let busy = plan(&due(&minutely, CatchUp::All, Overlap::Skip, true), now).expect("plan");
        assert_eq!((busy.fires.len(), busy.skipped), (0, 3));
        assert!(busy
            .reason
            .expect("a reason")
            .contains("still waiting or running"));
        let free = plan(&due(&minutely, CatchUp::All, Overlap::Skip, false), now).expect("plan");
        assert_eq!((free.fires, free.skipped), (vec![now], 2));
        let on_time = plan(
            &due(&minutely, CatchUp::Skip, Overlap::Allow, false),
            utc("2026-12-01T10:00:00.2Z"),
        )
        .expect("plan");
        assert_eq!(
            (on_time.fires.len(), on_time.skipped, on_time.reason),
            (1, 0, None)
        );
    }
}
