//! The claim statements of a worker: the plain claim (`claim.sql`), the claim under a queue's
//! limits (`claim_lock.sql` + `claim_capped.sql` for caps and a queue-wide rate, or
//! `claim_limited.sql` for keys and rates per kind or key), and the release of jobs claimed by
//! a statement whose answer was lost (`release_orphans.sql`). The producer decides when.

use super::executor::Claimed;
use super::Shared;
use crate::runtime::lock;
use crate::{sql, Result};
use std::sync::Arc;

/// After a failed claim: releases the jobs the database says this worker runs but that it
/// does not know of. Every outcome queued before is written first, so a job missing from
/// `running` is either finished or an orphan (`release_orphans.sql`). Returns how many.
pub(crate) async fn release_orphans(shared: &Shared) -> Result<i64> {
    let known: Vec<i64> = lock(&shared.running).keys().copied().collect();
    let (done, written) = tokio::sync::oneshot::channel();
    if shared
        .completer
        .send(super::completer::Outcome::Flush(done))
        .await
        .is_err()
        || written.await.is_err()
    {
        return Err(crate::Error::WorkerFailed(
            "the completer stopped before the orphan check".into(),
        ));
    }
    let conn = shared.db.conn().await?;
    let row = conn
        .query_one(sql::RELEASE_ORPHANS, &[&&*shared.worker_id, &known])
        .await?;
    Ok(row.try_get("released")?)
}

/// A claim under the queue's limits (`claim_lock.sql` then, in one transaction under the
/// claims' planner settings,
/// `claim_capped.sql`, or `claim_limited.sql` when `keyed`: the queue has a key limit or a
/// rate per kind or key; `keyed` gives the cursor and whether to look for jobs without a key
/// through the whole queue, see `claim_limited.sql`). Returns the jobs and the concurrency key served last in turn (the
/// cursor from which keys take turns next time).
pub(crate) async fn claim_limited(
    shared: &Shared,
    queue: &str,
    kinds: &[String],
    defaults: &[i32],
    limit: i64,
    keyed: Option<(&str, bool)>,
) -> Result<(Vec<Claimed>, Option<String>)> {
    let mut conn = shared.db.conn().await?;
    let id: &str = &shared.worker_id;
    let params = common(shared, &id, &queue, &kinds, &defaults, &limit);
    let (text, tag) = match &keyed {
        // a deep claim tags first the jobs waiting without a fair-share tag (a no-op unless
        // the queue has fair share), so that its walk finds them
        Some((_, deep)) => (sql::CLAIM_LIMITED, *deep),
        None => (sql::CLAIM_CAPPED, false),
    };
    let keyed_params: Vec<Param> = match &keyed {
        Some((cursor, deep)) => [&params[..], &[cursor, deep]].concat(),
        None => params.to_vec(),
    };
    let rows = if conn.pooled() {
        limited_by_steps(&mut conn, queue, tag, text, &keyed_params).await?
    } else {
        limited_in_one_trip(&conn, queue, tag, text, &keyed_params).await?
    };
    // the cursor moves to the key served last in turn (turns count from the old cursor)
    let mut last: Option<(i64, String)> = None;
    let mut jobs = Vec::with_capacity(rows.len());
    let queue: Arc<str> = queue.into();
    for row in &rows {
        let turn: i64 = row.try_get("turn")?;
        if let Some(key) = row.try_get::<_, Option<String>>("concurrency_key")? {
            if turn > 0 && last.as_ref().is_none_or(|(t, _)| *t < turn) {
                last = Some((turn, key));
            }
        }
        jobs.push(claimed(row, &queue)?);
    }
    Ok((jobs, last.map(|(_, key)| key)))
}

