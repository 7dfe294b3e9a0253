//! Retries: backoff then success with every attempt's error kept; errors that are not
//! retryable fail at once; panics and timeouts become errors and the worker keeps going.

mod common;

use common::{
    error_code, fast_config, setup, start, start_with, Flaky, FlakyArgs, Misbehave, MisbehaveArgs,
};
use remuda::{JobResult, JobState, Worker, WorkerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_backs_off_retries_and_succeeds_keeping_every_error() {
    let (_db, client) = setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let id = client
        .enqueue::<Flaky>(&FlakyArgs {
            succeed_on: 3,
            code: "FLAKY".into(),
        })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Flaky { runs: runs.clone() });
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("finished");
    assert_eq!(job.state, JobState::Completed, "{job:?}");
    assert_eq!(job.result, Some(JobResult::Ok("ok on attempt 3".into())));
    assert_eq!(job.attempt, 3);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(job.errors.len(), 2, "{:?}", job.errors);
    for (i, error) in job.errors.iter().enumerate() {
        assert_eq!(error.attempt, i as i32 + 1);
        assert_eq!(error.code, "FLAKY");
        assert_eq!(error.message, format!("attempt {} failed", i + 1));
        assert_eq!(error.data, Some(serde_json::json!({"attempt": i + 1})));
        assert!(error.worker.as_deref().is_some_and(|w| !w.is_empty()));
    }
    // the backoff separated the attempts: at least 50 ms (100 ms with jitter) between them
    let gap = job.errors[1].at - job.errors[0].at;
    assert!(gap >= chrono::Duration::milliseconds(50), "gap {gap}");
    let report = worker.shutdown().await;
    assert_eq!((report.retried, report.completed), (2, 1));
}

/// Retries due sooner than the promotion's next tick run when due: the worker that wrote them
/// promotes them itself (Flaky backs off 100 ms, then 200 ms, each jittered down to half).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_due_before_the_next_promotion_runs_after_its_delay() {
    let (_db, client) = setup().await;
    let id = client
        .enqueue::<Flaky>(&FlakyArgs {
            succeed_on: 3,
            code: "FLAKY".into(),
        })
        .await
        .expect("enqueue");
    let config = WorkerConfig {
        promote_interval: Duration::from_secs(2),
        ..fast_config()
    };
    let task = Flaky {
        runs: Arc::new(AtomicUsize::new(0)),
    };
    let worker = start(Worker::new(client.clone()).config(config).register(task));
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("finished");
    assert_eq!(job.state, JobState::Completed, "{job:?}");
    let starts: Vec<_> = job
        .errors
        .iter()
        .skip(1)
        .filter_map(|e| e.started_at)
        .chain(job.started_at)
        .collect();
    let gaps: Vec<i64> = job
        .errors
        .iter()
        .zip(starts)
        .map(|(failed, next)| (next - failed.at).num_milliseconds())
        .collect();
    // 50–100 and 100–200 ms, not the promotion's next tick 2 s apart
    assert!(
        gaps.len() == 2 && gaps[0] >= 50 && gaps[1] >= 100 && gaps.iter().all(|g| *g < 600),
        "{gaps:?}"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_outside_retry_on_fails_at_once() {
    let (_db, client) = setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let id = client
        .enqueue::<Flaky>(&FlakyArgs {
            succeed_on: 3,
            code: "FATAL".into(),
        })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Flaky { runs: runs.clone() });
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.attempt, 1);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(error_code(&job), Some("FATAL"), "{:?}", job.result);
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_panics_and_timeouts_become_errors_and_the_worker_keeps_going() {
    let (_db, client) = setup().await;
    let permanent = client
        .enqueue::<Misbehave>(&MisbehaveArgs::Permanent)
        .await
        .expect("enqueue");
    let panics = client
        .enqueue::<Misbehave>(&MisbehaveArgs::Panic)
        .await
        .expect("enqueue");
    let slow = client
        .enqueue::<Misbehave>(&MisbehaveArgs::Sleep { ms: 5_000 })
        .await
        .expect("enqueue");
    let quick = client
        .enqueue::<Misbehave>(&MisbehaveArgs::Sleep { ms: 1 })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Misbehave);
    let code = |job: &remuda::Job| error_code(job).unwrap_or("no error").to_string();
    let job = client
        .wait(permanent, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(
        (job.state, code(&job)),
        (JobState::Failed, "BAD_INPUT".to_string())
    );
    let job = client
        .wait(panics, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(
        (job.state, code(&job)),
        (JobState::Failed, "PANIC".to_string())
    );
    assert!(
        job.errors[0].message.contains("deliberate panic"),
        "{:?}",
        job.errors
    );
    let job = client
        .wait(slow, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(
        (job.state, code(&job)),
        (JobState::Failed, "TIMEOUT".to_string())
    );
    let job = client
        .wait(quick, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(job.state, JobState::Completed, "the worker kept going");
    let report = worker.shutdown().await;
    assert_eq!((report.failed, report.completed), (3, 1));
}

/// A task whose call panics before it returns its future (a `DynTask` may do its work there).
struct PanicsWhenCalled;

impl remuda::DynTask for PanicsWhenCalled {
    fn run(
        self: Arc<Self>,
        _ctx: remuda::JobContext,
        _args: remuda::Jsonb,
    ) -> futures_util::future::BoxFuture<'static, Result<remuda::Jsonb, remuda::TaskError>> {
        panic!("deliberate panic in the call")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_panics_in_its_call_fails_with_panic_and_the_worker_keeps_going() {
    let (_db, client) = setup().await;
    let first = client
        .insert(remuda::NewJob::new("panics-when-called", &serde_json::json!({})).expect("job"))
        .await
        .expect("insert");
    let second = client
        .insert(remuda::NewJob::new("panics-when-called", &serde_json::json!({})).expect("job"))
        .await
        .expect("insert");
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register_dyn(
                "panics-when-called",
                remuda::TaskOptions::default().max_attempts(1),
                Arc::new(PanicsWhenCalled),
            ),
    );
    for id in [first, second] {
        let job = client
            .wait(id, Duration::from_secs(10))
            .await
            .expect("finished");
        assert_eq!(
            (job.state, error_code(&job).unwrap_or("no error")),
            (JobState::Failed, "PANIC")
        );
        assert!(
            job.errors[0]
                .message
                .contains("deliberate panic in the call"),
            "{:?}",
            job.errors
        );
    }
    let report = worker.shutdown().await;
    assert_eq!(report.failed, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_job_timeout_overrides_the_tasks() {
    let (_db, client) = setup().await;
    let job = remuda::NewJob::for_task::<Misbehave>(&MisbehaveArgs::Sleep { ms: 100 })
        .expect("job")
        .timeout(Duration::from_millis(20));
    let id = client.insert(job).await.expect("insert");
    let worker = start_with(&client, Misbehave);
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(job.errors[0].code, "TIMEOUT");
    assert!(job.errors[0].message.contains("20ms"), "{:?}", job.errors);
    worker.shutdown().await;
}
