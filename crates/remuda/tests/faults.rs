//! Fault injection against a real PostgreSQL, with the faults made for real: the database
//! crashes (`pg_ctl stop -m immediate`) and comes back, a worker is cut off from it by a TCP
//! proxy that swallows its traffic, a job outlives the rescue threshold many times over.
//! Tests that stop or cut off the database run against a private cluster of their own.
//! (Process kills and crash loops are in the CLI's `tests/faults.rs`.)

mod common;

use common::{fast_config, setup, start};
use remuda::testing::PrivateCluster;
use remuda::{
    Client, JobContext, JobState, NewJob, Task, TaskError, TaskOptions, Worker, WorkerConfig,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// One execution of a job: which worker ran it and when it started and ended (ended also
/// when the attempt was aborted: the record is completed on drop).
#[derive(Clone, Debug)]
struct Execution {
    job: i64,
    worker: String,
    start: Instant,
    end: Option<Instant>,
}

/// Every execution, in start order.
type Log = Arc<Mutex<Vec<Execution>>>;

/// Closes an execution's record when the attempt ends, however it ends.
struct Recorder {
    log: Log,
    index: usize,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Ok(mut log) = self.log.lock() {
            log[self.index].end = Some(Instant::now());
        }
    }
}

/// Sleeps for its argument in milliseconds, ignoring cancellation (so that only an abort
/// stops it), and records each execution.
struct Stint {
    log: Log,
}

impl Task for Stint {
    const KIND: &'static str = "stint";
    type Args = u64;
    type Output = u64;

    fn options() -> TaskOptions {
        TaskOptions::default().max_attempts(5)
    }

    async fn run(&self, ctx: JobContext, ms: u64) -> Result<u64, TaskError> {
        let index = {
            let mut log = self.log.lock().expect("log");
            log.push(Execution {
                job: ctx.id,
                worker: ctx.worker_id.to_string(),
                start: Instant::now(),
                end: None,
            });
            log.len() - 1
        };
        let _recorder = Recorder {
            log: self.log.clone(),
            index,
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(ms)
    }
}

fn executions_per_job(log: &Log) -> HashMap<i64, usize> {
    let mut counts = HashMap::new();
    for e in log.lock().expect("log").iter() {
        *counts.entry(e.job).or_insert(0) += 1;
    }
    counts
}

/// Asserts that no job ever ran twice at the same moment.
fn assert_never_concurrent(log: &Log) {
    let log = log.lock().expect("log");
    for (i, a) in log.iter().enumerate() {
        for b in &log[i + 1..] {
            if a.job != b.job {
                continue;
            }
            let a_end = a.end.expect("every execution ended");
            let b_end = b.end.expect("every execution ended");
            assert!(
                a_end <= b.start || b_end <= a.start,
                "job {} ran on {} and {} at the same time: {a:?} / {b:?}",
                a.job,
                a.worker,
                b.worker
            );
        }
    }
}

/// Records every update of a job that was already final: a double finalization.
async fn install_audit(client: &Client) {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .batch_execute(
            "CREATE TABLE public.refinalized (id bigint, old_state text, new_state text, at timestamptz DEFAULT now());
             CREATE FUNCTION public.audit_final() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO public.refinalized (id, old_state, new_state) VALUES (OLD.id, OLD.state, NEW.state);
                 RETURN NEW;
             END $$;
             CREATE TRIGGER audit_final AFTER UPDATE ON remuda.jobs FOR EACH ROW
                 WHEN (OLD.state IN ('completed', 'failed', 'cancelled', 'expired'))
                 EXECUTE FUNCTION public.audit_final();",
        )
        .await
        .expect("audit trigger");
}

async fn refinalized(client: &Client) -> i64 {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one("SELECT count(*) FROM public.refinalized", &[])
        .await
        .expect("count")
        .get(0)
}

async fn count_in(client: &Client, state: &str) -> i64 {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT count(*) FROM remuda.jobs WHERE state = $1::text::remuda.job_state",
            &[&state],
        )
        .await
        .expect("count")
        .get(0)
}

