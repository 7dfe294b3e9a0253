//! Pages of jobs for the CLI, the dashboard and the API: each state is read in its own index,
//! in the order that suits it, and a page continues after an opaque cursor (keyset
//! pagination), so a page costs the same on the first and the thousandth page and with a
//! million finished jobs in the table.
//!
//! | filter          | order                              | index              |
//! |-----------------|------------------------------------|--------------------|
//! | a final state   | latest finished first              | jobs_finished_idx  |
//! | `available`     | the order they run in              | jobs_available_idx |
//! | `scheduled`     | soonest first                      | jobs_scheduled_idx |
//! | `running`       | newest first                       | workers.running_ids|
//! | no state        | latest first by [`listed_at`]           | each state's own   |
//! | a workflow run  | latest first by [`listed_at`]           | jobs_workflow_idx  |
//!
//! Job ids are handed out in blocks per session, so id order is not time order: the lists
//! of every state order by the time that fits each job's state ([`listed_at`]).

use super::{Client, JobFilter};
use crate::job::{Job, JobState};
use crate::{sql, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tokio_postgres::types::ToSql;

/// Default number of jobs in a page.
pub const DEFAULT_PAGE: i64 = 100;
/// Most jobs in a page.
pub const MAX_PAGE: i64 = 1000;

/// One page of [`Client::job_page`]: the jobs, and the cursor of the next page when this one
/// was full (pass it as [`JobFilter::after`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobPage {
    /// The jobs, in the order of the filter's state (see the module's table).
    pub jobs: Vec<Job>,
    /// Where the next page starts; `None` when this page is the last.
    pub next: Option<String>,
}

/// The time that fits a job's state, by which the lists of every state order it: when it
/// finished, when it started running, else when it is (or was) due to run.
pub fn listed_at(job: &Job) -> DateTime<Utc> {
    match job.state {
        s if s.is_final() => job.finished_at.unwrap_or(job.created_at),
        JobState::Running => job.started_at.unwrap_or(job.run_at),
        _ => job.run_at,
    }
}

/// Whether `job` is held by its paused workflow run: it then waits, due at no time
/// (`run_at` 9999-12-31), until the run is resumed.
pub fn is_held(job: &Job) -> bool {
    use chrono::Datelike;
    job.workflow_id.is_some() && job.run_at.year() >= 9999
}

/// The cursor that continues a list filtered by `filter` after `job` (a page of it, passed
/// as [`JobFilter::after`], starts with the job listed next).
pub fn cursor_after(filter: &JobFilter, job: &Job) -> String {
    Cursor::after(filter, job).to_text()
}

/// Where a page starts: the sort key of the last job of the previous page.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cursor {
    Finished(DateTime<Utc>, i64),
    Available(i32, DateTime<Utc>, i64),
    Scheduled(DateTime<Utc>, i64),
    Id(i64),
    /// A list of every state (or of a run): [`listed_at`], then id.
    Recent(DateTime<Utc>, i64),
}

impl Cursor {
    /// The cursor after `job` in a list filtered by `filter`.
    fn after(filter: &JobFilter, job: &Job) -> Cursor {
        if filter.workflow.is_some() {
            return Cursor::Recent(listed_at(job), job.id);
        }
        match filter.state {
            Some(JobState::Available) => Cursor::Available(job.priority, job.run_at, job.id),
            Some(JobState::Scheduled) => Cursor::Scheduled(job.run_at, job.id),
            Some(s) if s.is_final() => {
                Cursor::Finished(job.finished_at.unwrap_or(job.created_at), job.id)
            }
            Some(_) => Cursor::Id(job.id),
            None => Cursor::Recent(listed_at(job), job.id),
        }
    }

    fn to_text(self) -> String {
        let micros = |t: DateTime<Utc>| t.timestamp_micros();
        match self {
            Cursor::Finished(at, id) => format!("f.{}.{id}", micros(at)),
            Cursor::Available(priority, at, id) => format!("a.{priority}.{}.{id}", micros(at)),
            Cursor::Scheduled(at, id) => format!("s.{}.{id}", micros(at)),
            Cursor::Id(id) => format!("i.{id}"),
            Cursor::Recent(at, id) => format!("t.{}.{id}", micros(at)),
        }
    }

    /// Reads a cursor made by a list with the same state (and run) filter.
    fn parse(text: &str, filter: &JobFilter) -> Result<Cursor> {
        let bad = |why: &str| {
            Error::InvalidInput(format!(
                "the page cursor {text:?} {why}: pass the `next` value of the previous page, with the same state filter"
            ))
        };
        let parts: Vec<&str> = text.split('.').collect();
        let int = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| bad("is not one this list made"))
        };
        let time = |s: &str| {
            DateTime::from_timestamp_micros(int(s)?).ok_or_else(|| bad("holds a time out of range"))
        };
        let cursor = match parts.as_slice() {
            ["f", at, id] => Cursor::Finished(time(at)?, int(id)?),
            ["a", priority, at, id] => Cursor::Available(
                i32::try_from(int(priority)?).map_err(|_| bad("holds a priority out of range"))?,
                time(at)?,
                int(id)?,
            ),
            ["s", at, id] => Cursor::Scheduled(time(at)?, int(id)?),
            ["i", id] => Cursor::Id(int(id)?),
            ["t", at, id] => Cursor::Recent(time(at)?, int(id)?),
            _ => return Err(bad("is not one this list made")),
        };
        let family = |c: Cursor| std::mem::discriminant(&c);
        let placeholder = DateTime::<Utc>::UNIX_EPOCH;
        let expected = match filter.state {
            _ if filter.workflow.is_some() => Cursor::Recent(placeholder, 0),
            Some(JobState::Available) => Cursor::Available(0, placeholder, 0),
            Some(JobState::Scheduled) => Cursor::Scheduled(placeholder, 0),
            Some(s) if s.is_final() => Cursor::Finished(placeholder, 0),
            Some(_) => Cursor::Id(0),
            None => Cursor::Recent(placeholder, 0),
        };
        if family(cursor) != family(expected) {
            return Err(bad("was made for another state filter"));
        }
        Ok(cursor)
    }
}

