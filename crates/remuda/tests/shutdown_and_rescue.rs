//! Graceful shutdown finishes or releases every running job; a dead worker's jobs are
//! rescued and its late completion is rejected.

mod common;

use common::{error_code, fast_config, setup, start, start_with, Add, Misbehave, MisbehaveArgs};
use remuda::{JobContext, JobState, NewJob, Task, TaskError, TaskOptions, Worker, WorkerConfig};
use std::time::Duration;

/// Sleeps for the given milliseconds, no timeout.
struct Sleep;

impl Task for Sleep {
    const KIND: &'static str = "sleep";
    type Args = u64;
    type Output = u64;

    fn options() -> TaskOptions {
        TaskOptions::default().max_attempts(3)
    }

    // stops when asked (the misbehaving task in common/ does not, and is aborted instead)
    async fn run(&self, ctx: JobContext, ms: u64) -> Result<u64, TaskError> {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(ms),
            _ = ctx.cancelled() => Err(TaskError::new("STOPPED", "asked to stop")),
        }
    }
}

/// Works until it sees a stop, then returns its partial count as a success; records the
/// reason it read. A later run (the stop no longer there) finishes at once.
struct Partial {
    reasons: std::sync::Arc<std::sync::Mutex<Vec<&'static str>>>,
}

impl Task for Partial {
    const KIND: &'static str = "partial";
    type Args = ();
    type Output = String;