/// Polls until `state` holds `n` jobs, or panics after `limit`.
async fn wait_for_count(client: &Client, state: &str, n: i64, limit: Duration) {
    let started = Instant::now();
    loop {
        if let Ok(c) = tokio::time::timeout(Duration::from_secs(2), count_in(client, state)).await {
            if c == n {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{c} jobs {state}, expected {n}, after {limit:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn enqueue_stints(client: &Client, ms: u64, n: usize) -> Vec<i64> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|_| NewJob::for_task::<Stint>(&ms).expect("job"))
        .collect();
    client.insert_many(&jobs).await.expect("enqueue")
}

/// A TCP proxy to a Unix socket that the test can cut: while cut, bytes are held back in both
/// directions (the connection stays open but silent, like a network partition) and new
/// connections hang; restored, everything held is delivered.
struct Proxy {
    port: u16,
    cut: watch::Sender<bool>,
}

impl Proxy {
    async fn start(target: PathBuf) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (cut, watching) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let target = target.clone();
                let watching = watching.clone();
                tokio::spawn(async move {
                    let Ok(unix) = tokio::net::UnixStream::connect(&target).await else {
                        return;
                    };
                    let (tcp_read, tcp_write) = tcp.into_split();
                    let (unix_read, unix_write) = unix.into_split();
                    tokio::join!(
                        pipe(tcp_read, unix_write, watching.clone()),
                        pipe(unix_read, tcp_write, watching)
                    );
                });
            }
        });
        Proxy { port, cut }
    }

    fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=remuda dbname=remuda connect_timeout=2",
            self.port
        )
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

async fn pipe(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: impl tokio::io::AsyncWrite + Unpin,
    mut cut: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while *cut.borrow_and_update() {
            if cut.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Fault 3: a worker cut off from the database for longer than the rescue threshold stops
/// its own jobs before they are rescued; another worker rescues and completes them; when the
/// link returns, the cut-off worker's late completions are rejected and counted, and no job
/// is finalized twice or ever runs on two workers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_fences_itself_and_its_late_writes_are_rejected() {
    let cluster = PrivateCluster::start().await.expect("private cluster");
    let client = Client::connect(&cluster.conninfo()).await.expect("client");
    install_audit(&client).await;
    let proxy = Proxy::start(cluster.socket()).await;
    let log: Log = Arc::default();
    // fences itself 1.5 s after its last heartbeat, aborts its jobs 0.25 s later; declared
    // dead 2 s after it
    let settings = WorkerConfig {
        heartbeat_interval: Duration::from_millis(500),
        rescue_after: Duration::from_secs(2),
        cancel_grace: Duration::from_secs(5),
        concurrency: 8,
        ..fast_config()
    };
    let cut_off_client = Client::connect(&proxy.conninfo())
        .await
        .expect("client through the proxy");
    let cut_off = start(
        Worker::new(cut_off_client)
            .config(WorkerConfig {
                maintenance: false,
                ..settings.clone()
            })
            .register(Stint { log: log.clone() }),
    );
    // four jobs that end during the cut (their outcomes cannot be written) and two that
    // outlive the fencing moment (they are aborted)
    let mut ids = enqueue_stints(&client, 800, 4).await;
    ids.extend(enqueue_stints(&client, 3000, 2).await);
    wait_for_count(&client, "running", 6, Duration::from_secs(10)).await;
    proxy.set_cut(true);
    let cut_at = Instant::now();
    // heartbeats every 200 ms: on a loaded machine a 500 ms one can miss its 1.5 s margin,
    // and a worker that fences itself rightly gives back and reruns its jobs (once seen as a
    // job run three times)
    let healthy = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                heartbeat_interval: Duration::from_millis(200),
                ..settings.clone()
            })
            .register(Stint { log: log.clone() }),
    );
    // the healthy worker declares the other dead after 2 s of silence and runs its jobs
    wait_for_count(&client, "completed", 4, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(cut_at.elapsed())).await;
    proxy.set_cut(false);
    wait_for_count(&client, "completed", 6, Duration::from_secs(20)).await;
    // the returning worker hears it was declared dead, registers again and works on
    let more = enqueue_stints(&client, 10, 20).await;
    wait_for_count(&client, "completed", 26, Duration::from_secs(20)).await;
    let cut_off_report = cut_off.shutdown().await;
    let healthy_report = healthy.shutdown().await;

    assert!(
        cut_off_report.rejected >= 4,
        "the four completions made during the cut were rejected: {cut_off_report:?}"
    );
    assert_eq!(refinalized(&client).await, 0, "no job was finalized twice");
    assert_never_concurrent(&log);
    let counts = executions_per_job(&log);
    for id in &ids {
        let job = client.job(*id).await.expect("lookup").expect("exists");
        assert_eq!(job.state, JobState::Completed, "{job:?}");
        assert_eq!(job.attempt, 2, "one lost attempt, one good: {job:?}");
        let codes: Vec<&str> = job.errors.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(codes, ["WORKER_LOST"], "{job:?}");
        assert_eq!(counts.get(id), Some(&2), "ran on each worker once");
    }
    for id in &more {
        assert_eq!(counts.get(id), Some(&1));
    }
    assert!(healthy_report.completed >= 6, "{healthy_report:?}");
}

