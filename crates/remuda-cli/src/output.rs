//! Printing jobs, queues and workers as text for people or JSON for scripts.

use crate::table::{Align, Table};
use remuda::{Job, JobState, QueueStats, WorkerInfo};
use serde_json::{json, Value};

/// Writes to stdout; a closed stdout (the reader went away, as `head` does) ends the process
/// quietly with exit 0: there is nobody left to tell.
pub fn write_out(text: std::fmt::Arguments<'_>, newline: bool) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written = if newline {
        writeln!(stdout, "{text}")
    } else {
        write!(stdout, "{text}")
    };
    if let Err(e) = written.and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => crate::out!("{text}"),
        Err(e) => eprintln!("error: cannot print JSON: {e}"),
    }
}

/// An error as `{"error": {"code", "message"}}` on stderr, for `--json` callers.
pub fn print_error_json(code: &str, message: &str) {
    eprintln!(
        "{}",
        json!({ "error": { "code": code, "message": message } })
    );
}

fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    )
}

/// One job, field by field.
pub fn print_job(job: &Job) {
    crate::out!("id            {}", job.id);
    crate::out!("kind          {}", job.kind);
    crate::out!("queue         {}", job.queue);
    crate::out!("state         {}", job.state);
    let max = job
        .max_attempts
        .map_or_else(|| "worker default".into(), |m| m.to_string());
    crate::out!("attempt       {} of {}", job.attempt, max);
    crate::out!("priority      {}", job.priority);
    crate::out!("run_at        {}", time(Some(job.run_at)));
    crate::out!("created_at    {}", time(Some(job.created_at)));
    crate::out!("started_at    {}", time(job.started_at));
    crate::out!("finished_at   {}", time(job.finished_at));
    if let Some(expires) = job.expires_at {
        crate::out!("expires_at    {}", time(Some(expires)));
    }
    if let Some(worker) = &job.worker_id {
        crate::out!("worker        {worker}");
    }
    if let Some(group) = &job.group {
        crate::out!("group         {group}");
    }
    if let Some(trace) = &job.trace {
        crate::out!("traceparent   {}", trace.traceparent);
    }
    if let Some(schedule) = &job.schedule {
        crate::out!("schedule      {schedule} (fire time {})", time(job.fire_at));
    }
    if let Some(run) = workflow_of(job) {
        crate::out!("workflow      {run}");
    }
    if let Some(formed) = job.formed.as_ref().and_then(|f| f.as_object()) {
        // {"debounced": n}, {"throttled": n} or {"batched": n, "enqueued_at": […]}
        let how: Vec<String> = formed
            .iter()
            .filter(|(name, _)| *name != "enqueued_at")
            .map(|(name, n)| format!("{name} ({n} enqueue{})", if n == 1 { "" } else { "s" }))
            .collect();
        crate::out!("formed        {}", how.join(", "));
    }
    crate::out!("args          {}", job.args);
    match &job.result {
        Some(result) => crate::out!(
            "result        {}",
            serde_json::to_string(result).unwrap_or_default()
        ),
        None => crate::out!("result        -"),
    }
    for step in job.steps.iter().flatten() {
        crate::out!(
            "step          {} (attempt {}, {}): {}",
            step.name,
            step.attempt,
            time(Some(step.at)),
            step.output
        );
    }
    for e in &job.errors {
        crate::out!(
            "error         attempt {}{} at {} on {}: {} {}",
            e.attempt,
            e.started_at
                .map(|t| format!(" (started {})", time(Some(t))))
                .unwrap_or_default(),
            time(Some(e.at)),
            e.worker.as_deref().unwrap_or("?"),
            e.code,
            e.message
        );
    }
}

/// Jobs as a table, latest first: the time that fits each one's state (finished, started,
/// else due), its run and node when a workflow runs it, and its last error.
pub fn print_jobs(jobs: &[Job]) {
    let mut table = Table::new(&[
        ("ID", Align::Right),
        ("STATE", Align::Left),
        ("KIND", Align::Left),
        ("QUEUE", Align::Left),
        ("ATTEMPT", Align::Right),
        ("AT", Align::Left),
        ("WORKFLOW", Align::Left),
        ("LAST_ERROR", Align::Left),
    ]);
    for job in jobs {
        table.row(vec![
            job.id.to_string(),
            job.state.as_str().into(),
            job.kind.clone(),
            job.queue.clone(),
            job.attempt.to_string(),
            listed_time(job),
            workflow_of(job).unwrap_or_else(|| "-".into()),
            last_error(job),
        ]);
    }
    table.print();
}

