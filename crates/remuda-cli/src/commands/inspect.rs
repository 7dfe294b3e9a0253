//! `remuda job`, `jobs`, `cancel`, `retry`, `queues`, `workers`.

use crate::args::{
    DbArgs, JobIdArgs, JobsAction, JobsArgs, JobsDeleteArgs, JsonFlag, RetryArgs, StatsArgs,
};
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::output::{print_job, print_jobs, print_json, print_queues, print_workers, queues_json};
use remuda::{JobFilter, JobState};

pub async fn job(db: &DbArgs, args: JobIdArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let job = client
        .job(args.id)
        .await?
        .ok_or(remuda::Error::NotFound(args.id))?;
    if args.json {
        print_json(&job);
    } else {
        print_job(&job);
    }
    Ok(0)
}

pub async fn jobs(db: &DbArgs, args: JobsArgs) -> CliResult<u8> {
    if let Some(JobsAction::Delete(delete)) = args.action {
        return delete_many(db, delete).await;
    }
    let contains = args
        .args
        .as_deref()
        .map(|text| {
            serde_json::from_str(text).map_err(|e| {
                CliError::Usage(format!(
                    "--args must be JSON that the jobs' args contain, as '{{\"user\": 42}}': {e}"
                ))
            })
        })
        .transpose()?;
    let client = connect::client(db).await?;
    if let (Some(key), Some(kind)) = (&args.key, &args.kind) {
        return jobs_by_key(&client, kind, key, &args).await;
    }
    let filter = JobFilter {
        state: args.state,
        queue: args.queue,
        kind: args.kind,
        worker: args.worker,
        args: contains,
        limit: Some(args.limit),
        after: args.after.clone(),
        workflow: args.workflow,
    };
    let page = client.job_page(&filter).await?;
    if args.json {
        let listed: Vec<serde_json::Value> = page
            .jobs
            .iter()
            .map(|job| {
                let mut value = serde_json::to_value(job).unwrap_or_default();
                if let Some(object) = value.as_object_mut() {
                    let cursor = remuda::client::cursor_after(&filter, job);
                    object.insert("cursor".into(), cursor.into());
                }
                value
            })
            .collect();
        print_json(&listed);
    } else {
        print_jobs(&page.jobs);
        if let Some(next) = &page.next {
            crate::out!("(more: --after {next})");
        }
    }
    Ok(0)
}

/// `remuda jobs --kind K --key KEY`: the jobs holding the key, filtered by --state and
/// --queue, at most --limit.
async fn jobs_by_key(
    client: &remuda::Client,
    kind: &str,
    key: &str,
    args: &JobsArgs,
) -> CliResult<u8> {
    let limit = usize::try_from(args.limit).unwrap_or(0);
    if !(1..=1000).contains(&limit) {
        return Err(CliError::Usage(format!(
            "--limit {}: give 1 to 1000",
            args.limit
        )));
    }
    let found: Vec<remuda::Job> = client
        .find_by_key(kind, key)
        .await?
        .into_iter()
        .filter(|j| args.state.is_none_or(|s| j.state == s))
        .filter(|j| args.queue.as_deref().is_none_or(|q| j.queue == q))
        .take(limit)
        .collect();
    if args.json {
        print_json(&found);
    } else {
        print_jobs(&found);
    }
    Ok(0)
}

pub async fn cancel(db: &DbArgs, args: JobIdArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let was = client.cancel(args.id).await?;
    let already = was == JobState::Cancelled;
    if args.json {
        print_json(&serde_json::json!({
            "id": args.id, "previous_state": was, "state": "cancelled", "already": already
        }));
    } else if already {
        crate::out!("job {} was already cancelled", args.id);
    } else {
        crate::out!("job {} cancelled (was {was})", args.id);
    }
    Ok(0)
}

