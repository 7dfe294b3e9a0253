//! Completion notifications: a signed webhook ([Standard Webhooks]) and/or an email when a job
//! or a workflow run reaches a final state, delivered at least once through a transactional
//! outbox.
//!
//! The outbox row (`remuda.notifications`) is written by the finalization seam in the
//! transaction of the final state itself (migration 13), so a crash can neither lose a
//! notification nor produce one for an outcome that rolled back. Every worker runs a
//! [dispatcher](dispatcher) that claims due rows with `SKIP LOCKED` and a lease, sends them and
//! marks them sent; a failed attempt is tried again after a growing delay, up to
//! [`NotificationConfig::max_attempts`], then the row is `dead` until an operator retries it
//! ([`Client::retry_notification`](crate::Client::retry_notification)).
//!
//! Targets come from the job ([`NewJob::notify`](crate::NewJob::notify)), else from its kind's
//! defaults ([`TaskOptions::notify`](crate::TaskOptions::notify), registered by the worker),
//! and for a workflow run from its spec's `notify`.
//!
//! [Standard Webhooks]: https://www.standardwebhooks.com/

mod config;
pub(crate) mod dispatcher;
mod email;
mod guard;
mod secret;
mod store;
mod webhook;

pub use config::{NotificationConfig, SmtpConfig, SmtpTls};
pub use dispatcher::NotificationStats;
pub use secret::Secret;
pub(crate) use store::set_defaults as store_defaults;
pub use store::{Channel, Notification, NotificationFilter, NotificationState};

use crate::{Error, JobState, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Longest webhook URL or email address accepted.
pub const MAX_TARGET_LEN: usize = 2048;

/// A final outcome that may trigger a notification. Retries in between never notify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The job (or run) completed.
    Completed,
    /// It failed for good.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// The job did not start before its deadline (runs never expire: a run past its
    /// deadline fails).
    Expired,
}

impl Outcome {
    /// All four: what `final` stands for.
    pub const ALL: [Outcome; 4] = [
        Outcome::Completed,
        Outcome::Failed,
        Outcome::Cancelled,
        Outcome::Expired,
    ];

    /// The lowercase name, as the job state it matches.
    pub fn as_str(self) -> &'static str {
        self.state().as_str()
    }

    /// The final job state of this outcome.
    pub fn state(self) -> JobState {
        match self {
            Outcome::Completed => JobState::Completed,
            Outcome::Failed => JobState::Failed,
            Outcome::Cancelled => JobState::Cancelled,
            Outcome::Expired => JobState::Expired,
        }
    }

    /// A comma-separated list of outcomes, or `final` for all four (`"failed,expired"`).
    pub fn parse_list(text: &str) -> Result<Vec<Outcome>> {
        let mut outcomes = Vec::new();
        for item in text.split(',').map(str::trim) {
            if item == "final" {
                outcomes.extend(Outcome::ALL);
            } else {
                outcomes.push(item.parse()?);
            }
        }
        outcomes.sort();
        outcomes.dedup();
        Ok(outcomes)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Outcome {
    type Err = Error;

    fn from_str(text: &str) -> Result<Outcome> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str() == text)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "unknown outcome {text:?} to notify on: expected completed, failed, cancelled, expired or final"
                ))
            })
    }
}

/// Where to send a notification, and for which outcomes: a webhook URL and/or an email
/// address. Stored with the job (or run) as `{"webhook", "email", "on"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyTarget {
    /// An `http` or `https` URL that receives a signed `POST`.
    pub webhook: Option<String>,
    /// An address that receives a plain-text email.
    pub email: Option<String>,
    /// The outcomes that notify (default: all four; `final` in a list stands for them).
    #[serde(default = "all_outcomes", deserialize_with = "outcome_list")]
    pub on: Vec<Outcome>,
}

fn all_outcomes() -> Vec<Outcome> {
    Outcome::ALL.to_vec()
}

/// A list of outcome names, `final` among them standing for all four.
fn outcome_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<Outcome>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    Outcome::parse_list(&names.join(",")).map_err(serde::de::Error::custom)
}

impl NotifyTarget {
    /// A webhook for every final outcome.
    pub fn webhook(url: impl Into<String>) -> NotifyTarget {
        NotifyTarget {
            webhook: Some(url.into()),
            email: None,
            on: all_outcomes(),
        }
    }

