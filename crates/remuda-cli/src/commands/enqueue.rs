//! `remuda enqueue` and `remuda enqueue-batch`.

use super::send_span::SendSpan;
use crate::args::{DbArgs, EnqueueArgs, EnqueueBatchArgs, JobOptions};
use crate::config::Config;
use crate::connect;
use crate::error::{CliError, CliResult};
use crate::output::print_json;
use remuda::{JobResult, Jsonb, NewJob};
use std::io::BufRead;

/// The trace context of `--traceparent` / `--tracestate`, refused when not valid; without
/// them TRACEPARENT / TRACESTATE from the environment, ignored (with a note) when not valid,
/// as W3C asks of a receiver: another tool's variable must not stop an enqueue.
pub fn trace_context(
    traceparent: Option<&str>,
    tracestate: Option<&str>,
) -> CliResult<Option<remuda::TraceContext>> {
    if let Some(tp) = traceparent {
        return Ok(Some(remuda::TraceContext::parse(tp, tracestate)?));
    }
    let Some(tp) = std::env::var("TRACEPARENT")
        .ok()
        .filter(|t| !t.trim().is_empty())
    else {
        return Ok(None);
    };
    let state = std::env::var("TRACESTATE").ok();
    // a bad tracestate loses only itself (W3C), a bad traceparent the whole context
    let parsed = remuda::TraceContext::parse(tp.trim(), state.as_deref())
        .or_else(|_| remuda::TraceContext::parse(tp.trim(), None));
    match parsed {
        Ok(trace) => Ok(Some(trace)),
        Err(e) => {
            eprintln!("note: TRACEPARENT in the environment is ignored: {e}");
            Ok(None)
        }
    }
}

/// The group of `--group`; without it the group of the job whose command runs this one
/// (REMUDA_JOB_GROUP, which the worker sets for a command task), so a tenant's work keeps its
/// group as it fans out.
pub fn group(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_string).or_else(|| {
        std::env::var(remuda::group::ENV)
            .ok()
            .filter(|g| !g.is_empty())
    })
}

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
    if let Some(group) = group(options.group.as_deref()) {
        job = job.group(group);
    }
    if let Some(trace) = trace_context(
        options.traceparent.as_deref(),
        options.tracestate.as_deref(),
    )? {
        job = job.trace(trace);
    }
    if let Some(key) = &options.concurrency_key {
        job = job.concurrency_key(key.clone());
    }
    if let Some(key) = &options.unique_key {
        job = job.unique_key(key.clone());
        if let Some(period) = options.unique_period {
            job = job.unique_period(period);
        }
        if let Some(states) = &options.unique_states {
            job = job.unique_states(states.iter().copied());
        }
        if options.unique_per_queue {
            job = job.unique_per_queue();
        }
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
    if let Some(target) = notify_target(options)? {
        job = job.notify(target);
    }
    formation(options, kind, defaults, job)
}