type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// A limited claim's statements in one transaction, sent together (one round trip, where one
/// each cost a claim four, and a capped queue claims after every completion that frees room):
/// BEGIN with the claims' planner settings, the queue's lock (`claim_lock.sql`), the tagging
/// of a deep fair claim (`fair_tag_queue.sql`), the claim `text`, COMMIT. The server runs
/// them in turn, so the claim's snapshot is still taken after the lock is held. Every
/// statement is prepared first: each is sent when first polled, in this order (`biased`), so
/// COMMIT never goes before the claim.
async fn limited_in_one_trip(
    conn: &crate::db::Conn,
    queue: &str,
    tag: bool,
    text: &str,
    params: &[Param<'_>],
) -> Result<Vec<tokio_postgres::Row>> {
    let client: &deadpool_postgres::Object = conn;
    let lock = client.prepare_cached(sql::CLAIM_LOCK).await?;
    let tagging = match tag {
        true => Some(client.prepare_cached(sql::FAIR_TAG_QUEUE).await?),
        false => None,
    };
    let claim = client.prepare_cached(text).await?;
    let begin = format!("BEGIN; {}", sql::CLAIM_PLAN);
    let queue: [Param; 1] = [&queue];
    let (begun, locked, tagged, rows, committed) = tokio::join!(
        biased;
        client.batch_execute(&begin),
        client.query(&lock, &queue),
        async {
            match &tagging {
                Some(tagging) => client.execute(tagging, &queue).await.map(|_| ()),
                None => Ok(()),
            }
        },
        client.query(&claim, params),
        client.batch_execute("COMMIT")
    );
    begun?;
    locked?;
    tagged?;
    let rows = rows?;
    committed?;
    Ok(rows)
}

/// [`limited_in_one_trip`] behind a transaction-mode pooler, where statements go unnamed:
/// one round trip each, in a transaction with remuda's settings (see `Conn::transaction`).
async fn limited_by_steps(
    conn: &mut crate::db::Conn,
    queue: &str,
    tag: bool,
    text: &str,
    params: &[Param<'_>],
) -> Result<Vec<tokio_postgres::Row>> {
    let tx = conn.transaction().await?;
    // the claims' planner settings for the transaction, pipelined with the lock
    let lock_params: [Param; 1] = [&queue];
    let (planned, locked) = tokio::join!(
        tx.batch_execute(sql::CLAIM_PLAN),
        tx.query(sql::CLAIM_LOCK, &lock_params)
    );
    planned?;
    locked?;
    if tag {
        tx.execute(sql::FAIR_TAG_QUEUE, &lock_params).await?;
    }
    let rows = tx.query(text, params).await?;
    tx.commit().await?;
    Ok(rows)
}

/// The parameters both claims start with ($1 … $7): queue, kinds, their default attempts,
/// how many, and the worker's id, name and capabilities.
fn common<'a>(
    shared: &'a Shared,
    worker_id: &'a &str,
    queue: &'a &str,
    kinds: &'a &[String],
    defaults: &'a &[i32],
    limit: &'a i64,
) -> [Param<'a>; 7] {
    [
        queue,
        kinds,
        defaults,
        limit,
        worker_id,
        &shared.name,
        &shared.config.capabilities,
    ]
}

/// The columns every claim returns first, in this order (`claimed` reads them by position: by
/// name, each column was a search of the row's columns, 14 a job).
#[cfg(test)]
pub(crate) const CLAIMED_COLUMNS: [&str; 14] = [
    "id",
    "tid",
    "kind",
    "attempt",
    "max_attempts",
    "timeout_ms",
    "args",
    "started_at",
    "flags",
    "workflow",
    "run_at",
    "traceparent",
    "tracestate",
    "group_key",
];

fn claimed(row: &tokio_postgres::Row, queue: &Arc<str>) -> Result<Claimed> {
    let traceparent: Option<String> = row.try_get(11)?;
    Ok(Claimed {
        id: row.try_get(0)?,
        tid: row.try_get(1)?,
        kind: row.try_get(2)?,
        queue: queue.clone(),
        attempt: row.try_get(3)?,
        max_attempts: row.try_get::<_, Option<i32>>(4)?.unwrap_or(1),
        timeout_ms: row.try_get(5)?,
        args: row.try_get(6)?,
        started_at: row.try_get(7)?,
        flags: row.try_get(8)?,
        workflow: row.try_get(9)?,
        run_at: row.try_get(10)?,
        trace: match traceparent {
            Some(traceparent) => Some(crate::TraceContext {
                traceparent,
                tracestate: row.try_get(12)?,
            }),
            None => None,
        },
        group: row.try_get(13)?,
    })
}

/// The plain claim (`claim.sql`): the queue's waiting jobs in order, or `by_kind`, each of
/// `kinds`' in that order (see [`walk_by_kind`]).
pub(crate) async fn claim(
    shared: &Shared,
    queue: &str,
    kinds: &[String],
    defaults: &[i32],
    limit: i64,
    by_kind: bool,
) -> Result<Vec<Claimed>> {
    let conn = shared.db.conn().await?;
    let id: &str = &shared.worker_id;
    let params = common(shared, &id, &queue, &kinds, &defaults, &limit);
    let rows = conn
        .query_pinned(sql::CLAIM_PINNED, &[&params[..], &[&by_kind]].concat())
        .await?;
    let queue: Arc<str> = queue.into();
    rows.iter().map(|row| claimed(row, &queue)).collect()
}

/// Whether a plain claim of `limit` jobs from `queue` should walk each of `kinds` on its own
/// (`claim_head.sql`): when fewer of the first `limit` jobs waiting than one in `kinds + 1`
/// are of them, the walk in the queue's order reads more rows than the walks by kind, which
/// read at most `limit` rows each and the `limit` they keep once more. A queue with fewer
/// than `limit` jobs waiting is walked in order: that walk reads them all at most.
pub(crate) async fn walk_by_kind(
    shared: &Shared,
    queue: &str,
    kinds: &[String],
    limit: i64,
) -> Result<bool> {
    let conn = shared.db.conn().await?;
    let rows = conn
        .query_pinned(sql::CLAIM_HEAD_PINNED, &[&queue, &kinds, &limit])
        .await?;
    let Some(row) = rows.first() else {
        return Ok(false);
    };
    let ours: i64 = row.try_get("ours")?;
    let looked: i64 = row.try_get("looked")?;
    Ok(by_kind_pays(ours, looked, limit, kinds.len()))
}

/// See [`walk_by_kind`]: `ours` of the `looked` first waiting jobs are of the worker's
/// `kinds` kinds, and a claim takes `limit`.
fn by_kind_pays(ours: i64, looked: i64, limit: i64, kinds: usize) -> bool {
    let walks = i64::try_from(kinds).unwrap_or(i64::MAX).saturating_add(1);
    looked >= limit && ours.saturating_mul(walks) < looked
}

#[cfg(test)]
mod tests {
    use super::{by_kind_pays, CLAIMED_COLUMNS};
    use crate::sql;
    use crate::testing::TestDatabase;

    /// The walk by kind is taken only where the head of the queue is mostly of other kinds,
    /// by more the more kinds the worker runs, and never on a queue shorter than a claim.
    #[test]
    fn the_walk_by_kind_is_taken_only_behind_a_head_of_other_kinds() {
        assert!(by_kind_pays(0, 2000, 2000, 1));
        assert!(by_kind_pays(999, 2000, 2000, 1));
        assert!(!by_kind_pays(1000, 2000, 2000, 1));
        assert!(!by_kind_pays(2000, 2000, 2000, 1));
        assert!(by_kind_pays(0, 2000, 2000, 20));
        assert!(!by_kind_pays(100, 2000, 2000, 20));
        assert!(!by_kind_pays(0, 1999, 2000, 1));
        assert!(!by_kind_pays(0, 0, 2000, 1));
    }

    /// Every claim returns the columns `claimed` reads by position, first and in its order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_claim_returns_the_claimed_columns_first_in_order() {
        let test = TestDatabase::new().await.expect("test database");
        let db = test.database().expect("pool");
        let conn = db.conn().await.expect("conn");
        for (name, text) in [
            ("claim", sql::CLAIM),
            ("claim_capped", sql::CLAIM_CAPPED),
            ("claim_limited", sql::CLAIM_LIMITED),
        ] {
            let statement = conn.prepare(text).await.expect("prepare");
            let names: Vec<&str> = statement.columns().iter().map(|c| c.name()).collect();
            assert_eq!(
                &names[..CLAIMED_COLUMNS.len()],
                &CLAIMED_COLUMNS[..],
                "{name}"
            );
        }
    }
}
