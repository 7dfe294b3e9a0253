use super::*;
use crate::schedule::pattern::Pattern;
use chrono::NaiveTime;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect(text)
        .with_timezone(&Utc)
}

fn zone(name: &str) -> Tz {
    name.parse().expect(name)
}

fn fires(pattern: &str, tz: &str, after: &str, n: usize) -> Vec<String> {
    let rule = pattern
        .parse::<Pattern>()
        .expect(pattern)
        .rule()
        .expect(pattern);
    let mut at = utc(after);
    let mut out = Vec::new();
    for _ in 0..n {
        at = next_after(rule, zone(tz), at).expect("fires");
        out.push(at.to_rfc3339());
    }
    out
}

#[test]
fn a_time_the_clocks_skip_fires_when_they_jump() {
    // Berlin springs forward at 02:00 CET (01:00 UTC) to 03:00 CEST
    assert_eq!(
        fires("daily 02:30", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
        ["2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"]
    );
    // every time inside the gap makes one fire, at its end
    assert_eq!(
        fires("*/15 * * * *", "Europe/Berlin", "2026-03-29T00:40:00Z", 3),
        [
            "2026-03-29T00:45:00+00:00",
            "2026-03-29T01:00:00+00:00",
            "2026-03-29T01:15:00+00:00"
        ]
    );
    // New York: 02:00 EST (07:00 UTC) becomes 03:00 EDT
    assert_eq!(
        fires("daily 02:30", "America/New_York", "2026-03-08T00:00:00Z", 1),
        ["2026-03-08T07:00:00+00:00"]
    );
    // Lord Howe moves by half an hour: 02:00 +10:30 becomes 02:30 +11 (15:30 UTC)
    assert_eq!(
        fires(
            "daily 02:15",
            "Australia/Lord_Howe",
            "2026-10-03T00:00:00Z",
            1
        ),
        ["2026-10-03T15:30:00+00:00"]
    );
}

#[test]
fn a_time_the_clocks_repeat_fires_once_at_the_earlier_instant() {
    // Berlin falls back at 03:00 CEST (01:00 UTC) to 02:00 CET: 02:30 happens twice
    assert_eq!(
        fires("daily 02:30", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
        ["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]
    );
    // from inside the repeated hour, its second pass is not a fire
    assert_eq!(
        fires("30 * * * *", "Europe/Berlin", "2026-10-25T00:45:00Z", 1),
        ["2026-10-25T02:30:00+00:00"],
        "03:30 CET is next; 02:30 CET (01:30 UTC) was already shown as CEST"
    );
    // Lord Howe falls back half an hour: 01:30 to 02:00 happens twice
    assert_eq!(
        fires(
            "daily 01:45",
            "Australia/Lord_Howe",
            "2026-04-04T00:00:00Z",
            2
        ),
        ["2026-04-04T14:45:00+00:00", "2026-04-05T15:15:00+00:00"]
    );
}

#[test]
fn intervals_count_elapsed_time_from_the_epoch() {
    assert_eq!(
        fires("every 5m", "Europe/Berlin", "2026-03-29T00:58:00Z", 2),
        ["2026-03-29T01:00:00+00:00", "2026-03-29T01:05:00+00:00"],
        "aligned to the epoch, and the zone plays no part"
    );
    assert_eq!(
        fires("every 1s", "UTC", "2026-01-01T00:00:00.5Z", 1),
        ["2026-01-01T00:00:01+00:00"]
    );
}

#[test]
fn monthly_day_31_skips_short_months_and_weekly_keeps_its_days() {
    assert_eq!(
        fires("monthly 31 06:00", "UTC", "2026-01-31T07:00:00Z", 3),
        [
            "2026-03-31T06:00:00+00:00",
            "2026-05-31T06:00:00+00:00",
            "2026-07-31T06:00:00+00:00"
        ]
    );
    assert_eq!(
        fires(
            "weekly mon,fri 09:30",
            "America/New_York",
            "2026-12-01T00:00:00Z",
            3
        ),
        [
            "2026-12-04T14:30:00+00:00",
            "2026-12-07T14:30:00+00:00",
            "2026-12-11T14:30:00+00:00"
        ]
    );
    assert_eq!(
        fires("0 12 29 2 *", "UTC", "2025-01-01T00:00:00Z", 2),
        ["2028-02-29T12:00:00+00:00", "2032-02-29T12:00:00+00:00"]
    );
}

/// The definition the calculator must meet, by brute force: step through every minute on
/// the UTC line, read the zone's clock, and fire at each minute whose wall-clock time is
/// the first to reach or pass one of the pattern's times that the clock had not shown
/// before (a repeated hour shows nothing new; a jump passes everything it skips).
fn brute_force(
    calendar: &Calendar,
    walls: &[(DateTime<Utc>, NaiveDateTime)],
) -> Vec<DateTime<Utc>> {
    let minute = TimeDelta::minutes(1);
    let mut fired = Vec::new();
    let mut shown: Option<NaiveDateTime> = None;
    for &(at, wall) in walls {
        let new_times = match shown {
            Some(max) if wall <= max => continue,
            Some(max) => {
                let mut t = max + minute;
                let mut any = false;
                while t <= wall && !any {
                    any = calendar.matches(t);
                    t += minute;
                }
                any
            }
            None => calendar.matches(wall),
        };
        if new_times {
            fired.push(at);
        }
        shown = Some(wall);
    }
    fired
}

/// A random cron expression whose fields are each one of a few shapes (a value, a list, a
/// range, a step, `*`), never firing every minute (which would only make the test slow).
fn random_cron(rng: &mut fastrand::Rng) -> String {
    let pick =
        |rng: &mut fastrand::Rng, options: &[&str]| options[rng.usize(..options.len())].to_string();
    let minute = pick(
        rng,
        &["0", "30", "0,30", "*/15", "5-10", "59", "1/20", "45"],
    );
    let hour = pick(rng, &["*", "2", "1-3", "*/2", "2,3", "0", "23", "1/5"]);
    let day = pick(rng, &["*", "*", "1", "31", "*/10", "15", "28-31", "29"]);
    let month = pick(rng, &["*", "*", "3", "10", "3,4,10", "*/3", "feb"]);
    let weekday = pick(
        rng,
        &["*", "*", "0", "SUN", "MON-FRI", "6", "sat,sun", "*/2"],
    );
    format!("{minute} {hour} {day} {month} {weekday}")
}

#[test]
fn the_calculator_agrees_with_a_minute_by_minute_scan_over_years() {
    let start = utc("2024-01-01T00:00:00Z");
    let end = utc("2027-01-01T00:00:00Z");
    let mut rng = fastrand::Rng::with_seed(0x5eed_cafe);
    for name in [
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "Asia/Kolkata",
        "UTC",
    ] {
        let tz = zone(name);
        let mut walls = Vec::new();
        let mut at = start;
        while at < end {
            walls.push((at, at.with_timezone(&tz).naive_local()));
            at += TimeDelta::minutes(1);
        }
        let mut patterns: Vec<String> = (0..6).map(|_| random_cron(&mut rng)).collect();
        patterns.extend(
            [
                "daily 02:30",
                "daily 01:45",
                "hourly :30",
                "weekly sun 02:00",
                "monthly 31 02:15",
            ]
            .map(String::from),
        );
        for text in &patterns {
            let pattern: Pattern = match text.parse() {
                Ok(p) => p,
                Err(_) => continue, // a random cron that never fires (30 February)
            };
            let Ok(Rule::Calendar(calendar)) = pattern.rule() else {
                panic!("{text} is a calendar pattern");
            };
            let expected = brute_force(&calendar, &walls);
            let mut got = Vec::new();
            let mut at = start - TimeDelta::seconds(1);
            while let Some(next) = next_calendar(&calendar, tz, at).filter(|n| *n < end) {
                got.push(next);
                at = next;
            }
            let first_difference = expected.iter().zip(&got).position(|(a, b)| a != b);
            assert!(
                expected == got,
                "{text} in {name}: {} fires by scan, {} by the calculator; first difference at {:?}",
                expected.len(),
                got.len(),
                first_difference.map(|i| (expected[i], got[i]))
            );
            // and from any instant, not only from the last fire
            for _ in 0..50 {
                let from = start
                    + TimeDelta::seconds(rng.i64(0..(end - start).num_seconds() - 86_400 * 40));
                let want = expected.iter().find(|f| **f > from).copied();
                assert_eq!(
                    next_calendar(&calendar, tz, from).filter(|n| *n < end),
                    want,
                    "{text} in {name} after {from}"
                );
            }
        }
    }
}

#[test]
fn calendar_times_are_never_earlier_than_their_walls_allow() {
    // the wall-to-instant mapping never goes backwards across a whole year of Lord Howe
    let tz = zone("Australia/Lord_Howe");
    let mut wall = NaiveDateTime::new(
        chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
        NaiveTime::MIN,
    );
    let mut last = instant_of(tz, wall).expect("instant");
    for _ in 0..(365 * 24 * 4) {
        wall += TimeDelta::minutes(15);
        let at = instant_of(tz, wall).expect("instant");
        assert!(at >= last, "{wall}: {at} before {last}");
        last = at;
    }
}
