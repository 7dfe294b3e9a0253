//! The audit log: every change made through the dashboard or the API, who made it (the
//! token's name), how (API or page), what, to what, and how it ended — kept in
//! `remuda.audit` and shown on the Audit page and at `GET /api/v1/audit`.

use crate::auth::Principal;
use chrono::{DateTime, Utc};
use remuda::Client;
use serde::Serialize;
use serde_json::Value;

const INSERT: &str = include_str!("sql/audit_insert.sql");
const LIST: &str = include_str!("sql/audit_list.sql");

/// One recorded change.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditEntry {
    /// Increasing in the order changes were recorded.
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// The name of the token used.
    pub actor: String,
    /// `api` or `page`.
    pub via: String,
    /// What was asked (`job.retry`, `queue.pause`, …).
    pub action: String,
    /// What it was asked of (`job 12`, `queue mail`, `jobs matching {…}`).
    pub target: String,
    /// The request's details and its outcome (`ok`, or the error's `error` code).
    pub detail: Value,
}

/// Records a change. A failure to record is logged, not answered: the change itself is done.
pub async fn record(client: &Client, who: &Principal, action: &str, target: &str, detail: Value) {
    let written = async {
        let conn = client.database().conn().await?;
        conn.execute(
            INSERT,
            &[&who.actor, &who.via.as_str(), &action, &target, &detail],
        )
        .await?;
        Ok::<_, remuda::Error>(())
    };
    if let Err(e) = written.await {
        tracing::warn!(
            "remuda dashboard: cannot record {action} of {target} by {} in the audit log: {}",
            who.actor,
            remuda::error_chain(&e)
        );
    }
}

/// The newest `limit` entries below id `before` (all when `None`).
pub async fn list(
    client: &Client,
    before: Option<i64>,
    limit: i64,
) -> remuda::Result<Vec<AuditEntry>> {
    let conn = client.database().conn().await?;
    conn.query(LIST, &[&before, &limit])
        .await?
        .iter()
        .map(|row| {
            Ok(AuditEntry {
                id: row.try_get("id")?,
                at: row.try_get("at")?,
                actor: row.try_get("actor")?,
                via: row.try_get("via")?,
                action: row.try_get("action")?,
                target: row.try_get("target")?,
                detail: row.try_get("detail")?,
            })
        })
        .collect()
}
