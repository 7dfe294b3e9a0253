//! Printing jobs, queues and workers as text for people or JSON for scripts.

use remuda::{Job, JobState, QueueStats, WorkerInfo};
use serde_json::{json, Map, Value};

/// Prints a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("error: cannot print JSON: {e}"),
    }
}

fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    )
}

/// One job, field by field.
pub fn print_job(job: &Job) {
    println!("id            {}", job.id);
    println!("kind          {}", job.kind);
    println!("queue         {}", job.queue);
    println!("state         {}", job.state);
    let max = job
        .max_attempts
        .map_or_else(|| "worker default".into(), |m| m.to_string());
    println!("attempt       {} of {}", job.attempt, max);
    println!("priority      {}", job.priority);
    println!("run_at        {}", time(Some(job.run_at)));
    println!("created_at    {}", time(Some(job.created_at)));
    println!("started_at    {}", time(job.started_at));
    println!("finished_at   {}", time(job.finished_at));
    if let Some(expires) = job.expires_at {
        println!("expires_at    {}", time(Some(expires)));
    }
    if let Some(worker) = &job.worker_id {
        println!("worker        {worker}");
    }
    println!("args          {}", job.args);
    match &job.result {
        Some(result) => println!(
            "result        {}",
            serde_json::to_string(result).unwrap_or_default()
        ),
        None => println!("result        -"),
    }
    for e in &job.errors {
        println!(
            "error         attempt {} at {} on {}: {} {}",
            e.attempt,
            time(Some(e.at)),
            e.worker.as_deref().unwrap_or("?"),
            e.code,
            e.message
        );
    }
}

/// Jobs as a table.
pub fn print_jobs(jobs: &[Job]) {
    println!(
        "{:>10}  {:<10}  {:<20}  {:<12}  {:>7}  {:<23}",
        "ID", "STATE", "KIND", "QUEUE", "ATTEMPT", "RUN_AT"
    );
    for job in jobs {
        println!(
            "{:>10}  {:<10}  {:<20}  {:<12}  {:>7}  {:<23}",
            job.id,
            job.state.as_str(),
            job.kind,
            job.queue,
            job.attempt,
            time(Some(job.run_at))
        );
    }
}

/// Queue statistics as `{"queue": …, "<state>": count, …}` objects with every state present.
pub fn queues_json(stats: &[QueueStats]) -> Value {
    Value::Array(
        stats
            .iter()
            .map(|s| {
                let mut object = Map::new();
                object.insert("queue".into(), json!(s.queue));
                for state in JobState::ALL {
                    object.insert(state.as_str().into(), json!(s.count(state)));
                }
                object.insert("unroutable".into(), json!(s.unroutable));
                Value::Object(object)
            })
            .collect(),
    )
}

/// Queue statistics as a table.
pub fn print_queues(stats: &[QueueStats]) {
    print!("{:<16}", "QUEUE");
    for state in JobState::ALL {
        print!("  {:>10}", state.as_str().to_uppercase());
    }
    println!("  {:>10}", "UNROUTABLE");
    for s in stats {
        print!("{:<16}", s.queue);
        for state in JobState::ALL {
            print!("  {:>10}", s.count(state));
        }
        println!("  {:>10}", s.unroutable);
    }
}

/// Workers as a table.
pub fn print_workers(workers: &[WorkerInfo]) {
    println!(
        "{:<36}  {:<16}  {:>7}  {:>11}  {:<20}  {:<20}  {:<23}",
        "ID", "HOST", "PID", "RUNNING/MAX", "QUEUES", "CAPABILITIES", "HEARTBEAT"
    );
    for w in workers {
        println!(
            "{:<36}  {:<16}  {:>7}  {:>11}  {:<20}  {:<20}  {:<23}",
            w.id,
            w.host,
            w.pid,
            format!("{}/{}", w.running, w.concurrency),
            w.queues.join(","),
            if w.capabilities.is_empty() {
                "-".to_string()
            } else {
                w.capabilities.join(",")
            },
            time(Some(w.heartbeat_at))
        );
    }
}
