//! Shared test helpers: tasks with observable behaviour and a worker that stops on demand.
#![allow(dead_code, missing_docs)]

use remuda::{
    Client, JobContext, Task, TaskError, TaskOptions, Worker, WorkerConfig, WorkerReport,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use remuda::testing::TestDatabase;

/// Fast settings for tests: quick polls, promotions and maintenance.
pub fn fast_config() -> WorkerConfig {
    WorkerConfig {
        poll_interval: Duration::from_millis(200),
        promote_interval: Duration::from_millis(50),
        maintenance_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(200),
        rescue_after: Duration::from_secs(2),
        shutdown_timeout: Duration::from_secs(5),
        cancel_grace: Duration::from_millis(300),
        ..WorkerConfig::default()
    }
}

/// A running worker and the handle to stop it.
pub struct Running {
    pub stop: CancellationToken,
    pub handle: JoinHandle<remuda::Result<WorkerReport>>,
}

impl Running {
    pub async fn shutdown(self) -> WorkerReport {
        self.stop.cancel();
        self.handle.await.expect("worker task").expect("worker ran")
    }
}

pub fn start(worker: Worker) -> Running {
    let stop = CancellationToken::new();
    let token = stop.clone();
    let handle = tokio::spawn(worker.run(async move { token.cancelled().await }));
    Running { stop, handle }
}

/// Adds two numbers.
pub struct Add;

#[derive(Serialize, Deserialize)]
pub struct AddArgs {
    pub a: i64,
    pub b: i64,
}

impl Task for Add {
    const KIND: &'static str = "add";
    type Args = AddArgs;
    type Output = i64;

    async fn run(&self, _ctx: JobContext, args: AddArgs) -> Result<i64, TaskError> {
        Ok(args.a + args.b)
    }
}

/// Fails with FLAKY until attempt `succeed_on`, counting runs.
pub struct Flaky {
    pub runs: Arc<AtomicUsize>,
}

#[derive(Serialize, Deserialize)]
pub struct FlakyArgs {
    pub succeed_on: i32,
    pub code: String,
}

impl Task for Flaky {
    const KIND: &'static str = "flaky";
    type Args = FlakyArgs;
    type Output = String;

    fn options() -> TaskOptions {
        TaskOptions::default()
            .max_attempts(5)
            .backoff(remuda::Backoff::Exponential {
                base: Duration::from_millis(100),
                max: Duration::from_secs(1),
                jitter: true,
            })
            .retry_on(["FLAKY", "TIMEOUT", "PANIC"])
    }

    async fn run(&self, ctx: JobContext, args: FlakyArgs) -> Result<String, TaskError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if ctx.attempt < args.succeed_on {
            return Err(
                TaskError::new(args.code, format!("attempt {} failed", ctx.attempt))
                    .with_data(serde_json::json!({"attempt": ctx.attempt})),
            );
        }
        Ok(format!("ok on attempt {}", ctx.attempt))
    }
}

/// Behaves as told: sleep, panic or fail permanently.
pub struct Misbehave;

#[derive(Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum MisbehaveArgs {
    Sleep { ms: u64 },
    Panic,
    Permanent,
}

impl Task for Misbehave {
    const KIND: &'static str = "misbehave";
    type Args = MisbehaveArgs;
    type Output = String;

    fn options() -> TaskOptions {
        TaskOptions::default()
            .max_attempts(1)
            .timeout(Duration::from_millis(300))
    }

    async fn run(&self, _ctx: JobContext, args: MisbehaveArgs) -> Result<String, TaskError> {
        match args {
            MisbehaveArgs::Sleep { ms } => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(format!("slept {ms}ms"))
            }
            MisbehaveArgs::Panic => panic!("deliberate panic"),
            MisbehaveArgs::Permanent => Err(TaskError::permanent("BAD_INPUT", "cannot be done")),
        }
    }
}

/// Holds each job until the test lets it go: signals `started`, then waits for `open`.
pub struct Gate {
    pub started: Arc<tokio::sync::Notify>,
    pub open: Arc<tokio::sync::Notify>,
}

impl Task for Gate {
    const KIND: &'static str = "gate";
    type Args = i64;
    type Output = i64;

    async fn run(&self, _ctx: JobContext, n: i64) -> Result<i64, TaskError> {
        self.started.notify_one();
        self.open.notified().await;
        Ok(n)
    }
}

/// Connects a client to a fresh test database.
pub async fn setup() -> (TestDatabase, Client) {
    let db = TestDatabase::new().await.expect("test database");
    let client = db.client().await.expect("client");
    (db, client)
}

/// Starts a worker with the fast test settings and one task.
pub fn start_with<T: Task>(client: &Client, task: T) -> Running {
    start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(task),
    )
}

/// [`start_with`], the worker running at most `slots` jobs at once.
pub fn start_with_slots<T: Task>(client: &Client, task: T, slots: usize) -> Running {
    start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: slots,
                ..fast_config()
            })
            .register(task),
    )
}

/// The error code of a job's `{"err": …}` result, if it has one.
pub fn error_code(job: &remuda::Job) -> Option<&str> {
    match &job.result {
        Some(remuda::JobResult::Err(e)) => Some(e.code.as_str()),
        _ => None,
    }
}

/// Polls `check` until it holds, failing the test after `within`.
pub async fn until<F, Fut>(within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + within;
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "not within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until a worker is set up and leads maintenance (so it claims and promotes): a test
/// that measures how soon something happens starts its clock after this, not during the
/// worker's start-up.
#[allow(dead_code)]
pub async fn until_led(client: &Client) {
    until(Duration::from_secs(20), || async {
        client
            .maintenance_status()
            .await
            .map(|s| s.leader.is_some())
            .unwrap_or(false)
    })
    .await;
}

/// Takes running job `id` from its worker as a rescue would, by hand: available again, no
/// worker. The worker's run goes on, its outcome stale.
pub async fn take_from_worker(client: &Client, id: i64) {
    let conn = client.database().conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'available', worker_id = NULL WHERE id = $1",
        &[&id],
    )
    .await
    .expect("take the job from its worker");
}

/// A fresh database with verification mode on.
#[allow(dead_code)]
pub async fn recording() -> (TestDatabase, Client) {
    let (db, client) = setup().await;
    remuda::verify::set_history(&db.database().expect("pool"), true)
        .await
        .expect("verification mode on");
    (db, client)
}

/// The checker's report on a test database, with 5 s of slack.
#[allow(dead_code)]
pub async fn findings(db: &TestDatabase) -> remuda::verify::Report {
    remuda::verify::check(&db.database().expect("pool"), Duration::from_secs(5))
        .await
        .expect("check")
}
