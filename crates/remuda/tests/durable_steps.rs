//! Durable steps: a step recorded by one attempt is not run again by a later one (across a
//! retry, a durable sleep and a SIGKILL of the worker process), a failed step is not
//! recorded, a stale run's step is refused, and a job's steps follow it (kept by a retry,
//! dropped by `retry --fresh` and with the job when it is deleted).

mod common;

use common::{fast_config, setup, start, until};
use remuda::{Client, JobContext, JobState, NewJob, Task, TaskError, Worker};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// A charge as a payment provider answers it: fields in an order a map would not keep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Charge {
    zeta: String,
    amount: f64,
    alpha: u32,
}

/// Charges once per job, then fails its first attempt (after the charge) and succeeds on the
/// next; counts the charges made.
struct ChargeThenFail {
    charges: Arc<AtomicUsize>,
}

impl Task for ChargeThenFail {
    const KIND: &'static str = "charge_then_fail";
    type Args = ();
    type Output = Charge;

    async fn run(&self, ctx: JobContext, _: ()) -> Result<Charge, TaskError> {
        let charges = self.charges.clone();
        let charge = ctx
            .step("charge", || async move {
                charges.fetch_add(1, Ordering::SeqCst);
                Ok(Charge {
                    zeta: "ch_1".into(),
                    amount: 42.50,
                    alpha: 7,
                })
            })
            .await?;
        if ctx.attempt == 1 {
            return Err(TaskError::new("LATER", "the receipt service is down"));
        }
        Ok(charge)
    }
}

async fn run_to_end(client: &Client, id: i64) -> remuda::Job {
    client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("the job ends")
}

