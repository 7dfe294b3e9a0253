//! `remuda enqueue` and `remuda enqueue-batch`.

use crate::args::{DbArgs, EnqueueArgs, EnqueueBatchArgs, JobOptions};
use crate::config::Config;
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use remuda::{JobResult, Jsonb, NewJob};
use std::io::BufRead;

/// Applies the flags (and the kind's defaults from --config) to a job.
fn apply(
    options: &JobOptions,
    kind: &str,
    defaults: Option<&Config>,
    mut job: NewJob,
) -> CliResult<NewJob> {
    if let Some(task) = defaults.and_then(|c| c.tasks.get(kind)) {
        let o = task.options();
        job.queue = o.queue;
        job.priority = o.priority;
        job.max_attempts = Some(o.max_attempts);
        job.timeout = o.timeout;
    }
    if let Some(queue) = &options.queue {
        job.queue = queue.clone();
    }
    if let Some(name) = &options.target_worker {
        job = job.target_worker(name.clone());
    }
    if let Some(caps) = &options.requires {
        job = job.requires(caps.iter().map(|c| c.trim().to_string()));
    }
    if let Some(key) = &options.concurrency_key {
        job = job.concurrency_key(key.clone());
    }
    if let Some(key) = &options.unique_key {
        job = job.unique_key(key.clone());
    }
    if let Some(priority) = options.priority {
        job.priority = priority;
    }
    if let Some(max) = options.max_attempts {
        if max < 1 {
            return Err(CliError::Usage("--max-attempts must be at least 1".into()));
        }
        job.max_attempts = Some(max);
    }
    if let Some(timeout) = options.timeout {
        job.timeout = Some(timeout);
    }
    if let Some(delay) = options.delay {
        job = job.delay(delay);
    }
    if let Some(at) = options.run_at {
        job = job.run_at(at);
    }
    if let Some(within) = options.deadline_in {
        let at = chrono::Duration::from_std(within)
            .ok()
            .and_then(|d| chrono::Utc::now().checked_add_signed(d))
            .ok_or_else(|| CliError::Usage("--deadline-in is too large".into()))?;
        job = job.expires_at(at);
    }
    if let Some(at) = options.deadline {
        job = job.expires_at(at);
    }
    Ok(job)
}

fn load_defaults(options: &JobOptions, kind: &str) -> CliResult<Option<Config>> {
    let Some(path) = &options.config else {
        return Ok(None);
    };
    let config = Config::load(path)?;
    if !config.tasks.contains_key(kind) {
        return Err(CliError::Usage(format!(
            "{} has no [tasks.{kind}]: its kinds are {}",
            path.display(),
            config.tasks.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(Some(config))
}

fn parse_args(text: &str, what: &str) -> CliResult<Jsonb> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| CliError::Usage(format!("{what} is not valid JSON: {e}")))?;
    Ok(Jsonb(value.to_string()))
}

pub async fn one(db: &DbArgs, args: EnqueueArgs) -> CliResult<u8> {
    let defaults = load_defaults(&args.options, &args.kind)?;
    let json = parse_args(args.args.as_deref().unwrap_or("{}"), "--args")?;
    let job = apply(
        &args.options,
        &args.kind,
        defaults.as_ref(),
        NewJob::from_json(&args.kind, json),
    )?;
    let client = connect::client(db).await?;
    let inserted = client
        .insert_each(std::slice::from_ref(&job))
        .await?
        .first()
        .copied()
        .ok_or_else(|| CliError::Usage("the enqueue returned no job".into()))?;
    let id = inserted.id;
    if inserted.duplicate && !args.json {
        eprintln!(
            "a job with unique key {:?} exists already: {id}",
            args.options.unique_key.as_deref().unwrap_or("")
        );
    }
    if !args.wait {
        if args.json {
            print_json(&serde_json::json!({ "id": id, "duplicate": inserted.duplicate }));
        } else {
            println!("{id}");
        }
        return Ok(0);
    }
    let job = match client.wait(id, args.wait_timeout).await {
        Ok(job) => job,
        Err(e @ remuda::Error::WaitTimeout { .. }) => {
            if args.json {
                print_json(&serde_json::json!({ "id": id, "timeout": true }));
            }
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        print_json(&job);
    } else if let Some(result) = &job.result {
        println!("{}", serde_json::to_string(result).unwrap_or_default());
    }
    Ok(match job.result {
        Some(JobResult::Ok(_)) => 0,
        _ => 1,
    })
}

pub async fn batch(db: &DbArgs, args: EnqueueBatchArgs) -> CliResult<u8> {
    let defaults = load_defaults(&args.options, &args.kind)?;
    let reader: Box<dyn BufRead> = if args.file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(&args.file)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", args.file.display())))?;
        Box::new(std::io::BufReader::new(file))
    };
    // Read and check every line before writing anything.
    let template = apply(
        &args.options,
        &args.kind,
        defaults.as_ref(),
        NewJob::from_json(&args.kind, Jsonb("{}".into())),
    )?;
    let mut jobs = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line =
            line.map_err(|e| CliError::Usage(format!("cannot read {}: {e}", args.file.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let json = parse_args(&line, &format!("line {} of {}", n + 1, args.file.display()))?;
        let mut job = template.clone();
        job.args = json;
        jobs.push(job);
    }
    let client = connect::client(db).await?;
    let started = std::time::Instant::now();
    let count = client.insert_bulk(&jobs).await?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        print_json(&serde_json::json!({ "count": count, "seconds": seconds }));
    } else {
        println!("enqueued {count} jobs in {:.0} ms", seconds * 1000.0);
    }
    Ok(0)
}
