//! `remuda job`, `jobs`, `cancel`, `retry`, `queues`, `workers`.

use crate::args::{DbArgs, JobIdArgs, JobsArgs, JsonFlag};
use crate::connect;
use crate::error::CliResult;
use crate::output::{print_job, print_jobs, print_json, print_queues, print_workers, queues_json};
use remuda::JobFilter;

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
    let client = connect::client(db).await?;
    let filter = JobFilter {
        state: args.state,
        queue: args.queue,
        kind: args.kind,
        limit: Some(args.limit),
    };
    let jobs = client.jobs(&filter).await?;
    if args.json {
        print_json(&jobs);
    } else {
        print_jobs(&jobs);
    }
    Ok(0)
}

pub async fn cancel(db: &DbArgs, args: JobIdArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let was = client.cancel(args.id).await?;
    if args.json {
        print_json(
            &serde_json::json!({"id": args.id, "previous_state": was, "state": "cancelled"}),
        );
    } else {
        println!("job {} cancelled (was {was})", args.id);
    }
    Ok(0)
}

pub async fn retry(db: &DbArgs, args: JobIdArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    let was = client.retry(args.id).await?;
    if args.json {
        print_json(
            &serde_json::json!({"id": args.id, "previous_state": was, "state": "available"}),
        );
    } else {
        println!("job {} is available again (was {was})", args.id);
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