    /// An email for every final outcome.
    pub fn email(address: impl Into<String>) -> NotifyTarget {
        NotifyTarget {
            webhook: None,
            email: Some(address.into()),
            on: all_outcomes(),
        }
    }

    /// Adds (or replaces) the email address.
    pub fn and_email(mut self, address: impl Into<String>) -> NotifyTarget {
        self.email = Some(address.into());
        self
    }

    /// Only these outcomes notify.
    pub fn on<I: IntoIterator<Item = Outcome>>(mut self, outcomes: I) -> NotifyTarget {
        self.on = outcomes.into_iter().collect();
        self.on.sort();
        self.on.dedup();
        self
    }

    /// Checks the target: at least one channel, a webhook URL that is `http(s)` with a host,
    /// an email address that parses, at least one outcome. The error names what was wrong.
    pub fn validate(&self) -> Result<()> {
        if self.webhook.is_none() && self.email.is_none() {
            return Err(Error::InvalidInput(
                "a notification target needs a webhook URL or an email address (or both)".into(),
            ));
        }
        if let Some(url) = &self.webhook {
            check_webhook_url(url)?;
        }
        if let Some(address) = &self.email {
            check_email(address)?;
        }
        if self.on.is_empty() {
            return Err(Error::InvalidInput(
                "a notification target needs at least one outcome to notify on (completed, failed, cancelled, expired or final)".into(),
            ));
        }
        Ok(())
    }

    /// The document stored in `jobs.notify`, `notification_defaults` and a workflow's
    /// definition.
    pub(crate) fn stored(&self) -> serde_json::Value {
        serde_json::json!({
            "webhook": self.webhook,
            "email": self.email,
            "on": self.on.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
        })
    }
}

/// Checks a webhook URL: `http` or `https`, with a host, no longer than [`MAX_TARGET_LEN`].
pub fn check_webhook_url(url: &str) -> Result<()> {
    let bad = |why: &str| {
        Error::InvalidInput(format!(
            "webhook URL {url:?} {why}: give an http:// or https:// URL such as https://hooks.example.com/remuda"
        ))
    };
    if url.len() > MAX_TARGET_LEN {
        return Err(bad(&format!("is longer than {MAX_TARGET_LEN} bytes")));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(&format!("does not parse ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(&format!("has scheme {:?}", parsed.scheme())));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    Ok(())
}

/// Checks an email address as SMTP will take it (`ops@example.com`).
pub fn check_email(address: &str) -> Result<()> {
    if address.len() > MAX_TARGET_LEN {
        return Err(Error::InvalidInput(format!(
            "email address {address:?} is longer than {MAX_TARGET_LEN} bytes"
        )));
    }
    address.parse::<lettre::Address>().map(|_| ()).map_err(|e| {
        Error::InvalidInput(format!(
            "{address:?} is not an email address ({e}): give one such as ops@example.com"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_stands_for_the_four_outcomes_and_lists_are_deduplicated() {
        assert_eq!(
            Outcome::parse_list("final").expect("final"),
            Outcome::ALL.to_vec()
        );
        assert_eq!(
            Outcome::parse_list("failed, expired,failed").expect("list"),
            vec![Outcome::Failed, Outcome::Expired]
        );
        let err = Outcome::parse_list("failed,retried")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("\"retried\""), "{err}");
    }

    #[test]
    fn targets_that_could_never_be_sent_are_refused_with_what_was_wrong() {
        for (target, wanted) in [
            (
                NotifyTarget::webhook("ftp://example.com/x"),
                "scheme \"ftp\"",
            ),
            (NotifyTarget::webhook("not a url"), "does not parse"),
            (
                NotifyTarget::email("ops-at-example.com"),
                "not an email address",
            ),
            (
                NotifyTarget::webhook("https://example.com").on([]),
                "at least one outcome",
            ),
        ] {
            let err = target.validate().expect_err("refused").to_string();
            assert!(err.contains(wanted), "{target:?}: {err}");
        }
        NotifyTarget::webhook("https://hooks.example.com/remuda")
            .and_email("ops@example.com")
            .validate()
            .expect("valid");
    }
}