/// `--debounce`, `--throttle` or `--batch-key` (the batch's size and wait from the flags, else
/// the kind's in --config); with `--unique-key` and none of them (nor unique states or period,
/// a start or a deadline), the kind's `debounce` or `throttle` in --config. Flags that do not go together are refused as the library refuses
/// them for every client (`FormationParts`).
fn formation(
    options: &JobOptions,
    kind: &str,
    defaults: Option<&Config>,
    mut job: NewJob,
) -> CliResult<NewJob> {
    let task = defaults.and_then(|c| c.tasks.get(kind));
    let (mut batch_size, mut batch_wait) = (options.batch_size, options.batch_wait);
    let (mut debounce, mut debounce_max) = (options.debounce, options.debounce_max);
    let (mut throttle, mut throttle_latest) = (options.throttle, options.throttle_latest);
    // the enqueue's own formation, or what a formation takes no part of (then a plain
    // unique job, as asked)
    let own = debounce.is_some()
        || throttle.is_some()
        || options.batch_key.is_some()
        || options.unique_states.is_some()
        || options.unique_period.is_some()
        || options.delay.is_some()
        || options.run_at.is_some()
        || options.deadline.is_some()
        || options.deadline_in.is_some();
    if let (Some(task), Some(_), false) = (task, &options.unique_key, own) {
        debounce = task.debounce;
        debounce_max = debounce_max.or(task.debounce_max.filter(|_| debounce.is_some()));
        throttle = task.throttle;
        throttle_latest |= task.throttle_latest && throttle.is_some();
    }
    if let Some(key) = &options.batch_key {
        batch_size = batch_size.or(task.and_then(|t| t.batch_size));
        batch_wait = batch_wait.or(task.and_then(|t| t.batch_wait));
        if batch_size.is_none() || batch_wait.is_none() {
            return Err(CliError::Usage(format!(
                "--batch-key {key} needs the batch's size and wait: set batch_size and batch_wait in [tasks.{kind}] of --config, or give --batch-size and --batch-wait"
            )));
        }
    }
    let parts = remuda::FormationParts {
        debounce,
        debounce_max,
        throttle,
        throttle_latest,
        batch_key: options.batch_key.clone(),
        batch_size,
        batch_wait,
    };
    job.formation = parts.formation(kind)?;
    Ok(job)
}

/// What the JSON output calls a job this enqueue joined: `debounced`, `throttled`, `batched`.
fn joined_name(job: &NewJob) -> Option<&'static str> {
    job.formation.as_ref().map(remuda::Formation::name)
}

/// The job's own notification target, from `--notify-webhook`, `--notify-email` and
/// `--notify-on`, checked.
fn notify_target(options: &JobOptions) -> CliResult<Option<remuda::notify::NotifyTarget>> {
    use remuda::notify::{NotifyTarget, Outcome};
    if options.notify_webhook.is_none() && options.notify_email.is_none() {
        return match options.notify_on {
            Some(_) => Err(CliError::Usage(
                "--notify-on needs --notify-webhook or --notify-email: say where to notify".into(),
            )),
            None => Ok(None),
        };
    }
    let on = Outcome::parse_list(options.notify_on.as_deref().unwrap_or("final"))
        .map_err(|e| CliError::Usage(format!("--notify-on: {e}")))?;
    let target = NotifyTarget {
        webhook: options.notify_webhook.clone(),
        email: options.notify_email.clone(),
        on,
    };
    target.validate().map_err(|e| {
        let flag = match (&options.notify_webhook, e.to_string().contains("email")) {
            (_, true) => "--notify-email",
            _ => "--notify-webhook",
        };
        CliError::Usage(format!("{flag}: {e}"))
    })?;
    Ok(Some(target))
}

/// Where spans go: `[telemetry]` of `--config`, else the `OTEL_*` environment.
fn telemetry(defaults: Option<&Config>) -> remuda::telemetry::TelemetryConfig {
    defaults.map(|c| c.telemetry.config()).unwrap_or_default()
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

/// Checks that `text` is one JSON document and keeps it as written: numbers are never
/// rounded through a float (PostgreSQL's `jsonb` stores them exactly).
fn parse_args(text: &str, what: &str) -> CliResult<Jsonb> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|e| CliError::Usage(format!("{what} is not valid JSON: {e}")))?;
    Ok(Jsonb(text.trim().to_string()))
}

/// The text of `--args`: inline JSON, `@FILE`, or `-` for stdin.
fn read_args(given: Option<&str>) -> CliResult<(String, String)> {
    match given {
        None => Ok(("{}".into(), "--args".into())),
        Some("-") => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| CliError::Usage(format!("cannot read --args from stdin: {e}")))?;
            Ok((text, "--args from stdin".into()))
        }
        Some(given) => match given.strip_prefix('@') {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| CliError::Usage(format!("cannot read --args file {path}: {e}")))?;
                Ok((text, format!("--args file {path}")))
            }
            None => Ok((given.to_string(), "--args".into())),
        },
    }
}