/// Fault 2: the database crashes in the middle of a run and is back 10 s later. The workers
/// keep their jobs, hold their outcomes, stop claiming, and carry on by themselves: every job
/// ends completed, none is lost, none is stuck, and (the outage being shorter than the
/// rescue threshold) none runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_ride_out_a_database_crash() {
    let cluster = PrivateCluster::start().await.expect("private cluster");
    let client = Client::connect(&cluster.conninfo()).await.expect("client");
    let log: Log = Arc::default();
    let n = 3000;
    let ids = enqueue_stints(&client, 3, n).await;
    let settings = WorkerConfig {
        heartbeat_interval: Duration::from_secs(1),
        rescue_after: Duration::from_secs(30),
        concurrency: 16,
        ..fast_config()
    };
    let workers: Vec<_> = (0..2)
        .map(|_| {
            start(
                Worker::new(client.clone())
                    .config(settings.clone())
                    .register(Stint { log: log.clone() }),
            )
        })
        .collect();
    wait_until_completed_at_least(&client, 500).await;
    cluster.crash().await.expect("crash the database");
    tokio::time::sleep(Duration::from_secs(10)).await;
    for w in &workers {
        assert!(
            !w.handle.is_finished(),
            "a worker gave up during the outage"
        );
    }
    cluster.restart().await.expect("restart the database");
    wait_for_count(&client, "completed", n as i64, Duration::from_secs(60)).await;
    for w in workers {
        w.shutdown().await;
    }
    for state in ["available", "running", "scheduled", "failed"] {
        assert_eq!(count_in(&client, state).await, 0, "jobs left {state}");
    }
    let counts = executions_per_job(&log);
    assert_eq!(counts.len(), n, "every job ran");
    let twice: Vec<_> = ids.iter().filter(|id| counts.get(id) != Some(&1)).collect();
    assert!(twice.is_empty(), "jobs run more than once: {twice:?}");
}

async fn wait_until_completed_at_least(client: &Client, n: i64) {
    let started = Instant::now();
    while count_in(client, "completed").await < n {
        assert!(started.elapsed() < Duration::from_secs(30), "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Fault 4: liveness is per worker, not a timer per job: a job running five times longer
/// than the rescue threshold on a healthy worker is never rescued and runs exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_job_on_a_healthy_worker_is_never_rescued() {
    let (_db, client) = setup().await;
    let log: Log = Arc::default();
    // rescue_after leaves 1.8 s of missed heartbeats before a worker fences itself: with
    // 0.8 s, a full test run on two busy cores once starved a heartbeat that long
    let config = WorkerConfig {
        heartbeat_interval: Duration::from_millis(200),
        rescue_after: Duration::from_secs(2),
        ..fast_config()
    };
    // two workers, both taking part in maintenance: either may be the leader
    let workers: Vec<_> = (0..2)
        .map(|_| {
            start(
                Worker::new(client.clone())
                    .config(config.clone())
                    .register(Stint { log: log.clone() }),
            )
        })
        .collect();
    let id = client.enqueue::<Stint>(&10_000).await.expect("enqueue");
    let job = client
        .wait(id, Duration::from_secs(30))
        .await
        .expect("finished");
    for w in workers {
        w.shutdown().await;
    }
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.attempt, 1);
    assert!(job.errors.is_empty(), "{:?}", job.errors);
    assert_eq!(executions_per_job(&log).get(&id), Some(&1));
}

/// Not ready yet: snoozes twice, then succeeds.
struct Poll;

impl Task for Poll {
    const KIND: &'static str = "poll";
    type Args = ();
    type Output = String;

    fn options() -> TaskOptions {
        TaskOptions::default().max_attempts(1)
    }

    async fn run(&self, ctx: JobContext, _: ()) -> Result<String, TaskError> {
        static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if call < 2 {
            return Err(TaskError::snooze(Duration::from_millis(100)));
        }
        Ok(format!("ready at call {call}, attempt {}", ctx.attempt))
    }
}

/// A snooze waits without burning an attempt: a job allowed one attempt snoozes twice and
/// still completes on that attempt, with nothing in its error history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snoozed_job_waits_without_using_an_attempt() {
    let (_db, client) = setup().await;
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(Poll),
    );
    // (its clock starts once the worker is set up: a start-up slowed by a loaded machine
    // once let the deadline pass before the first claim)
    common::until_led(&client).await;
    // a deadline to start that passes while it snoozes: it started in time, so it holds
    let id = client
        .insert(
            NewJob::for_task::<Poll>(&())
                .expect("job")
                .expires_at(chrono::Utc::now() + chrono::Duration::milliseconds(150)),
        )
        .await
        .expect("enqueue");
    let started = Instant::now();
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("finished");
    let report = worker.shutdown().await;
    assert_eq!(job.state, JobState::Completed, "{job:?}");
    assert_eq!(job.attempt, 1);
    assert!(job.errors.is_empty());
    assert_eq!(
        job.result,
        Some(remuda::JobResult::Ok(serde_json::json!(
            "ready at call 2, attempt 1"
        )))
    );
    assert!(started.elapsed() >= Duration::from_millis(200), "it waited");
    assert_eq!(report.completed, 1);
}

