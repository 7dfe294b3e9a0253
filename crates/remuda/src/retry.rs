//! Retry policy: how long to wait before the next attempt, and which errors are worth one.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The wait before attempt `n + 1` after attempt `n` failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Backoff {
    /// Always the same delay.
    Fixed {
        /// The delay.
        #[serde(with = "serde_duration")]
        delay: Duration,
        /// Spread each delay randomly over [delay/2, delay] so retries of many jobs that failed
        /// together do not hit the same service at the same instant.
        #[serde(default)]
        jitter: bool,
    },
    /// `base * 2^(attempt-1)`, capped at `max`.
    Exponential {
        /// The first delay.
        #[serde(with = "serde_duration")]
        base: Duration,
        /// The largest delay.
        #[serde(with = "serde_duration")]
        max: Duration,
        /// Spread each delay randomly over [delay/2, delay].
        #[serde(default = "yes")]
        jitter: bool,
    },
}

fn yes() -> bool {
    true
}

impl Default for Backoff {
    /// Exponential from 1 s to 1 h with jitter: quick first retries, then patient ones.
    fn default() -> Self {
        Backoff::Exponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
            jitter: true,
        }
    }
}

impl Backoff {
    /// Checks that the policy makes sense: an exponential backoff whose `base` exceeds its
    /// `max` would never grow, and is most likely the two values swapped.
    pub fn validate(&self) -> Result<(), String> {
        if let Backoff::Exponential { base, max, .. } = self {
            if base > max {
                return Err(format!(
                    "the exponential backoff's base ({}) is more than its max ({}): base is the first delay, max the largest",
                    crate::duration::format(*base),
                    crate::duration::format(*max)
                ));
            }
        }
        Ok(())
    }

    /// The delay after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: i32) -> Duration {
        let (raw, jitter) = match self {
            Backoff::Fixed { delay, jitter } => (*delay, *jitter),
            Backoff::Exponential { base, max, jitter } => {
                let exponent = attempt.saturating_sub(1).clamp(0, 30) as u32;
                let grown = base.saturating_mul(1u32 << exponent);
                (grown.min(*max), *jitter)
            }
        };
        if jitter && !raw.is_zero() {
            raw.mul_f64(0.5 + fastrand::f64() * 0.5)
        } else {
            raw
        }
    }
}

/// Durations in config files as `500ms`, `30s`, `5m`, `1h`.
pub(crate) mod serde_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::duration::format(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        crate::duration::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The wait a `Retry-After` header asks: seconds, or an HTTP date (a date past asks none);
/// `None` when it says neither.
pub(crate) fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    match value.parse::<u64>() {
        Ok(seconds) => Some(Duration::from_secs(seconds)),
        Err(_) => {
            let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
            Some(
                (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
                    .to_std()
                    .unwrap_or(Duration::ZERO),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_doubles_up_to_its_cap() {
        let b = Backoff::Exponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
            jitter: false,
        };
        let delays: Vec<_> = (1..=6).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(b.delay(1000), Duration::from_secs(10));
    }

    #[test]
    fn jitter_stays_within_half_to_whole() {
        let b = Backoff::Fixed {
            delay: Duration::from_millis(1000),
            jitter: true,
        };
        let delays: Vec<_> = (0..200).map(|_| b.delay(1)).collect();
        assert!(delays
            .iter()
            .all(|d| *d >= Duration::from_millis(500) && *d <= Duration::from_millis(1000)));
        assert!(
            delays.iter().any(|d| *d != delays[0]),
            "jitter varies the delay"
        );
    }
}