/// The time a list orders `job` by; a job its paused run holds has none yet.
fn listed_time(job: &Job) -> String {
    if remuda::client::is_held(job) {
        return "held (its run is paused)".into();
    }
    time(Some(remuda::client::listed_at(job)))
}

/// `run 12 node resize[3]`: the run and node of a workflow's job.
pub fn workflow_of(job: &Job) -> Option<String> {
    let run = job.workflow_id?;
    let node = job.workflow_node.as_deref().unwrap_or("?");
    Some(match job.workflow_index {
        Some(i) => format!("run {run} node {node}[{i}]"),
        None => format!("run {run} node {node}"),
    })
}

/// The error that ended a job, else its latest failed attempt's, in one line (`-` for none).
fn last_error(job: &Job) -> String {
    let (code, message) = match (&job.result, job.errors.last()) {
        (Some(remuda::JobResult::Err(e)), _) => (e.code.as_str(), e.message.as_str()),
        (_, Some(e)) => (e.code.as_str(), e.message.as_str()),
        _ => return "-".into(),
    };
    let line: String = message
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect();
    format!("{code}: {line}")
}

/// Queue statistics as `remuda queues --json` prints them (see `QueueStats`'s serialisation).
pub fn queues_json(stats: &[QueueStats]) -> Value {
    serde_json::to_value(stats).unwrap_or_else(|e| json!({"error": e.to_string()}))
}

/// The limits in force on a queue, in a few words (`-` for none).
fn limits(s: &remuda::QueueSettings) -> String {
    let mut parts = Vec::new();
    if let Some(n) = s.max_running {
        parts.push(format!("max_running={n}"));
    }
    if let Some(n) = s.key_limit {
        parts.push(format!("key_limit={n}"));
    }
    if let Some((n, period)) = s.rate {
        parts.push(format!(
            "rate={n}/{} per {}",
            remuda::duration::format(period),
            s.rate_per.as_str()
        ));
        if let Some(burst) = s.rate_burst {
            parts.push(format!("burst={burst}"));
        }
    }
    if let Some(n) = s.max_depth {
        parts.push(format!("max_depth={n}"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// Queue statistics as a table.
pub fn print_queues(stats: &[QueueStats]) {
    let names: Vec<String> = JobState::ALL
        .iter()
        .map(|s| s.as_str().to_uppercase())
        .collect();
    let mut columns = vec![("QUEUE", Align::Left), ("STATUS", Align::Left)];
    columns.extend(names.iter().map(|n| (n.as_str(), Align::Right)));
    columns.extend([("UNROUTABLE", Align::Right), ("LIMITS", Align::Left)]);
    let mut table = Table::new(&columns);
    for s in stats {
        let status = if s.settings.paused {
            "paused"
        } else {
            "active"
        };
        let mut row = vec![s.queue.clone(), status.to_string()];
        row.extend(
            JobState::ALL
                .iter()
                .map(|state| s.count(*state).to_string()),
        );
        row.extend([s.unroutable.to_string(), limits(&s.settings)]);
        table.row(row);
    }
    table.print();
}

/// Workers as a table.
pub fn print_workers(workers: &[WorkerInfo]) {
    let mut table = Table::new(&[
        ("ID", Align::Left),
        ("NAME", Align::Left),
        ("HOST", Align::Left),
        ("PID", Align::Right),
        ("ALIVE", Align::Left),
        ("RUNNING/MAX", Align::Right),
        ("QUEUES", Align::Left),
        ("KINDS", Align::Left),
        ("CAPABILITIES", Align::Left),
        ("HEARTBEAT", Align::Left),
    ]);
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(",")
        }
    };
    for w in workers {
        table.row(vec![
            w.id.clone(),
            w.name.clone(),
            w.host.clone(),
            w.pid.to_string(),
            if w.alive { "yes" } else { "no" }.into(),
            format!("{}/{}", w.running, w.concurrency),
            list(&w.queues),
            list(&w.kinds),
            list(&w.capabilities),
            w.heartbeat_at
                .map_or_else(|| "declared dead".to_string(), |t| time(Some(t))),
        ]);
    }
    table.print();
}