/// A client whose args limit is `--max-payload-bytes`, if given.
async fn client_for(db: &DbArgs, options: &JobOptions) -> CliResult<remuda::Client> {
    let client = connect::client(db).await?;
    Ok(match options.max_payload_bytes {
        Some(0) => {
            return Err(CliError::Usage(
                "--max-payload-bytes must be at least 1".into(),
            ))
        }
        Some(bytes) => client.with_max_payload(bytes),
        None => client,
    })
}

/// Warns on stderr when no live worker runs `kind` in `queue`: such a job waits until one does.
async fn warn_if_unserved(client: &remuda::Client, kind: &str, queue: &str) {
    match client.kind_served(kind, queue).await {
        Ok((false, true)) => eprintln!(
            "warning: no live worker runs kind {kind:?} in queue {queue:?}: the job waits until one does (check the queue, or enqueue with --config remuda.toml to take the kind's queue)"
        ),
        Ok((false, false)) => eprintln!(
            "note: no worker is running: the job waits until a worker for kind {kind:?} serves queue {queue:?}"
        ),
        _ => {}
    }
}

pub async fn one(db: &DbArgs, args: EnqueueArgs) -> CliResult<u8> {
    let defaults = load_defaults(&args.options, &args.kind)?;
    let (text, what) = read_args(args.args.as_deref())?;
    let json = parse_args(&text, &what)?;
    let mut job = apply(
        &args.options,
        &args.kind,
        defaults.as_ref(),
        NewJob::from_json(&args.kind, json),
    )?;
    let client = client_for(db, &args.options).await?;
    let span = SendSpan::begin(&telemetry(defaults.as_ref()), job.trace.as_ref());
    if let Some(span) = &span {
        job.trace = Some(span.context.clone());
    }
    let inserted = client.insert_each(std::slice::from_ref(&job)).await;
    if let Some(span) = span {
        let id = inserted.as_ref().ok().and_then(|i| i.first()).map(|i| i.id);
        span.end(&job.queue, 1, id, inserted.as_ref().err()).await;
    }
    let inserted = inserted?
        .first()
        .copied()
        .ok_or_else(|| CliError::Usage("the enqueue returned no job".into()))?;
    let id = inserted.id;
    if !inserted.duplicate && !inserted.joined {
        warn_if_unserved(&client, &job.kind, &job.queue).await;
    }
    if inserted.duplicate && !args.json {
        eprintln!(
            "a job with unique key {:?} exists already: {id}",
            args.options.unique_key.as_deref().unwrap_or("")
        );
    }
    if !args.wait {
        if args.json {
            let mut out = serde_json::json!({ "id": id, "duplicate": inserted.duplicate });
            if let (Some(name), Some(object)) = (joined_name(&job), out.as_object_mut()) {
                object.insert(name.into(), inserted.joined.into());
            }
            print_json(&out);
        } else {
            crate::out!("{id}");
        }
        return Ok(0);
    }
    wait_and_print(&client, id, args.wait_timeout, args.json).await
}

