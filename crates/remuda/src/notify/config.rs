//! How a worker's dispatcher delivers: the signing secrets, the request timeout, the retry
//! schedule, which webhook targets it may reach, and the SMTP server for email.

use super::Secret;
use crate::{Error, Result};
use std::time::Duration;

/// The dispatcher's settings (`[notifications]` in the worker config). Every field has a
/// default; webhooks need a secret, email needs [`SmtpConfig`].
#[derive(Clone, Debug)]
pub struct NotificationConfig {
    /// Signing secrets, `whsec_` base64: each request carries one signature per secret
    /// (space-separated), so receivers keep verifying while a secret is rotated. A worker
    /// without one sends no webhooks (it leaves them to workers that have one).
    pub secrets: Vec<Secret>,
    /// Longest one attempt may take (default 15 s). A claim's lease is twice this: a row
    /// whose sender died is due again then.
    pub timeout: Duration,
    /// Attempts before a notification is `dead` (default 10).
    pub max_attempts: u32,
    /// The delay after the first, second, … failed attempt; the last repeats. Up to a quarter
    /// more is added at random (jitter). Default 5 s, 5 m, 30 m, 2 h, 5 h, 10 h.
    pub retry_delays: Vec<Duration>,
    /// Whether webhooks may target loopback, private, link-local and metadata addresses
    /// (default false: such a target is refused and its notification is `dead` at once).
    pub allow_private_targets: bool,
    /// When not empty, the only hosts webhooks may target.
    pub allowed_hosts: Vec<String>,
    /// The SMTP server for email notifications; a worker without one sends no email (it
    /// leaves them to workers that have one).
    pub smtp: Option<SmtpConfig>,
    /// Most notifications sent at once by one worker (default 64).
    pub concurrency: usize,
    /// Whether this worker delivers at all (default true).
    pub enabled: bool,
}

impl Default for NotificationConfig {
    fn default() -> Self {
        let m = |n: u64| Duration::from_secs(n * 60);
        NotificationConfig {
            secrets: Vec::new(),
            timeout: Duration::from_secs(15),
            max_attempts: 10,
            retry_delays: vec![Duration::from_secs(5), m(5), m(30), m(120), m(300), m(600)],
            allow_private_targets: false,
            allowed_hosts: Vec::new(),
            smtp: None,
            concurrency: 64,
            enabled: true,
        }
    }
}

impl NotificationConfig {
    /// Checks the settings, naming the one that is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(3600) {
            return Err(Error::InvalidInput(
                "notifications timeout must be more than 0 and at most 1h".into(),
            ));
        }
        if !(1..=1000).contains(&self.max_attempts) {
            return Err(Error::InvalidInput(format!(
                "notifications max_attempts is {}: it must be between 1 and 1000",
                self.max_attempts
            )));
        }
        if self.retry_delays.is_empty() {
            return Err(Error::InvalidInput(
                "notifications retry_delays is empty: give at least one delay, such as [\"5s\", \"5m\"]".into(),
            ));
        }
        if self.retry_delays.iter().any(|d| *d > crate::duration::MAX) {
            return Err(Error::InvalidInput(
                "notifications retry_delays must be at most 100 years each".into(),
            ));
        }
        if !(1..=10_000).contains(&self.concurrency) {
            return Err(Error::InvalidInput(format!(
                "notifications concurrency is {}: it must be between 1 and 10000",
                self.concurrency
            )));
        }
        if let Some(host) = self.allowed_hosts.iter().find(|h| h.trim().is_empty()) {
            return Err(Error::InvalidInput(format!(
                "notifications allowed_hosts holds an empty host {host:?}"
            )));
        }
        if let Some(smtp) = &self.smtp {
            smtp.validate()?;
        }
        Ok(())
    }

    /// The delay before attempt `attempts + 1`, after `attempts` failed ones, with jitter.
    pub(crate) fn delay_after(&self, attempts: u32) -> Duration {
        let index = usize::try_from(attempts.saturating_sub(1)).unwrap_or(usize::MAX);
        let base = self
            .retry_delays
            .get(index)
            .or(self.retry_delays.last())
            .copied()
            .unwrap_or(Duration::from_secs(5));
        base.mul_f64(1.0 + fastrand::f64() / 4.0)
    }

    /// How long a claim holds a row: twice the timeout, at least a second.
    pub(crate) fn lease(&self) -> Duration {
        (self.timeout * 2).max(Duration::from_secs(1))
    }
}

/// How email leaves: an SMTP server. Shown by `Debug` without its password.
#[derive(Clone)]
pub struct SmtpConfig {
    /// Host name or address.
    pub host: String,
    /// Port (default 587 with STARTTLS, 465 with TLS, 25 without).
    pub port: Option<u16>,
    /// Transport security.
    pub tls: SmtpTls,
    /// The sender address.
    pub from: String,
    /// User name, if the server wants one.
    pub username: Option<String>,
    /// Password, with `username`.
    pub password: Option<String>,
}

impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("from", &self.from)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .finish()
    }
}

/// Transport security to the SMTP server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain SMTP, upgraded with STARTTLS (required).
    #[default]
    Starttls,
    /// TLS from the first byte (SMTPS).
    Tls,
    /// No encryption (a local relay or a test sink).
    None,
}

impl std::str::FromStr for SmtpTls {
    type Err = Error;

    fn from_str(text: &str) -> Result<SmtpTls> {
        match text {
            "starttls" => Ok(SmtpTls::Starttls),
            "tls" => Ok(SmtpTls::Tls),
            "none" => Ok(SmtpTls::None),
            other => Err(Error::InvalidInput(format!(
                "smtp tls is {other:?}: expected \"starttls\", \"tls\" or \"none\""
            ))),
        }
    }
}

impl SmtpConfig {
    /// Checks the host, the sender address and the credentials.
    pub fn validate(&self) -> Result<()> {
        if self.host.trim().is_empty() {
            return Err(Error::InvalidInput(
                "notifications.smtp host is empty".into(),
            ));
        }
        super::check_email(&self.from)
            .map_err(|e| Error::InvalidInput(format!("notifications.smtp from: {e}")))?;
        if self.password.is_some() && self.username.is_none() {
            return Err(Error::InvalidInput(
                "notifications.smtp has a password but no username".into(),
            ));
        }
        Ok(())
    }

    /// The port, or the usual one for the transport security.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.tls {
            SmtpTls::Starttls => 587,
            SmtpTls::Tls => 465,
            SmtpTls::None => 25,
        })
    }
}