    async fn run(&self, ctx: JobContext, _: ()) -> Result<String, TaskError> {
        if ctx.attempt > 1 || !self.reasons.lock().expect("lock").is_empty() {
            return Ok("whole".into());
        }
        let mut steps = 0;
        loop {
            if let Some(reason) = ctx.stop_reason() {
                self.reasons.lock().expect("lock").push(reason.as_str());
                return Ok(format!("partial after {steps} steps"));
            }
            steps += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn wait_for_running(client: &remuda::Client, n: usize) {
    for _ in 0..800 {
        let running = client
            .jobs(&remuda::JobFilter {
                state: Some(JobState::Running),
                ..Default::default()
            })
            .await
            .expect("list");
        if running.len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{n} jobs never started running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_short_jobs_finish_and_releases_long_ones_without_burning_an_attempt() {
    let (_db, client) = setup().await;
    let short = client.enqueue::<Sleep>(&300).await.expect("enqueue");
    let long = client.enqueue::<Sleep>(&60_000).await.expect("enqueue");
    let config = WorkerConfig {
        shutdown_timeout: Duration::from_millis(1000),
        ..fast_config()
    };
    let worker = start(Worker::new(client.clone()).config(config).register(Sleep));
    wait_for_running(&client, 2).await;
    let report = worker.shutdown().await;
    assert_eq!(report.completed, 1);
    assert_eq!(report.released, 1);

    let short = client.job(short).await.expect("lookup").expect("exists");
    assert_eq!(short.state, JobState::Completed);
    let long = client.job(long).await.expect("lookup").expect("exists");
    assert_eq!(
        long.state,
        JobState::Available,
        "released for another worker"
    );
    assert_eq!(long.attempt, 0, "the interrupted attempt is not counted");
    assert!(long.errors.is_empty());
    assert!(
        client.workers().await.expect("workers").is_empty(),
        "the worker left the registry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_saw_the_shutdown_is_given_back_whatever_it_returned_and_counted_once() {
    let (_db, client) = setup().await;
    let id = client.enqueue::<Partial>(&()).await.expect("enqueue");
    let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let config = WorkerConfig {
        shutdown_timeout: Duration::from_millis(300),
        ..fast_config()
    };
    let task = Partial {
        reasons: reasons.clone(),
    };
    let worker = start(Worker::new(client.clone()).config(config).register(task));
    wait_for_running(&client, 1).await;
    let report = worker.shutdown().await;
    assert_eq!(*reasons.lock().expect("lock"), vec!["shutdown"]);
    assert_eq!(
        (report.completed, report.released),
        (0, 1),
        "each job counted once"
    );
    let job = client.job(id).await.expect("lookup").expect("exists");
    assert_eq!(
        job.state,
        JobState::Available,
        "the partial result was not stored"
    );
    assert_eq!(job.attempt, 0, "the cut-short attempt is not counted");
    assert!(job.result.is_none());

    let task = Partial { reasons };
    let _worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(task),
    );
    let job = client
        .wait(id, Duration::from_secs(15))
        .await
        .expect("run again");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.attempt, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_reads_cancel_as_its_stop_reason() {
    let (_db, client) = setup().await;
    let id = client.enqueue::<Partial>(&()).await.expect("enqueue");
    let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let task = Partial {
        reasons: reasons.clone(),
    };
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(task),
    );
    wait_for_running(&client, 1).await;
    client.cancel(id).await.expect("cancel");
    let job = client
        .wait(id, Duration::from_secs(15))
        .await
        .expect("ends");
    assert_eq!(job.state, JobState::Cancelled);
    for _ in 0..200 {
        if !reasons.lock().expect("lock").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*reasons.lock().expect("lock"), vec!["cancel"]);
    let report = worker.shutdown().await;
    assert_eq!(report.released, 0, "a cancelled job is not given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_dead_worker_are_rescued_and_its_late_completion_is_rejected() {
    let (db, client) = setup().await;
    let retried = client.enqueue::<Sleep>(&10).await.expect("enqueue");
    let last_try = client
        .insert(NewJob::for_task::<Sleep>(&10).expect("job").max_attempts(1))
        .await
        .expect("insert");
    // A worker that claimed both and then stopped heartbeating (as if it were killed).
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
         VALUES ('ghost', 'ghost', 'nowhere', 1, '{default}', '{sleep}', 1, 30000, now() - interval '1 hour');
         UPDATE remuda.jobs SET state = 'running', attempt = 1, max_attempts = coalesce(max_attempts, 3),
                worker_id = 'ghost', started_at = now();",
    )
    .await
    .expect("simulate a dead worker");

    let worker = start_with(&client, Sleep);
    let job = client
        .wait(retried, Duration::from_secs(15))
        .await
        .expect("rescued and run");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.attempt, 2);
    assert_eq!(job.errors.len(), 1);
    assert_eq!(job.errors[0].code, "WORKER_LOST");
    assert_eq!(job.errors[0].worker.as_deref(), Some("ghost"));

    let job = client
        .wait(last_try, Duration::from_secs(15))
        .await
        .expect("rescued");
    assert_eq!(job.state, JobState::Failed, "no attempts left");
    assert_eq!(error_code(&job), Some("WORKER_LOST"), "{:?}", job.result);
    // The ghost's late completion is refused by the guard.
    let late = conn
        .execute(
            "UPDATE remuda.jobs SET state = 'completed' WHERE id = $1 AND state = 'running' AND worker_id = 'ghost' AND attempt = 1",
            &[&retried],
        )
        .await
        .expect("guarded update");
    assert_eq!(late, 0);
    assert!(
        client
            .workers()
            .await
            .expect("workers")
            .iter()
            .all(|w| w.id != "ghost"),
        "the dead worker was pruned"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_job_stops_it_and_waiters_see_cancelled() {
    let (_db, client) = setup().await;
    let id = client
        .enqueue::<Misbehave>(&MisbehaveArgs::Sleep { ms: 250 })
        .await
        .expect("enqueue");
    let config = fast_config();
    let worker = start(Worker::new(client.clone()).config(config).register(Sleep));
    // the worker does not run misbehave: cancel it while available
    assert_eq!(
        client.cancel(id).await.expect("cancel"),
        JobState::Available
    );
    let job = client
        .wait(id, Duration::from_secs(5))
        .await
        .expect("final");
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(
        client
            .cancel(id)
            .await
            .expect("cancelling twice is no error"),
        JobState::Cancelled
    );
    let completed = client.enqueue::<Sleep>(&1).await.expect("enqueue");
    client
        .wait(completed, Duration::from_secs(10))
        .await
        .expect("ran");
    let err = client
        .cancel(completed)
        .await
        .expect_err("already completed");
    assert!(err.to_string().contains("cannot cancel"), "{err}");

    let long = client.enqueue::<Sleep>(&60_000).await.expect("enqueue");
    wait_for_running(&client, 1).await;
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.wait(long, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        client.cancel(long).await.expect("cancel"),
        JobState::Running
    );
    let job = waiter.await.expect("join").expect("waited");
    assert_eq!(job.state, JobState::Cancelled);
    // the worker stopped the task: shutdown is immediate, nothing to release
    let started = std::time::Instant::now();
    let report = worker.shutdown().await;
    assert_eq!(report.released, 0);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(
        client.cancel(999_999).await,
        Err(remuda::Error::NotFound(999_999))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_retry_revives_a_failed_job_with_one_more_attempt() {
    let (_db, client) = setup().await;
    let id = client
        .enqueue::<Misbehave>(&MisbehaveArgs::Permanent)
        .await
        .expect("enqueue");
    let worker = start_with(&client, Misbehave);
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("failed");
    assert_eq!(
        (job.state, job.attempt, job.max_attempts),
        (JobState::Failed, 1, Some(1))
    );
    assert_eq!(client.retry(id).await.expect("retry"), JobState::Failed);
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("failed again");
    assert_eq!(
        (job.state, job.attempt, job.max_attempts),
        (JobState::Failed, 2, Some(2))
    );
    assert_eq!(job.errors.len(), 2, "history kept");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_not_started_before_its_deadline_expires() {
    let (_db, client) = setup().await;
    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(100);
    let id = client
        .insert(
            NewJob::new("nobody_runs_this", &1)
                .expect("job")
                .expires_at(soon),
        )
        .await
        .expect("insert");
    let worker = start_with(&client, Sleep);
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("expired");
    assert_eq!(job.state, JobState::Expired);
    assert_eq!(
        error_code(&job),
        Some("DEADLINE_EXCEEDED"),
        "{:?}",
        job.result
    );
    worker.shutdown().await;
}

/// The promptness of a promotion is a running leader's: the job is due once the worker is
/// set up and leads. (Enqueued before the worker started, a job due 0.7 s later was once
/// promoted 1.05 s late: the worker's own start-up, under load, was inside the measured
/// window, and no worker promotes before it is set up.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_jobs_wait_for_their_time_then_run() {
    let (_db, client) = setup().await;
    let worker = start_with(&client, Sleep);
    common::until_led(&client).await;
    let id = client
        .insert(
            NewJob::for_task::<Sleep>(&1)
                .expect("job")
                .delay(Duration::from_millis(700)),
        )
        .await
        .expect("insert");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        client.job(id).await.expect("lookup").expect("exists").state,
        JobState::Scheduled
    );
    let job = client.wait(id, Duration::from_secs(10)).await.expect("ran");
    assert_eq!(job.state, JobState::Completed);
    let started = job.started_at.expect("started");
    assert!(started >= job.run_at, "did not start before run_at");
    assert!(
        started - job.run_at < chrono::Duration::milliseconds(500),
        "promoted promptly: {}",
        started - job.run_at
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_while_holding_unwritten_jobs_leaves_them_to_the_rescuer() {
    let (db, client) = setup().await;
    let first = start_with(&client, Sleep);
    let mut first_id = None;
    for _ in 0..100 {
        if let Some(w) = client.workers().await.expect("workers").first() {
            first_id = Some(w.id.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_id = first_id.expect("the first worker registered");
    // A job the first worker holds but whose outcome it never wrote (as when its completer
    // fails): it must not be orphaned when that worker deregisters.
    let id = client
        .insert(
            NewJob::for_task::<Sleep>(&1)
                .expect("job")
                .run_at(chrono::Utc::now() + chrono::Duration::hours(1)),
        )
        .await
        .expect("insert");
    let pool = db.database().expect("pool");
    pool.conn()
        .await
        .expect("conn")
        .execute(
            "UPDATE remuda.jobs SET state = 'running', attempt = 1, worker_id = $1, started_at = now() WHERE id = $2",
            &[&first_id, &id],
        )
        .await
        .expect("simulate a held job");
    first.shutdown().await;
    let listed = client.workers().await.expect("workers");
    assert!(
        listed.iter().all(|w| w.id != first_id || !w.alive),
        "no longer listed as live: {listed:?}"
    );
    assert!(
        listed.iter().any(|w| w.id == first_id),
        "still listed, as dead, while a job points at it: {listed:?}"
    );
    let kept: i64 = pool
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT count(*) FROM remuda.workers WHERE id = $1",
            &[&first_id],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(kept, 1, "the row stays while a job points at it");

    let second = start_with(&client, Sleep);
    let job = client
        .wait(id, Duration::from_secs(15))
        .await
        .expect("rescued and run");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.errors[0].code, "WORKER_LOST");
    second.shutdown().await;
    assert!(
        client
            .workers()
            .await
            .expect("workers")
            .iter()
            .all(|w| w.id != first_id),
        "pruned after the rescue"
    );
}

/// Makes the first `refused` deregistrations of workers fail as a server that is starting up
/// refuses them (SQLSTATE 57P03); a sequence counts them, as a failed statement rolls back.
async fn refuse_deregistrations(client: &remuda::Client, refused: i64) {
    let conn = client.database().conn().await.expect("conn");
    conn.batch_execute(&format!(
        "CREATE SEQUENCE refusals;
         CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF nextval('refusals') <= {refused} THEN
                 RAISE EXCEPTION 'the database system is starting up' USING ERRCODE = '57P03';
             END IF;
             RETURN OLD;
         END $$;
         CREATE TRIGGER refuse BEFORE DELETE ON remuda.workers
             FOR EACH ROW EXECUTE FUNCTION refuse();"
    ))
    .await
    .expect("trigger");
}

async fn registered(client: &remuda::Client) -> i64 {
    let conn = client.database().conn().await.expect("conn");
    conn.query_one("SELECT count(*) FROM remuda.workers", &[])
        .await
        .expect("count")
        .get(0)
}

/// Once a CLI worker stopped right after a database restart exited non-zero: its
/// deregistration met the restarted server's first refusals and was its only step whose
/// failure failed the worker. Forced here: the first two deregistrations are refused, the
/// worker tries again and leaves; when every one is refused, it still stops cleanly and its
/// row is left to be declared dead and pruned.
/// Starts a worker whose first `refused` deregistrations are refused, stops it, and says
/// whether it stopped cleanly and how many workers are still registered after.
async fn stop_with_refused_goodbyes(refused: i64) -> (bool, i64) {
    let (_db, client) = setup().await;
    refuse_deregistrations(&client, refused).await;
    let worker = start_with(&client, Add);
    common::until(Duration::from_secs(10), || async {
        registered(&client).await == 1
    })
    .await;
    worker.stop.cancel();
    let report = worker.handle.await.expect("worker task");
    (report.is_ok(), registered(&client).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_deregistration_is_refused_tries_again_and_still_stops_cleanly() {
    let (clean, left) = stop_with_refused_goodbyes(2).await;
    assert!(clean, "stopped cleanly");
    assert_eq!(left, 0, "it left on the third try");
    let (clean, left) = stop_with_refused_goodbyes(i64::MAX).await;
    assert!(clean, "a refused goodbye is no failure");
    assert_eq!(left, 1, "left to be declared dead");
}