async fn enqueue(client: &Client, kind: &str) -> i64 {
    let job = NewJob::new(kind, &()).expect("job").max_attempts(3);
    client.insert(job).await.expect("insert")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_step_is_not_run_again_by_a_later_attempt_and_keeps_its_json() {
    let (_db, client) = setup().await;
    let charges = Arc::new(AtomicUsize::new(0));
    let worker = common::start_with(
        &client,
        ChargeThenFail {
            charges: charges.clone(),
        },
    );
    let id = enqueue(&client, "charge_then_fail").await;
    let job = run_to_end(&client, id).await;
    worker.shutdown().await;

    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.attempt, 2);
    assert_eq!(charges.load(Ordering::SeqCst), 1, "charged once");
    let steps = job.steps.expect("one job's view lists its steps");
    assert_eq!(steps.len(), 1);
    assert_eq!((steps[0].name.as_str(), steps[0].attempt), ("charge", 1));
    // stored as the task gave it: field order and the number's form kept
    let conn = client.database().conn().await.expect("conn");
    let text: String = conn
        .query_one(
            "SELECT output::text FROM remuda.steps WHERE job_id = $1",
            &[&id],
        )
        .await
        .expect("step row")
        .get(0);
    assert_eq!(text, r#"{"zeta":"ch_1","amount":42.5,"alpha":7}"#);
}

/// Fails its step on the first attempt; counts the step's runs.
struct FlakyStep {
    runs: Arc<AtomicUsize>,
}

impl Task for FlakyStep {
    const KIND: &'static str = "flaky_step";
    type Args = ();
    type Output = usize;

    async fn run(&self, ctx: JobContext, _: ()) -> Result<usize, TaskError> {
        let runs = self.runs.clone();
        let attempt = ctx.attempt;
        ctx.step("send", || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            match attempt {
                1 => Err(TaskError::new("SMTP_DOWN", "no answer")),
                n => Ok(n as usize),
            }
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_fails_is_not_recorded_and_runs_again_on_the_retry() {
    let (_db, client) = setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let worker = common::start_with(&client, FlakyStep { runs: runs.clone() });
    let id = enqueue(&client, "flaky_step").await;
    let job = run_to_end(&client, id).await;
    worker.shutdown().await;

    assert_eq!(job.state, JobState::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(job.errors.len(), 1);
    assert_eq!(job.errors[0].code, "SMTP_DOWN");
    let steps = job.steps.expect("steps");
    assert_eq!(steps.len(), 1);
    assert_eq!(
        steps[0].attempt, 2,
        "recorded by the attempt that succeeded"
    );
    assert_eq!(steps[0].output, serde_json::json!(2));
}

/// Runs its step only once the test opens the gate, and reports what the step returned.
struct GatedStep {
    started: Arc<Notify>,
    open: Arc<Notify>,
    said: mpsc::UnboundedSender<Result<u32, TaskError>>,
}

impl Task for GatedStep {
    const KIND: &'static str = "gated_step";
    type Args = ();
    type Output = u32;

    async fn run(&self, ctx: JobContext, _: ()) -> Result<u32, TaskError> {
        let (started, open) = (self.started.clone(), self.open.clone());
        let result = ctx
            .step("effect", || async move {
                started.notify_one();
                open.notified().await;
                Ok(1)
            })
            .await;
        let _ = self.said.send(result.clone());
        result
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_a_run_that_lost_its_job_while_the_step_waited_is_refused() {
    let (db, client) = setup().await;
    let (said, mut heard) = mpsc::unbounded_channel();
    let task = GatedStep {
        started: Arc::new(Notify::new()),
        open: Arc::new(Notify::new()),
        said,
    };
    let (started, open) = (task.started.clone(), task.open.clone());
    let worker = common::start_with(&client, task);
    let id = enqueue(&client, "gated_step").await;
    started.notified().await;

    // another transaction takes the job from this run (as a rescue would, but to a later
    // time so that no worker claims it again here) and holds the change uncommitted
    let (mut other, connection) = tokio_postgres::connect(db.conninfo(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let tx = other.transaction().await.expect("begin");
    tx.execute(
        "UPDATE remuda.jobs SET state = 'scheduled', run_at = now() + interval '1 hour',
                                worker_id = NULL, started_at = NULL WHERE id = $1",
        &[&id],
    )
    .await
    .expect("take the job");
    // the step ends and its record waits for the row
    open.notify_one();
    let conn = client.database().conn().await.expect("conn");
    until(Duration::from_secs(10), || async {
        conn.query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND query LIKE '%Record a batch of steps%'",
            &[],
        )
        .await
        .map(|r| r.get::<_, i64>(0) == 1)
        .unwrap_or(false)
    })
    .await;
    tx.commit().await.expect("commit");

    let result = tokio::time::timeout(Duration::from_secs(10), heard.recv())
        .await
        .expect("the step answered")
        .expect("said");
    let error = result.expect_err("refused");
    assert_eq!(error.code, remuda::step::FENCED, "{error}");
    let stored: i64 = conn
        .query_one(
            "SELECT count(*) FROM remuda.steps WHERE job_id = $1",
            &[&id],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(stored, 0, "a stale run's step is not stored");
    worker.shutdown().await;
    let job = client.job(id).await.expect("job").expect("exists");
    assert_eq!(
        job.state,
        JobState::Scheduled,
        "the stale outcome was not written"
    );
}

/// Records a step, sleeps durably, records another; counts each step's runs.
struct SleepBetween {
    before: Arc<AtomicUsize>,
    after: Arc<AtomicUsize>,
}

impl Task for SleepBetween {
    const KIND: &'static str = "sleep_between";
    type Args = ();
    type Output = String;

    async fn run(&self, ctx: JobContext, _: ()) -> Result<String, TaskError> {
        let before = self.before.clone();
        ctx.step("before", || async move {
            before.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await?;
        ctx.sleep(Duration::from_millis(1500)).await?;
        let after = self.after.clone();
        ctx.step("after", || async move {
            after.fetch_add(1, Ordering::SeqCst);
            Ok("done".to_string())
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_sleep_gives_the_job_back_and_resumes_after_it_without_an_attempt() {
    let (_db, client) = setup().await;
    let task = SleepBetween {
        before: Arc::new(AtomicUsize::new(0)),
        after: Arc::new(AtomicUsize::new(0)),
    };
    let (before, after) = (task.before.clone(), task.after.clone());
    let worker = common::start_with(&client, task);
    let id = enqueue(&client, "sleep_between").await;
    // while it sleeps, the job waits as scheduled: no slot is held
    until(Duration::from_secs(10), || async {
        let job = client.job(id).await.ok().flatten();
        job.is_some_and(|j| j.state == JobState::Scheduled)
    })
    .await;
    assert_eq!(after.load(Ordering::SeqCst), 0, "still asleep");
    let job = run_to_end(&client, id).await;
    worker.shutdown().await;

    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.result, Some(remuda::JobResult::Ok("done".into())));
    assert_eq!(job.attempt, 1, "a sleep uses no attempt");
    assert_eq!(
        (before.load(Ordering::SeqCst), after.load(Ordering::SeqCst)),
        (1, 1)
    );
    let steps = job.steps.expect("steps");
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["before", "sleep-1", "after"]);
    let slept = steps[2].at - steps[1].at;
    assert!(
        slept >= chrono::Duration::milliseconds(1400),
        "resumed after the sleep: {slept}"
    );
}

/// Writes a step row for job `id` as a worker would have.
async fn record_step(client: &Client, id: i64, name: &str) {
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "INSERT INTO remuda.steps (job_id, name, attempt, output) VALUES ($1, $2, 1, '\"x\"')",
        &[&id, &name],
    )
    .await
    .expect("step");
}

async fn fail(client: &Client, id: i64) {
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'failed', attempt = 1, max_attempts = 1,
                                finished_at = now() WHERE id = $1",
        &[&id],
    )
    .await
    .expect("fail the job");
}

async fn step_names(client: &Client, id: i64) -> Vec<String> {
    let job = client.job(id).await.expect("job").expect("exists");
    job.steps
        .expect("steps")
        .into_iter()
        .map(|s| s.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_keeps_the_steps_and_a_fresh_retry_drops_them() {
    let (_db, client) = setup().await;
    let id = enqueue(&client, "nobody_runs_this").await;
    record_step(&client, id, "charge").await;
    fail(&client, id).await;

    assert_eq!(client.retry(id).await.expect("retry"), JobState::Failed);
    assert_eq!(step_names(&client, id).await, ["charge"]);

    fail(&client, id).await;
    let fresh = remuda::RetryOptions {
        fresh: true,
        ..Default::default()
    };
    assert_eq!(
        client.retry_with(id, fresh).await.expect("retry"),
        JobState::Failed
    );
    assert!(step_names(&client, id).await.is_empty());
    assert_eq!(
        client.job(id).await.expect("job").expect("exists").state,
        JobState::Available
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_retry_that_is_refused_keeps_the_steps() {
    let (_db, client) = setup().await;
    let id = enqueue(&client, "nobody_runs_this").await;
    record_step(&client, id, "charge").await;
    let fresh = remuda::RetryOptions {
        fresh: true,
        ..Default::default()
    };
    // waiting to run already: nothing to retry, nothing dropped
    let refused = client.retry_with(id, fresh).await.expect_err("available");
    assert!(
        matches!(refused, remuda::Error::WrongState { .. }),
        "{refused}"
    );
    assert_eq!(step_names(&client, id).await, ["charge"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_jobs_steps_go_with_it_and_no_other_jobs() {
    let (_db, client) = setup().await;
    let gone = enqueue(&client, "nobody_runs_this").await;
    let kept = enqueue(&client, "nobody_runs_this").await;
    record_step(&client, gone, "a").await;
    record_step(&client, gone, "b").await;
    record_step(&client, kept, "a").await;
    fail(&client, gone).await;
    client.delete(gone).await.expect("delete");

    let conn = client.database().conn().await.expect("conn");
    let left: Vec<(i64, String)> = conn
        .query("SELECT job_id, name FROM remuda.steps ORDER BY 1, 2", &[])
        .await
        .expect("steps")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(left, [(kept, "a".to_string())]);
}

/// The worker process the SIGKILL test kills: its step appends a line to the file in
/// `REMUDA_STEP_LOG`; on the first attempt it then says so in `REMUDA_STEP_READY` and hangs
/// until killed.
struct ChargeAndHang;

impl Task for ChargeAndHang {
    const KIND: &'static str = "charge_and_hang";
    type Args = ();
    type Output = String;

    async fn run(&self, ctx: JobContext, _: ()) -> Result<String, TaskError> {
        let log = std::env::var("REMUDA_STEP_LOG").unwrap_or_default();
        let charge = ctx
            .step("charge", || async move {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&log)
                    .map_err(|e| TaskError::new("LOG", e.to_string()))?;
                writeln!(file, "charged").map_err(|e| TaskError::new("LOG", e.to_string()))?;
                Ok(format!("ch_{}", std::process::id()))
            })
            .await?;
        if ctx.attempt == 1 {
            let ready = std::env::var("REMUDA_STEP_READY").unwrap_or_default();
            let _ = std::fs::write(ready, "");
            std::future::pending::<()>().await;
        }
        Ok(charge)
    }
}

/// A child process killed and waited for when dropped.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The worker process the SIGKILL test kills: the test binary run again for that one test,
/// with the database in `REMUDA_STEP_CHILD_DB`. It runs until it is killed.
async fn step_worker_process(conninfo: &str) {
    let client = Client::connect(conninfo).await.expect("client");
    let config = remuda::WorkerConfig {
        rescue_after: Duration::from_secs(1),
        heartbeat_interval: Duration::from_millis(200),
        ..fast_config()
    };
    let worker = Worker::new(client).config(config).register(ChargeAndHang);
    worker.run(std::future::pending()).await.expect("worker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_is_not_run_again_after_its_worker_process_is_killed() {
    if let Ok(conninfo) = std::env::var("REMUDA_STEP_CHILD_DB") {
        // this run of the test is its worker process
        return step_worker_process(&conninfo).await;
    }
    let (db, client) = setup().await;
    let dir = std::env::temp_dir().join(format!("remuda-steps-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (log, ready) = (dir.join("charges.log"), dir.join("ready"));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&ready);
    let id = enqueue(&client, "charge_and_hang").await;

    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "a_step_is_not_run_again_after_its_worker_process_is_killed",
            "--exact",
            "--nocapture",
        ])
        .env("REMUDA_STEP_CHILD_DB", db.conninfo())
        .env("REMUDA_STEP_LOG", &log)
        .env("REMUDA_STEP_READY", &ready)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("worker process");
    // killed however this test ends: a panic below must not leave the worker running
    let mut child = KilledOnDrop(child);
    until(Duration::from_secs(30), || {
        let exited = child.0.try_wait().ok().flatten();
        assert!(
            exited.is_none(),
            "the worker process exited early: {exited:?}"
        );
        async { ready.exists() }
    })
    .await;
    let child_pid = child.0.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child_pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL");
    let _ = child.0.wait();
    let first = client.job(id).await.expect("job").expect("exists");
    assert_eq!(first.state, JobState::Running, "killed mid-run");

    // another worker rescues the job; its attempt finds the step recorded
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(ChargeAndHang),
    );
    let job = run_to_end(&client, id).await;
    worker.shutdown().await;
    let charges = std::fs::read_to_string(&log).expect("log");
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.attempt, 2);
    assert_eq!(charges.lines().count(), 1, "charged once: {charges:?}");
    let expected = format!("ch_{child_pid}");
    assert_eq!(job.result, Some(remuda::JobResult::Ok(expected.into())));
}