pub async fn retry(db: &DbArgs, args: RetryArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let Some(state) = &args.state else {
        let id = args.id.ok_or_else(|| {
            CliError::Usage("give a job id, or --state to retry many jobs".into())
        })?;
        let options = remuda::RetryOptions {
            force: args.force,
            fresh: args.fresh,
        };
        let was = client.retry_with(id, options).await?;
        if args.json {
            print_json(&serde_json::json!({
                "id": id, "previous_state": was, "state": "available", "fresh": args.fresh
            }));
        } else if args.fresh {
            crate::out!("job {id} is available again, from its first step (was {was})");
        } else {
            crate::out!("job {id} is available again (was {was})");
        }
        return Ok(0);
    };
    let state: JobState = state.parse().map_err(CliError::Usage)?;
    let retried = client
        .retry_many(state, args.queue.as_deref(), args.kind.as_deref())
        .await?;
    if args.json {
        print_json(&serde_json::json!({"retried": retried, "previous_state": state}));
    } else {
        crate::out!(
            "{retried} {state} job{} available again",
            if retried == 1 { " is" } else { "s are" }
        );
    }
    Ok(0)
}

pub async fn queues(db: &DbArgs, flags: JsonFlag) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let stats = client.queue_stats().await?;
    if flags.json {
        print_json(&queues_json(&stats));
    } else {
        print_queues(&stats);
    }
    Ok(0)
}

pub async fn workers(db: &DbArgs, flags: JsonFlag) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let workers = client.workers().await?;
    if flags.json {
        print_json(&workers);
    } else {
        print_workers(&workers);
    }
    Ok(0)
}

pub async fn delete(db: &DbArgs, args: JobIdArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let was = client.delete(args.id).await?;
    if args.json {
        print_json(&serde_json::json!({"id": args.id, "previous_state": was, "deleted": true}));
    } else {
        crate::out!("job {} deleted (was {was})", args.id);
    }
    Ok(0)
}

async fn delete_many(db: &DbArgs, args: JobsDeleteArgs) -> CliResult<u8> {
    if args.state == JobState::Running {
        return Err(CliError::Usage(
            "running jobs cannot be deleted: cancel them first (remuda cancel ID)".into(),
        ));
    }
    let before = match args.older_than {
        Some(age) => Some(
            chrono::Utc::now()
                - chrono::Duration::from_std(age)
                    .map_err(|_| CliError::Usage(format!("--older-than {age:?} is too long")))?,
        ),
        None => None,
    };
    let client = connect::client(db).await?;
    let filter = JobFilter {
        state: Some(args.state),
        queue: args.queue,
        kind: args.kind,
        ..Default::default()
    };
    let outcome = client
        .act_on_matching(&filter, remuda::BulkAction::Delete, before, args.dry_run)
        .await?;
    let deletable = outcome.matched - outcome.in_workflows;
    if args.json {
        print_json(&serde_json::json!({
            "matched": outcome.matched,
            "deleted": outcome.changed,
            "would_delete": if args.dry_run { Some(deletable) } else { None },
            "skipped_workflow_jobs": outcome.in_workflows,
            "dry_run": args.dry_run
        }));
    } else if args.dry_run {
        crate::out!(
            "{deletable} {} job(s) would be deleted (dry run)",
            args.state
        );
    } else {
        crate::out!(
            "{} of {} matching {} job(s) deleted",
            outcome.changed,
            outcome.matched,
            args.state
        );
    }
    if outcome.in_workflows > 0 && !args.json {
        eprintln!(
            "{} matching job(s) belong to workflow runs and {} skipped: a run's jobs are deleted with the run (remuda workflow cancel, then retention)",
            outcome.in_workflows,
            if args.dry_run { "would be" } else { "were" }
        );
    }
    Ok(0)
}

pub async fn stats(db: &DbArgs, args: StatsArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let queues = client.throughput(args.window).await?;
    if args.json {
        print_json(&queues);
        return Ok(0);
    }
    crate::out!("last {}:", remuda::duration::format(args.window));
    crate::out!(
        "{:<16}  {:>10}  {:>8}  {:>10}  {:>8}",
        "QUEUE",
        "COMPLETED",
        "FAILED",
        "JOBS/S",
        "FAILED%"
    );
    for q in &queues {
        crate::out!(
            "{:<16}  {:>10}  {:>8}  {:>10.1}  {:>7.1}%",
            q.queue,
            q.completed,
            q.failed,
            q.per_second,
            q.failure_rate * 100.0
        );
    }
    Ok(0)
}
