//! The Prometheus metrics of a client and its workers: enqueued, completed, failed, retried
//! and rescued jobs by queue and kind, wait, run and completion-lag histograms with one
//! observation per attempt, and the worker's gauges.

mod common;

use common::{setup, start_with};
use remuda::{JobContext, NewJob, Task, TaskError, TaskOptions};
use std::time::Duration;

/// Fails with a retryable error on its first attempt, permanently when asked, else succeeds.
struct Moody;

impl Task for Moody {
    const KIND: &'static str = "moody";
    type Args = String;
    type Output = ();

    fn options() -> TaskOptions {
        TaskOptions::default()
            .max_attempts(3)
            .backoff(remuda::Backoff::Fixed {
                delay: Duration::from_millis(10),
                jitter: false,
            })
    }

    async fn run(&self, ctx: JobContext, mood: String) -> Result<(), TaskError> {
        match mood.as_str() {
            "bad" => Err(TaskError::permanent("BAD", "always")),
            "flaky" if ctx.attempt == 1 => Err(TaskError::new("FLAKY", "first time")),
            _ => Ok(()),
        }
    }
}

/// The value of the sample `name` with exactly these labels (in this order) in `text`.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_are_counted_by_queue_and_kind_and_timed_once_each() {
    let (db, client) = setup().await;
    let jobs: Vec<NewJob> = ["fine", "fine", "bad", "flaky"]
        .iter()
        .map(|m| NewJob::for_task::<Moody>(&m.to_string()).expect("job"))
        .collect();
    let ids = client.insert_many(&jobs).await.expect("insert");
    // a job a dead worker held, rescued by this process's leader
    let conn = db
        .database()
        .expect("pool")
        .conn()
        .await
        .expect("connection");
    let ghost = client
        .insert(NewJob::for_task::<Moody>(&"fine".to_string()).expect("job"))
        .await
        .expect("insert");
    conn.batch_execute(&format!(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
         VALUES ('ghost', 'ghost', 'nowhere', 1, '{{default}}', '{{moody}}', 1, 30000, now() - interval '1 hour');
         UPDATE remuda.jobs SET state = 'running', attempt = 1, max_attempts = 3, worker_id = 'ghost', started_at = now()
         WHERE id = {ghost};"
    ))
    .await
    .expect("a dead worker");
    let worker = start_with(&client, Moody);
    for id in ids.iter().chain([&ghost]) {
        client
            .wait(*id, Duration::from_secs(15))
            .await
            .expect("it ends");
    }
    let text = client.metrics().encode();
    let labels = "queue=\"default\",kind=\"moody\"";
    assert_eq!(
        sample(&text, "remuda_jobs_enqueued_total", labels),
        Some(5.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "remuda_jobs_completed_total", labels),
        Some(4.0),
        "fine, fine, flaky, ghost: {text}"
    );
    assert_eq!(sample(&text, "remuda_jobs_failed_total", labels), Some(1.0));
    assert_eq!(
        sample(&text, "remuda_jobs_retried_total", labels),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "remuda_jobs_rescued_total", labels),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "remuda_job_run_seconds_count", labels),
        Some(6.0),
        "one per attempt"
    );
    assert_eq!(
        sample(&text, "remuda_job_wait_seconds_count", labels),
        Some(6.0)
    );
    let lag = text
        .lines()
        .find_map(|l| l.strip_prefix("remuda_completion_lag_seconds_count "))
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(lag, Some(6.0), "{text}");
    assert!(text.contains("remuda_worker_running{worker="), "{text}");
    assert!(
        text.contains("remuda_notifications_sent_total{worker="),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"));
    worker.shutdown().await;
    let after = client.metrics().encode();
    assert!(
        !after.contains("remuda_worker_running{"),
        "a stopped worker reports no gauges"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activity_of_the_last_hour_counts_each_attempt_once_in_its_queue_and_minute() {
    let (_db, client) = setup().await;
    assert_eq!(client.activity(60).await.expect("activity"), []);
    let jobs: Vec<NewJob> = ["fine", "fine", "bad", "flaky"]
        .iter()
        .map(|m| NewJob::for_task::<Moody>(&m.to_string()).expect("job"))
        .collect();
    let ids = client.insert_many(&jobs).await.expect("insert");
    let worker = start_with(&client, Moody);
    for id in &ids {
        client
            .wait(*id, Duration::from_secs(15))
            .await
            .expect("it ends");
    }
    // the worker adds its tallies with its heartbeats
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let seen = loop {
        let activity = client.activity(60).await.expect("activity");
        if activity.first().map(|a| a.completed) == Some(3) || std::time::Instant::now() > deadline
        {
            break activity;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    worker.shutdown().await;
    let after = client.activity(60).await.expect("activity");
    assert_eq!(after, seen, "the last write at shutdown adds nothing twice");
    let [queue] = after.as_slice() else {
        panic!("one queue: {after:?}");
    };
    assert_eq!(queue.queue, "default");
    assert_eq!(
        (queue.completed, queue.failed, queue.retried),
        (3, 1, 1),
        "fine, fine, flaky's second attempt; bad; flaky's first"
    );
    assert_eq!(queue.failure_rate, 0.25);
    assert_eq!(queue.minutes.len(), 60);
    let by_minute: i64 = queue.minutes.iter().map(|m| m.completed + m.failed).sum();
    assert_eq!(by_minute, 4);
    let minutes: Vec<_> = queue.minutes.iter().map(|m| m.minute).collect();
    assert!(minutes
        .windows(2)
        .all(|w| w[1] - w[0] == chrono::Duration::minutes(1)));
    let (p50, p95) = (
        queue.run_p50_ms.expect("run p50"),
        queue.run_p95_ms.expect("run p95"),
    );
    assert!(p50 > 0.0 && p50 <= p95 && p95 <= 1000.0, "{p50} {p95}");
    assert!(queue.wait_p50_ms.is_some());
    let err = client.activity(0).await.expect_err("refused");
    assert!(err.to_string().contains("give 1 to 10080"), "{err}");
}
