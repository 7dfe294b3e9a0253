//! `[notifications]` and `[notifications.smtp]`: how the worker's dispatcher signs and sends
//! completion notifications, and `notify = { … }` in a task's table: its kind's defaults.

use super::{expand_env, opt_duration};
use remuda::notify::{NotificationConfig, NotifyTarget, Outcome, Secret, SmtpConfig};
use serde::Deserialize;
use std::time::Duration;

/// `[notifications]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsSection {
    /// `"whsec_…"`, `"${REMUDA_WEBHOOK_SECRET}"`, or a list while rotating.
    pub secret: Option<OneOrMany>,
    /// Longest one attempt may take (default 15 s).
    #[serde(default, with = "opt_duration")]
    pub timeout: Option<Duration>,
    /// Attempts before a notification is dead (default 10).
    pub max_attempts: Option<u32>,
    /// Delays after each failed attempt; the last repeats (default 5s, 5m, 30m, 2h, 5h, 10h).
    pub retry_delays: Option<Vec<String>>,
    /// Whether webhooks may target private and loopback addresses (default false).
    pub allow_private_targets: Option<bool>,
    /// When set, the only hosts webhooks may target.
    pub allowed_hosts: Option<Vec<String>>,
    /// Notifications sent at once by this worker (default 64).
    pub concurrency: Option<usize>,
    /// Whether this worker delivers notifications at all (default true).
    pub enabled: Option<bool>,
    /// `[notifications.smtp]`.
    pub smtp: Option<SmtpSection>,
}

/// One value or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `[notifications.smtp]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpSection {
    /// The server.
    pub host: String,
    /// Its port (default by `tls`: 587, 465, 25).
    pub port: Option<u16>,
    /// `"starttls"` (default), `"tls"` or `"none"`.
    pub tls: Option<String>,
    /// The sender address.
    pub from: String,
    /// User name (else `REMUDA_SMTP_USERNAME` from the environment).
    pub username: Option<String>,
    /// Password (else `REMUDA_SMTP_PASSWORD`).
    pub password: Option<String>,
}

/// `notify = { webhook = "…", email = "…", on = ["failed"] }` in a task's table or a
/// workflow spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifySection {
    /// An http(s) URL.
    pub webhook: Option<String>,
    /// An email address.
    pub email: Option<String>,
    /// Outcomes: completed, failed, cancelled, expired, or final (the default).
    pub on: Option<Vec<String>>,
}

impl NotifySection {
    /// The target it describes, checked (`${VAR}` expands in the URL and the address).
    pub fn target(&self) -> Result<NotifyTarget, String> {
        let expand = |what: &str, v: &Option<String>| {
            v.as_deref()
                .map(|v| expand_env(v).map_err(|e| format!("notify {what}: {e}")))
                .transpose()
        };
        let on = match &self.on {
            None => Outcome::ALL.to_vec(),
            Some(list) => {
                Outcome::parse_list(&list.join(",")).map_err(|e| format!("notify on: {e}"))?
            }
        };
        let target = NotifyTarget {
            webhook: expand("webhook", &self.webhook)?,
            email: expand("email", &self.email)?,
            on,
        };
        target.validate().map_err(|e| format!("notify: {e}"))?;
        Ok(target)
    }
}

impl NotificationsSection {
    /// The dispatcher's settings, defaults for what the section leaves out; errors name the
    /// key.
    pub fn config(&self) -> Result<NotificationConfig, String> {
        let d = NotificationConfig::default();
        let secrets = match &self.secret {
            None => Vec::new(),
            Some(OneOrMany::One(s)) => vec![s.clone()],
            Some(OneOrMany::Many(list)) => list.clone(),
        };
        let secrets = secrets
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let text = expand_env(s).map_err(|e| format!("[notifications] secret: {e}"))?;
                text.parse::<Secret>().map_err(|e| {
                    let which = if secrets.len() > 1 {
                        format!(" {}", i + 1)
                    } else {
                        String::new()
                    };
                    format!("[notifications] secret{which}: {e}")
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let retry_delays = match &self.retry_delays {
            None => d.retry_delays.clone(),
            Some(list) => list
                .iter()
                .map(|t| {
                    remuda::duration::parse(t)
                        .map_err(|e| format!("[notifications] retry_delays: {e}"))
                })
                .collect::<Result<_, _>>()?,
        };
        let config = NotificationConfig {
            secrets,
            timeout: self.timeout.unwrap_or(d.timeout),
            max_attempts: self.max_attempts.unwrap_or(d.max_attempts),
            retry_delays,
            allow_private_targets: self
                .allow_private_targets
                .unwrap_or(d.allow_private_targets),
            allowed_hosts: self.allowed_hosts.clone().unwrap_or_default(),
            smtp: self.smtp.as_ref().map(SmtpSection::config).transpose()?,
            concurrency: self.concurrency.unwrap_or(d.concurrency),
            enabled: self.enabled.unwrap_or(d.enabled),
        };
        config
            .validate()
            .map_err(|e| format!("[notifications] {e}"))?;
        Ok(config)
    }
}

impl SmtpSection {
    fn config(&self) -> Result<SmtpConfig, String> {
        let expand = |what: &str, v: &str| {
            expand_env(v).map_err(|e| format!("[notifications.smtp] {what}: {e}"))
        };
        let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let username = match &self.username {
            Some(u) => Some(expand("username", u)?),
            None => from_env("REMUDA_SMTP_USERNAME"),
        };
        let password = match &self.password {
            Some(p) => Some(expand("password", p)?),
            None => from_env("REMUDA_SMTP_PASSWORD"),
        };
        let smtp = SmtpConfig {
            host: expand("host", &self.host)?,
            port: self.port,
            tls: self
                .tls
                .as_deref()
                .unwrap_or("starttls")
                .parse()
                .map_err(|e| format!("[notifications.smtp] {e}"))?,
            from: expand("from", &self.from)?,
            username,
            password,
        };
        smtp.validate()
            .map_err(|e| format!("[notifications.smtp] {e}"))?;
        Ok(smtp)
    }
}