impl Client {
    /// One page of the jobs matching `filter`, in its state's order, from `filter.after` on.
    pub async fn job_page(&self, filter: &JobFilter) -> Result<JobPage> {
        let limit = filter.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::InvalidInput(format!(
                "a page holds 1 to {MAX_PAGE} jobs, not {limit}"
            )));
        }
        if let Some(args) = &filter.args {
            if !args.is_object() && !args.is_array() {
                return Err(Error::InvalidInput(format!(
                    "the args filter must be a JSON object (or array) that the jobs' args contain, as {{\"user\": 42}}; got {args}"
                )));
            }
        }
        let cursor = filter
            .after
            .as_deref()
            .map(|text| Cursor::parse(text, filter))
            .transpose()?;
        let rows = self.page_rows(filter, cursor, limit).await?;
        let jobs = rows.iter().map(Job::from_row).collect::<Result<Vec<_>>>()?;
        let next = match jobs.last() {
            Some(last) if jobs.len() as i64 == limit => Some(cursor_after(filter, last)),
            _ => None,
        };
        Ok(JobPage { jobs, next })
    }

    async fn page_rows(
        &self,
        filter: &JobFilter,
        cursor: Option<Cursor>,
        limit: i64,
    ) -> Result<Vec<tokio_postgres::Row>> {
        let conn = self.database().conn().await?;
        let (q, kind, worker) = (&filter.queue, &filter.kind, &filter.worker);
        let args: &Option<Value> = &filter.args;
        let (time, id) = match cursor {
            Some(Cursor::Finished(t, id) | Cursor::Scheduled(t, id) | Cursor::Recent(t, id)) => {
                (Some(t), Some(id))
            }
            Some(Cursor::Available(_, t, id)) => (Some(t), Some(id)),
            Some(Cursor::Id(id)) => (None, Some(id)),
            None => (None, None),
        };
        let priority = match cursor {
            Some(Cursor::Available(p, _, _)) => Some(p),
            _ => None,
        };
        let state_name = filter.state.map(|s| s.as_str());
        if let Some(run) = &filter.workflow {
            let params: [&(dyn ToSql + Sync); 9] =
                [run, &time, &id, &state_name, q, kind, worker, args, &limit];
            return Ok(conn.query(sql::JOB_PAGE_WORKFLOW, &params).await?);
        }
        let (text, params): (&str, Vec<&(dyn ToSql + Sync)>) = match filter.state {
            Some(JobState::Available) => {
                if worker.is_some() {
                    // an available job has no worker
                    return Ok(Vec::new());
                }
                (
                    sql::JOB_PAGE_AVAILABLE,
                    vec![&priority, &time, &id, q, kind, args, &limit],
                )
            }
            Some(JobState::Scheduled) => {
                if worker.is_some() {
                    return Ok(Vec::new());
                }
                (
                    sql::JOB_PAGE_SCHEDULED,
                    vec![&time, &id, q, kind, args, &limit],
                )
            }
            Some(JobState::Running) => (
                sql::JOB_PAGE_RUNNING,
                vec![&id, q, kind, worker, args, &limit],
            ),
            Some(s) if s.is_final() => (
                sql::JOB_PAGE_FINISHED,
                vec![&state_name, &time, &id, q, kind, worker, args, &limit],
            ),
            // a state of a newer schema that this build cannot name
            Some(_) => return Ok(Vec::new()),
            None => (
                sql::JOB_PAGE_RECENT,
                vec![&time, &id, q, kind, worker, args, &limit],
            ),
        };
        Ok(conn.query(text, &params).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_written() {
        let at = DateTime::from_timestamp_micros(1_764_000_000_123_456).expect("a valid time");
        for (state, cursor) in [
            (Some(JobState::Completed), Cursor::Finished(at, 7)),
            (Some(JobState::Available), Cursor::Available(-3, at, 8)),
            (Some(JobState::Scheduled), Cursor::Scheduled(at, 9)),
            (Some(JobState::Running), Cursor::Id(10)),
            (None, Cursor::Recent(at, 11)),
        ] {
            let text = cursor.to_text();
            let filter = JobFilter {
                state,
                ..JobFilter::default()
            };
            assert_eq!(Cursor::parse(&text, &filter).ok(), Some(cursor), "{text}");
        }
    }

    #[test]
    fn a_cursor_of_another_state_or_garbage_is_refused() {
        let text = Cursor::Id(4).to_text();
        let failed = JobFilter {
            state: Some(JobState::Failed),
            ..JobFilter::default()
        };
        let e = Cursor::parse(&text, &failed).expect_err("refused");
        assert!(e.to_string().contains("another state filter"), "{e}");
        for garbage in [
            "",
            "x",
            "f.1",
            "a.1.2",
            "i.nope",
            "f.99999999999999999999.1",
        ] {
            assert!(
                Cursor::parse(garbage, &JobFilter::default()).is_err(),
                "{garbage}"
            );
        }
    }
}
