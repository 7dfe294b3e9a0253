//! Human durations as used in flags and config files: `500ms`, `30s`, `5m`, `1h`, `2d`, or a
//! sum of them (`1m30s`).

use std::time::Duration;

/// Longest duration accepted: 100 years.
pub const MAX: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Parses `500ms`, `30s`, `5m`, `1h`, `2d` (and sums like `1h30m`).
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    let bad = || {
        format!("invalid duration {text:?}: use a number with a unit, like 500ms, 30s, 5m or 1h")
    };
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        let after = &rest[digits..];
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit_seconds = match &after[..unit_len] {
            "ms" => 0.001,
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        total = total
            .checked_add(Duration::try_from_secs_f64(number * unit_seconds).map_err(|_| bad())?)
            .filter(|t| *t <= MAX)
            .ok_or_else(|| format!("duration {text:?} is too long: at most 100 years"))?;
        rest = &after[unit_len..];
    }
    Ok(total)
}

/// Formats a duration the way [`parse`] reads it, in the largest exact unit.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in ["", "10", "s", "10 parsecs", "-1s", "1h x"] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains("invalid duration"), "{err}");
        }
        let err = parse("10000000000000000000s10000000000000000000s").expect_err("overflow");
        assert!(err.contains("too long"), "{err}");
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "30s", "5m", "1h", "2d", "1500ms"] {
            let d = parse(text).expect(text);
            assert_eq!(format(d), text);
        }
    }
}
