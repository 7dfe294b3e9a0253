//! The outbox as operators and the dispatcher see it: listing, reviving a dead
//! notification, a worker's kind defaults, and the dispatcher's claim and marks.

use super::NotifyTarget;
use crate::db::Database;
use crate::{sql, Client, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Where a notification is in its life: `pending` (due, backing off, or being sent),
/// `sent` (a receiver took it), `dead` (out of attempts, or refused for good: see
/// [`Notification::last_error`]; [`Client::retry_notification`] makes it due again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NotificationState {
    /// Not delivered yet.
    Pending,
    /// Delivered.
    Sent,
    /// Given up.
    Dead,
}

impl NotificationState {
    /// The lowercase name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationState::Pending => "pending",
            NotificationState::Sent => "sent",
            NotificationState::Dead => "dead",
        }
    }
}

impl fmt::Display for NotificationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NotificationState {
    type Err = Error;

    fn from_str(text: &str) -> Result<NotificationState> {
        match text {
            "pending" => Ok(NotificationState::Pending),
            "sent" => Ok(NotificationState::Sent),
            "dead" => Ok(NotificationState::Dead),
            other => Err(Error::InvalidInput(format!(
                "unknown notification state {other:?}: expected pending, sent or dead"
            ))),
        }
    }
}

/// How a notification travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// A signed HTTP `POST`.
    Webhook,
    /// An email over SMTP.
    Email,
}

impl Channel {
    /// The lowercase name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Webhook => "webhook",
            Channel::Email => "email",
        }
    }
}

impl FromStr for Channel {
    type Err = Error;

    fn from_str(text: &str) -> Result<Channel> {
        match text {
            "webhook" => Ok(Channel::Webhook),
            "email" => Ok(Channel::Email),
            other => Err(Error::InvalidInput(format!(
                "unknown notification channel {other:?}"
            ))),
        }
    }
}

/// One row of the outbox.
#[derive(Clone, Debug, Serialize)]
pub struct Notification {
    /// Its id; receivers see `webhook-id: msg_<id>`, the same on every attempt.
    pub id: i64,
    /// The job it announces, if a job's.
    pub job_id: Option<i64>,
    /// The workflow run of the job, or the run it announces.
    pub workflow_id: Option<i64>,
    /// Webhook or email.
    pub channel: Channel,
    /// The URL or address.
    pub target: String,
    /// `job.completed`, `job.failed`, `workflow.completed`, …
    pub event: String,
    /// Where it is.
    pub state: NotificationState,
    /// Attempts started.
    pub attempts: i32,
    /// When a pending one is due (after a failure, or when a running attempt's lease ends).
    pub next_attempt_at: DateTime<Utc>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When the final state it announces was written.
    pub created_at: DateTime<Utc>,
    /// When it was delivered.
    pub sent_at: Option<DateTime<Utc>>,
}

/// Which notifications [`Client::notifications`] lists.
#[derive(Clone, Debug, Default)]
pub struct NotificationFilter {
    /// Only in this state.
    pub state: Option<NotificationState>,
    /// Only of this job.
    pub job_id: Option<i64>,
    /// Only of this workflow run (the run's own and its jobs').
    pub workflow_id: Option<i64>,
    /// At most this many (default 100).
    pub limit: Option<i64>,
}

impl Client {
    /// Notifications, newest first.
    pub async fn notifications(&self, filter: &NotificationFilter) -> Result<Vec<Notification>> {
        let conn = self.database().conn().await?;
        let state = filter.state.map(NotificationState::as_str);
        let limit = filter.limit.unwrap_or(100);
        let rows = conn
            .query(
                sql::NOTIFICATION_LIST,
                &[&state, &filter.job_id, &limit, &filter.workflow_id],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Notification {
                    id: r.try_get("id")?,
                    job_id: r.try_get("job_id")?,
                    workflow_id: r.try_get("workflow_id")?,
                    channel: r.try_get::<_, String>("channel")?.parse()?,
                    target: r.try_get("target")?,
                    event: r.try_get("event")?,
                    state: r.try_get::<_, String>("state")?.parse()?,
                    attempts: r.try_get("attempts")?,
                    next_attempt_at: r.try_get("next_attempt_at")?,
                    last_error: r.try_get("last_error")?,
                    created_at: r.try_get("created_at")?,
                    sent_at: r.try_get("sent_at")?,
                })
            })
            .collect()
    }

    /// Makes a `dead` notification due now, with its attempts anew.
    pub async fn retry_notification(&self, id: i64) -> Result<()> {
        let conn = self.database().conn().await?;
        let row = conn.query_one(sql::NOTIFICATION_RETRY, &[&id]).await?;
        if row.try_get("revived")? {
            return Ok(());
        }
        match row.try_get::<_, Option<String>>("state")? {
            None => Err(Error::NotificationNotFound(id)),
            Some(state) => Err(Error::NotificationWrongState { id, state }),
        }
    }

    /// Sets the notification defaults of task kinds: each of `kinds` notifies its target,
    /// or, with `None`, loses the defaults it had. Workers do this when they start, from
    /// their tasks' [`TaskOptions::notify`](crate::TaskOptions::notify).
    pub async fn set_notification_defaults(
        &self,
        kinds: &[(String, Option<NotifyTarget>)],
    ) -> Result<()> {
        for (kind, target) in kinds {
            if let Some(target) = target {
                target
                    .validate()
                    .map_err(|e| Error::InvalidInput(format!("task {kind}: notify: {e}")))?;
            }
        }
        set_defaults(self.database(), kinds).await
    }
}