/// Dead letters stay queryable with every attempt's error, and a redrive re-runs exactly the
/// failed jobs of the queue and kind asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_jobs_are_redriven_in_bulk_by_queue_and_kind() {
    let (_db, client) = setup().await;
    let conn = client.database().conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (state, queue, kind, attempt, max_attempts, errors, finished_at)
         SELECT 'failed', q, k, 3, 3, '[{\"attempt\": 3, \"at\": \"2026-11-30T00:00:00Z\", \"code\": \"BOOM\", \"message\": \"x\"}]', now()
         FROM (VALUES ('mail', 'send'), ('mail', 'send'), ('mail', 'send'), ('mail', 'bounce'),
                      ('video', 'send')) AS v(q, k);
         INSERT INTO remuda.jobs (state, queue, kind, finished_at) VALUES ('completed', 'mail', 'send', now());",
    )
    .await
    .expect("seed");
    let retried = client
        .retry_many(JobState::Failed, Some("mail"), Some("send"))
        .await
        .expect("redrive");
    assert_eq!(retried, 3);
    let rest = client
        .retry_many(JobState::Failed, Some("mail"), None)
        .await
        .expect("redrive");
    assert_eq!(rest, 1, "the bounce job");
    let available = client
        .jobs(&remuda::JobFilter {
            state: Some(JobState::Available),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(available.len(), 4);
    for job in &available {
        assert_eq!(job.queue, "mail");
        assert_eq!(job.max_attempts, Some(4), "one more attempt");
        assert_eq!(job.errors.len(), 1, "history kept");
    }
    assert_eq!(count_in(&client, "failed").await, 1, "the video job stays");
    assert_eq!(count_in(&client, "completed").await, 1);
    let err = client
        .retry_many(JobState::Completed, None, None)
        .await
        .expect_err("completed jobs are not redriven");
    assert!(err.to_string().contains("only failed"), "{err}");
}

/// Runs attempt 1 and attempt 2 of a job each until the test opens its gate, counting runs;
/// a run asked to stop returns at once.
struct TwoRuns {
    started: [Arc<tokio::sync::Notify>; 2],
    open: [watch::Receiver<bool>; 2],
    runs: Arc<std::sync::atomic::AtomicUsize>,
}

impl Task for TwoRuns {
    const KIND: &'static str = "two_runs";
    type Args = ();
    type Output = i32;

    async fn run(&self, ctx: JobContext, _args: ()) -> Result<i32, TaskError> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let i = usize::from(ctx.attempt >= 2);
        self.started[i].notify_one();
        let mut open = self.open[i].clone();
        tokio::select! {
            _ = open.wait_for(|o| *o) => Ok(ctx.attempt),
            _ = ctx.cancelled() => Err(TaskError::new("STOPPED", "asked to stop")),
        }
    }
}

/// The interleaving behind a job once seen run three times at attempt 2: a worker's periodic
/// "which of my runs are no longer mine" is answered about a run (here: taken away as a
/// rescue would) after the same job was claimed again by the same worker. The answer is
/// about the old run and stops nothing; it used to stop the new run as if cancelled, which
/// was then given back and run a third time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_answer_about_an_ended_run_does_not_stop_the_next_run_of_the_job() {
    use remuda::testing::fault::hold;
    let (_db, client) = setup().await;
    let (open1, open1_rx) = watch::channel(false);
    let (open2, open2_rx) = watch::channel(false);
    let started = [
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    ];
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(TwoRuns {
                started: started.clone(),
                open: [open1_rx, open2_rx],
                runs: runs.clone(),
            }),
    );
    let answered = hold("reconcile");
    let acted = hold("reconciled");
    let id = client
        .insert(NewJob::new("two_runs", &()).expect("job").max_attempts(5))
        .await
        .expect("enqueue");
    started[0].notified().await;
    // taken from the worker as a rescue would, and not claimable until the answer is in
    client.pause_queue("default").await.expect("pause");
    common::take_from_worker(&client, id).await;
    answered.reached().await;
    // the same worker claims the job again: attempt 2, a new run under the same id
    client.resume_queue("default").await.expect("resume");
    started[1].notified().await;
    answered.release();
    acted.reached().await;
    acted.release();
    open1.send_replace(true);
    open2.send_replace(true);
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("ends");
    let report = worker.shutdown().await;
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Completed, 2),
        "{job:?}"
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "attempt 1, then attempt 2 once: {report:?}"
    );
    assert_eq!(report.released, 0, "{report:?}");
}
