//! Actions on many jobs: delete one, and retry, cancel or delete every job matching a filter
//! (the dashboard's bulk actions, `remuda jobs delete`, `remuda retry --state`). A bulk action
//! walks the filter's pages (see `list.rs`) and acts on each page's jobs in one statement, so
//! it reads the jobs in their index like a listing does and never holds more than a page's
//! rows locked; jobs another transaction holds at that moment are passed over.

use super::{Client, JobFilter};
use crate::job::JobState;
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};

/// Jobs acted on per statement.
const BATCH: i64 = 500;

/// What a bulk action does to each job matching its filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkAction {
    /// Run again (failed, cancelled and expired jobs; see [`Client::retry`]).
    Retry,
    /// Cancel (jobs not finished; see [`Client::cancel`]).
    Cancel,
    /// Delete (jobs not running; see [`Client::delete`]).
    Delete,
}

impl BulkAction {
    /// The verb, as the API and the audit log name it.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Retry => "retry",
            BulkAction::Cancel => "cancel",
            BulkAction::Delete => "delete",
        }
    }
}

/// What a bulk action did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkOutcome {
    /// Jobs that matched the filter.
    pub matched: u64,
    /// Jobs the action changed (with `dry_run`, none); the others were in a state it does
    /// not apply to, belong to a workflow run (see `in_workflows`), hold a unique key another
    /// job took, or were held by another transaction.
    pub changed: u64,
    /// Matching jobs passed over because they belong to a workflow run: a run's jobs are
    /// retried, cancelled and deleted with their run (`remuda workflow retry|cancel`,
    /// retention of the run).
    pub in_workflows: u64,
}

impl Client {
    /// Deletes a job that is not running (cancel a running one first). A workflow node's job
    /// is kept while its run exists. Returns the state it had.
    pub async fn delete(&self, id: i64) -> Result<JobState> {
        let job = self.job(id).await?.ok_or(Error::NotFound(id))?;
        if job.state == JobState::Running {
            return Err(Error::WrongState {
                id,
                state: job.state.as_str().into(),
                action: "delete (cancel it first)",
            });
        }
        if self.delete_ids(&[id]).await? == 1 {
            return Ok(job.state);
        }
        match self.job(id).await? {
            None => Ok(job.state),
            Some(now) if now.state == JobState::Running => Err(Error::WrongState {
                id,
                state: now.state.as_str().into(),
                action: "delete (cancel it first)",
            }),
            Some(_) => Err(Error::InvalidInput(format!(
                "job {id} belongs to a workflow run, or another transaction holds it: a node's job is deleted with its run"
            ))),
        }
    }

    /// Applies `action` to every job matching `filter` (its `limit` and `after` are ignored;
    /// `finished_before` keeps only jobs that finished, or were enqueued when not finished,
    /// before that moment). With `dry_run`, only counts the jobs that match.
    pub async fn act_on_matching(
        &self,
        filter: &JobFilter,
        action: BulkAction,
        finished_before: Option<DateTime<Utc>>,
        dry_run: bool,
    ) -> Result<BulkOutcome> {
        let mut filter = JobFilter {
            limit: Some(BATCH),
            after: None,
            ..filter.clone()
        };
        let mut outcome = BulkOutcome::default();
        // every state at once: by id, so that a job is met once whatever state it is given
        let by_id = filter.state.is_none() && filter.workflow.is_none();
        let mut below: Option<i64> = None;
        loop {
            let (jobs, more) = if by_id {
                let jobs = self.id_page(&filter, below).await?;
                below = jobs.last().map(|job| job.id);
                let more = jobs.len() as i64 == BATCH;
                (jobs, more)
            } else {
                let page = self.job_page(&filter).await?;
                filter.after = page.next;
                let more = filter.after.is_some();
                (page.jobs, more)
            };
            let matching = jobs.iter().filter(|job| {
                finished_before
                    .is_none_or(|before| job.finished_at.unwrap_or(job.created_at) < before)
            });
            let (in_runs, ids): (Vec<_>, Vec<_>) =
                matching.partition(|job| job.workflow_id.is_some());
            let ids: Vec<i64> = ids.iter().map(|job| job.id).collect();
            outcome.matched += (ids.len() + in_runs.len()) as u64;
            outcome.in_workflows += in_runs.len() as u64;
            if !dry_run && !ids.is_empty() {
                outcome.changed += self.act(action, &ids).await?;
            }
            if !more {
                return Ok(outcome);
            }
        }
    }

    /// A page of the jobs of every state matching `filter`, highest id first, below `below`.
    async fn id_page(&self, filter: &JobFilter, below: Option<i64>) -> Result<Vec<crate::Job>> {
        let conn = self.database().conn().await?;
        let (q, kind, worker, args) = (&filter.queue, &filter.kind, &filter.worker, &filter.args);
        let rows = conn
            .query(sql::JOB_PAGE_IDS, &[&below, q, kind, worker, args, &BATCH])
            .await?;
        rows.iter().map(crate::Job::from_row).collect()
    }

    /// Applies `action` to the jobs `ids` in one statement; returns how many it changed.
    async fn act(&self, action: BulkAction, ids: &[i64]) -> Result<u64> {
        let (statement, column) = match action {
            BulkAction::Retry => (sql::JOB_RETRY_MANY, "retried"),
            BulkAction::Cancel => (sql::JOB_CANCEL_MANY, "cancelled"),
            BulkAction::Delete => return self.delete_ids(ids).await,
        };
        let conn = self.database().conn().await?;
        let row = conn.query_one(statement, &[&ids]).await?;
        let n: i64 = row.try_get(column)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn delete_ids(&self, ids: &[i64]) -> Result<u64> {
        let conn = self.database().conn().await?;
        let row = conn.query_one(sql::JOB_DELETE, &[&ids]).await?;
        let deleted: Vec<i64> = row.try_get("deleted")?;
        Ok(deleted.len() as u64)
    }
}