pub(crate) async fn set_defaults(
    db: &Database,
    kinds: &[(String, Option<NotifyTarget>)],
) -> Result<()> {
    let all: Vec<&str> = kinds.iter().map(|(k, _)| k.as_str()).collect();
    let (with, targets): (Vec<&str>, Vec<serde_json::Value>) = kinds
        .iter()
        .filter_map(|(k, t)| t.as_ref().map(|t| (k.as_str(), t.stored())))
        .unzip();
    let conn = db.conn().await?;
    conn.execute(sql::NOTIFICATION_DEFAULTS_SET, &[&all, &with, &targets])
        .await?;
    Ok(())
}

/// A claimed notification, ready to send.
pub(crate) struct Claimed {
    pub id: i64,
    pub channel: String,
    pub target: String,
    pub body: String,
    pub attempts: i32,
}

/// What a claim asks for.
pub(crate) struct Claim<'a> {
    pub limit: i32,
    pub lease_ms: i64,
    pub dispatcher: &'a str,
    pub max_attempts: i32,
    pub channels: &'a [&'a str],
}

/// Claims up to `limit` due notifications of `channels` for `dispatcher` with a lease.
pub(crate) async fn claim(db: &Database, c: &Claim<'_>) -> Result<Vec<Claimed>> {
    let conn = db.conn().await?;
    let rows = conn
        .query_pinned(
            sql::NOTIFICATION_CLAIM_PINNED,
            &[
                &c.limit,
                &c.lease_ms,
                &c.dispatcher,
                &c.max_attempts,
                &c.channels,
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Claimed {
                id: r.try_get("id")?,
                channel: r.try_get("channel")?,
                target: r.try_get("target")?,
                body: r.try_get("body")?,
                attempts: r.try_get("attempts")?,
            })
        })
        .collect()
}

/// A failed attempt to record.
pub(crate) struct Failure {
    pub id: i64,
    pub attempts: i32,
    pub dead: bool,
    pub delay_ms: i64,
    pub error: String,
}

/// Marks delivered notifications sent; returns their delivery latencies in milliseconds.
pub(crate) async fn mark_sent(db: &Database, ids: &[i64]) -> Result<Vec<f64>> {
    let conn = db.conn().await?;
    let rows = conn
        .query_pinned(sql::NOTIFICATION_SENT_PINNED, &[&ids])
        .await?;
    rows.iter().map(|r| Ok(r.try_get("latency_ms")?)).collect()
}

/// Records failed attempts.
pub(crate) async fn mark_failed(db: &Database, failures: &[Failure]) -> Result<()> {
    let ids: Vec<i64> = failures.iter().map(|f| f.id).collect();
    let attempts: Vec<i32> = failures.iter().map(|f| f.attempts).collect();
    let dead: Vec<bool> = failures.iter().map(|f| f.dead).collect();
    let delays: Vec<i64> = failures.iter().map(|f| f.delay_ms).collect();
    let errors: Vec<&str> = failures.iter().map(|f| f.error.as_str()).collect();
    let conn = db.conn().await?;
    conn.execute(
        sql::NOTIFICATION_FAILED,
        &[&ids, &attempts, &dead, &delays, &errors],
    )
    .await?;
    Ok(())
}

/// Milliseconds until the next pending notification is due; `None` when there is none.
pub(crate) async fn next_due(db: &Database) -> Result<Option<i64>> {
    let conn = db.conn().await?;
    Ok(conn
        .query_one(sql::NOTIFICATION_NEXT_DUE, &[])
        .await?
        .try_get("wait_ms")?)
}