/// Waits for job `id` and prints its result (or, with `json`, the whole job): exit 0 when it
/// completed, 1 when it failed, was cancelled or expired, 3 (as an error) on timeout.
pub async fn wait_and_print(
    client: &remuda::Client,
    id: i64,
    timeout: std::time::Duration,
    json: bool,
) -> CliResult<u8> {
    let job = match client.wait(id, timeout).await {
        Ok(job) => job,
        Err(e @ remuda::Error::WaitTimeout { .. }) => {
            if json {
                print_json(&serde_json::json!({ "id": id, "timeout": true }));
            }
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        print_json(&job);
    } else if let Some(result) = &job.result {
        crate::out!("{}", serde_json::to_string(result).unwrap_or_default());
    }
    Ok(match job.result {
        Some(JobResult::Ok(_)) => 0,
        _ => 1,
    })
}

/// `remuda wait ID`: the `--wait` of `enqueue`, for a job enqueued before.
pub async fn wait(db: &DbArgs, args: crate::args::WaitArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    wait_and_print(&client, args.id, args.timeout, args.json).await
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
    let max_payload = args
        .options
        .max_payload_bytes
        .unwrap_or(remuda::client::DEFAULT_MAX_PAYLOAD);
    let mut jobs = Vec::new();
    let mut lines = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line =
            line.map_err(|e| CliError::Usage(format!("cannot read {}: {e}", args.file.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("line {} of {}", n + 1, args.file.display());
        let json = parse_args(&line, &at)?;
        let mut job = template.clone();
        job.args = json;
        job.check(max_payload)
            .map_err(|e| CliError::Usage(format!("{at}: {e}")))?;
        jobs.push(job);
        lines.push(n + 1);
    }
    let client = client_for(db, &args.options).await?;
    // (an empty file sends nothing: no span)
    let span = match jobs.is_empty() {
        true => None,
        false => SendSpan::begin(&telemetry(defaults.as_ref()), template.trace.as_ref()),
    };
    if let Some(span) = &span {
        for job in &mut jobs {
            job.trace = Some(span.context.clone());
        }
    }
    let started = std::time::Instant::now();
    // COPY is fastest but returns no ids and cannot skip duplicates: ids (--json) and unique
    // keys take the INSERT path, which says which line was a duplicate of which job
    let inserted = if args.json || args.options.unique_key.is_some() || template.formation.is_some()
    {
        client.insert_each(&jobs).await.map(Some)
    } else {
        client.insert_bulk(&jobs).await.map(|_| None)
    };
    if let Some(span) = span {
        let one = inserted
            .as_ref()
            .ok()
            .and_then(|i| i.as_ref()?.first().map(|i| i.id));
        let error = inserted.as_ref().err();
        span.end(&template.queue, jobs.len(), one, error).await;
    }
    let inserted = inserted?;
    let seconds = started.elapsed().as_secs_f64();
    let duplicates = inserted
        .as_ref()
        .map_or(0, |all| all.iter().filter(|i| i.duplicate).count());
    // lines that joined a waiting job (debounced, throttled, batched) made none of their own
    let joined = inserted.as_ref().map_or(0, |all| {
        all.iter().filter(|i| i.joined && !i.duplicate).count()
    });
    let count = jobs.len() - duplicates - joined;
    if jobs.is_empty() {
        eprintln!(
            "warning: {} has no lines: nothing enqueued",
            args.file.display()
        );
    } else if count > 0 {
        warn_if_unserved(&client, &template.kind, &template.queue).await;
    }
    if args.json {
        let ids: Vec<i64> = inserted.iter().flatten().map(|i| i.id).collect();
        let duplicate_lines: Vec<usize> = inserted
            .iter()
            .flatten()
            .zip(&lines)
            .filter(|(i, _)| i.duplicate)
            .map(|(_, line)| *line)
            .collect();
        let joined_lines: Vec<usize> = inserted
            .iter()
            .flatten()
            .zip(&lines)
            .filter(|(i, _)| i.joined && !i.duplicate)
            .map(|(_, line)| *line)
            .collect();
        print_json(&serde_json::json!({
            "count": count,
            "inserted": count,
            "joined": joined,
            "duplicates": duplicates,
            "ids": ids,
            "duplicate_lines": duplicate_lines,
            "joined_lines": joined_lines,
            "seconds": seconds,
        }));
    } else {
        let jobs_word = if count == 1 { "job" } else { "jobs" };
        crate::out!(
            "enqueued {count} {jobs_word} in {:.0} ms{}{}",
            seconds * 1000.0,
            match joined {
                0 => String::new(),
                1 => ", 1 line joined a waiting job".to_string(),
                n => format!(", {n} lines joined waiting jobs"),
            },
            match duplicates {
                0 => String::new(),
                1 => ", 1 duplicate of an existing job skipped".to_string(),
                n => format!(", {n} duplicates of existing jobs skipped"),
            }
        );
    }
    Ok(0)
}
