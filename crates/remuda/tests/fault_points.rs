//! The checker and the workflow model catch real defects: each fault point of the `testing`
//! feature (an outcome accepted from a stale claim, a transition written around the
//! recorder, a join decided early) is put into real workers or a real database, and the
//! class it belongs to is reported; the same scenario without the fault is clean.

mod common;

use common::{fast_config, findings, recording, start, start_with, Add, Gate, Misbehave};
use remuda::testing::fault::{decide_joins_early, heal, inject, Fault};
use remuda::verify::model::{decide, differences, Outcome, World};
use remuda::verify::Report;
use remuda::workflow::WorkflowSpec;
use remuda::Worker;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

fn gate() -> (Gate, Arc<Notify>, Arc<Notify>) {
    let (started, open) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let gate = Gate {
        started: started.clone(),
        open: open.clone(),
    };
    (gate, started, open)
}

/// The faults act on the whole process: the tests of this file run one at a time even when
/// they share one (`cargo test` runs them on threads of one process).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Worker A runs attempt 1 of a job and is held there; the job is taken from A as a rescue
/// would and worker B runs attempt 2; then A finishes late, then B. A's check of its runs
/// is held meanwhile: it would otherwise stop A's run (rightly) before its late outcome.
async fn late_outcome_of_a_stale_claim(fault: bool) -> (Report, i64) {
    let (db, client) = recording().await;
    let check = remuda::testing::fault::hold("reconcile");
    if fault {
        inject(Fault::AcceptStaleOutcomes);
    }
    let id = client.enqueue::<Gate>(&7).await.expect("enqueue");
    let (gate_a, started_a, open_a) = gate();
    // one slot: while attempt 1 is held, A claims nothing else
    let a = common::start_with_slots(&client, gate_a, 1);
    started_a.notified().await;
    common::take_from_worker(&client, id).await;
    let (gate_b, started_b, open_b) = gate();
    let b = start_with(&client, gate_b);
    started_b.notified().await;
    open_a.notify_one();
    check.release();
    a.shutdown().await;
    open_b.notify_one();
    b.shutdown().await;
    heal();
    (findings(&db).await, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_outcome_accepted_from_a_stale_claim_is_reported_accepted_twice() {
    let _serial = SERIAL.lock().await;
    let (report, id) = late_outcome_of_a_stale_claim(true).await;
    let stale: Vec<_> = report
        .accepted_twice
        .iter()
        .filter(|f| f.job == Some(id) && f.what.contains("stale outcome"))
        .collect();
    assert_eq!(stale.len(), 1, "{report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_late_outcome_is_rejected_by_the_guard_and_nothing_is_found() {
    let _serial = SERIAL.lock().await;
    let (report, _) = late_outcome_of_a_stale_claim(false).await;
    assert!(report.is_clean(), "{report:#?}");
}

async fn completion_around_the_recorder(fault: bool) -> (Report, i64) {
    let (db, client) = recording().await;
    if fault {
        inject(Fault::DropTransitions);
    }
    let id = client
        .enqueue::<Add>(&common::AddArgs { a: 1, b: 2 })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Add);
    client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("done");
    worker.shutdown().await;
    heal();
    (findings(&db).await, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transition_written_around_the_recorder_is_a_gap_in_the_path() {
    let _serial = SERIAL.lock().await;
    let (report, id) = completion_around_the_recorder(true).await;
    assert_eq!(report.illegal_transitions.len(), 1, "{report:#?}");
    assert_eq!(report.illegal_transitions[0].job, Some(id));
    let (report, _) = completion_around_the_recorder(false).await;
    assert!(report.is_clean(), "{report:#?}");
}

/// A job cancelled between its claim and its executor's start never has its task called: the
/// cancel, seen before the job was registered, is remembered; with no grace the job is then
/// stopped at once as it starts, and given back (its release leaves it cancelled). The
/// producer is held between the claim and the start until the dispatcher has seen the cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_between_its_claim_and_its_start_never_calls_its_task() {
    let _serial = SERIAL.lock().await;
    let (db, client) = recording().await;
    let claimed = remuda::testing::fault::hold("claimed");
    let seen = remuda::testing::fault::hold("cancel seen");
    let id = client.enqueue::<Gate>(&7).await.expect("enqueue");
    let (gate, started, open) = gate();
    let worker = start(
        Worker::new(client.clone())
            .config(remuda::WorkerConfig {
                cancel_grace: Duration::ZERO,
                ..fast_config()
            })
            .register(gate),
    );
    claimed.reached().await;
    client.cancel(id).await.expect("cancel");
    seen.reached().await;
    seen.release();
    claimed.release();
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("ended");
    assert_eq!(job.state, remuda::JobState::Cancelled);
    worker.shutdown().await;
    open.notify_one();
    let never_started = futures_util::poll!(std::pin::pin!(started.notified())).is_pending();
    assert!(
        never_started,
        "the task of a job cancelled before it started was called"
    );
    assert!(findings(&db).await.is_clean());
}

/// Whether the run a task is in was asked to stop, once the task has started.
type AskedToStop = Arc<std::sync::Mutex<Option<Box<dyn Fn() -> bool + Send>>>>;

/// A gate that also lets the test read whether the run it is in was asked to stop (its
/// `ctx.cancel`), so a stop is seen when it is given, not raced against the gate's opening.
struct WatchedGate {
    gate: Gate,
    asked: AskedToStop,
}

impl remuda::Task for WatchedGate {
    const KIND: &'static str = "gate";
    type Args = i64;
    type Output = i64;

    async fn run(&self, ctx: remuda::JobContext, n: i64) -> Result<i64, remuda::TaskError> {
        let token = ctx.cancel.clone();
        *self.asked.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Box::new(move || token.is_cancelled()));
        remuda::Task::run(&self.gate, ctx, n).await
    }
}

/// The cancel of attempt 1 of a job reaches its worker late (the dispatcher is held before it
/// acts on it): meanwhile attempt 1 ended (its outcome rejected: the job was cancelled), the
/// job was retried, and the same worker claimed it again. `early`: the late cancel is acted
/// on before attempt 2 is claimed (so it is remembered as a cancel of a job about to start),
/// else while attempt 2 runs. Either way attempt 2 is never asked to stop, and runs to its
/// end: the cancel named attempt 1.
async fn a_late_cancel_of_an_earlier_run(early: bool) {
    let (_db, client) = common::setup().await;
    let heard = remuda::testing::fault::hold("cancel heard");
    let seen = remuda::testing::fault::hold("cancel seen");
    let id = client.enqueue::<Gate>(&7).await.expect("enqueue");
    let (gate, started, open) = gate();
    let asked: AskedToStop = Arc::default();
    let task = WatchedGate {
        gate,
        asked: asked.clone(),
    };
    let worker = Worker::new(client.clone())
        .config(remuda::WorkerConfig {
            cancel_grace: Duration::from_secs(30),
            ..fast_config()
        })
        .register(task);
    let stats = worker.stats();
    let running = start(worker);
    started.notified().await;
    client.cancel(id).await.expect("cancel");
    heard.reached().await;
    open.notify_one();
    let rejected = async {
        while stats.rejected.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), rejected)
        .await
        .expect("attempt 1's outcome rejected");
    if early {
        heard.release();
        seen.reached().await;
        seen.release();
        client.retry(id).await.expect("retry");
        started.notified().await;
    } else {
        client.retry(id).await.expect("retry");
        started.notified().await;
        heard.release();
        seen.reached().await;
        seen.release();
    }
    let asked_to_stop = asked
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|asked| asked());
    assert_eq!(
        asked_to_stop,
        Some(false),
        "attempt 2 was asked to stop by the cancel of attempt 1"
    );
    open.notify_one();
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("ended");
    assert_eq!(job.state, remuda::JobState::Completed, "{job:?}");
    assert_eq!(job.attempt, 2);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_cancel_of_an_earlier_run_never_stops_the_next_run_on_the_same_worker() {
    let _serial = SERIAL.lock().await;
    a_late_cancel_of_an_earlier_run(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_cancel_remembered_before_the_next_run_is_claimed_never_stops_it() {
    let _serial = SERIAL.lock().await;
    a_late_cancel_of_an_earlier_run(true).await;
}

/// A task whose call itself (before its future exists) says so and blocks until `go`; its
/// future, once polled, records that its body ran.
struct CallBlocks {
    called: Arc<Notify>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    body_ran: Arc<std::sync::atomic::AtomicBool>,
}

impl remuda::DynTask for CallBlocks {
    fn run(
        self: Arc<Self>,
        _ctx: remuda::JobContext,
        _args: remuda::Jsonb,
    ) -> futures_util::future::BoxFuture<'static, Result<remuda::Jsonb, remuda::TaskError>> {
        self.called.notify_one();
        tokio::task::block_in_place(|| {
            let go = self.go.lock().unwrap_or_else(|p| p.into_inner());
            let _ = go.recv();
        });
        let body_ran = self.body_ran.clone();
        Box::pin(async move {
            body_ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(remuda::Jsonb("1".into()))
        })
    }
}

/// A job cancelled (with no grace: stopped at once) while its task is being called: the
/// attempt the call returns is never polled, so its body never runs. The call is held until
/// the dispatcher has seen the cancel and stopped the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_stopped_at_once_while_its_task_was_called_is_never_polled() {
    let _serial = SERIAL.lock().await;
    let (_db, client) = common::setup().await;
    let seen = remuda::testing::fault::hold("cancel seen");
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let task = Arc::new(CallBlocks {
        called: Arc::new(Notify::new()),
        go: std::sync::Mutex::new(go_rx),
        body_ran: Arc::new(std::sync::atomic::AtomicBool::new(false)),
    });
    let (called, body_ran) = (task.called.clone(), task.body_ran.clone());
    let job = remuda::NewJob::new("call_blocks", &serde_json::json!(1)).expect("job");
    let id = client.insert(job).await.expect("enqueue");
    let worker = start(
        Worker::new(client.clone())
            .config(remuda::WorkerConfig {
                cancel_grace: Duration::ZERO,
                ..fast_config()
            })
            .register_dyn("call_blocks", remuda::TaskOptions::default(), task),
    );
    called.notified().await;
    client.cancel(id).await.expect("cancel");
    seen.reached().await;
    seen.release();
    go_tx.send(()).expect("the call waits");
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("ended");
    assert_eq!(job.state, remuda::JobState::Cancelled);
    worker.shutdown().await;
    assert!(
        !body_ran.load(std::sync::atomic::Ordering::SeqCst),
        "the attempt of a job stopped at once was polled"
    );
}

/// Runs until asked to stop at its first attempt (saying so), and waits for `open` at later ones.
struct StopsFirst {
    first_started: Arc<Notify>,
    first_stopped: Arc<Notify>,
    later_started: Arc<Notify>,
    open: Arc<Notify>,
}

impl remuda::Task for StopsFirst {
    const KIND: &'static str = "stops_first";
    type Args = i64;
    type Output = i64;

    async fn run(&self, ctx: remuda::JobContext, n: i64) -> Result<i64, remuda::TaskError> {
        if ctx.attempt == 1 {
            self.first_started.notify_one();
            ctx.cancelled().await;
            self.first_stopped.notify_one();
            return Err(remuda::TaskError::new("STOPPED", "asked to stop"));
        }
        self.later_started.notify_one();
        self.open.notified().await;
        Ok(n)
    }
}

/// A job taken from a worker (as a rescue would) and claimed again by the same worker while
/// its first run still goes on: the first run, whose outcome is stale and which is no longer
/// listed where the check of its runs or a shutdown would find it, is asked to stop as the
/// second starts. The check of its runs is held, so only the new claim can stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_run_of_a_job_claimed_again_by_its_worker_is_stopped() {
    let _serial = SERIAL.lock().await;
    let (_db, client) = common::setup().await;
    let check = remuda::testing::fault::hold("reconcile");
    let task = StopsFirst {
        first_started: Arc::new(Notify::new()),
        first_stopped: Arc::new(Notify::new()),
        later_started: Arc::new(Notify::new()),
        open: Arc::new(Notify::new()),
    };
    let (first_started, first_stopped, later_started, open) = (
        task.first_started.clone(),
        task.first_stopped.clone(),
        task.later_started.clone(),
        task.open.clone(),
    );
    let id = client.enqueue::<StopsFirst>(&3).await.expect("enqueue");
    let worker = common::start_with_slots(&client, task, 2);
    first_started.notified().await;
    common::take_from_worker(&client, id).await;
    later_started.notified().await;
    let stopped = tokio::time::timeout(Duration::from_secs(10), first_stopped.notified()).await;
    check.release();
    open.notify_one();
    assert!(stopped.is_ok(), "the earlier run was not asked to stop");
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("ended");
    assert_eq!(job.state, remuda::JobState::Completed);
    assert_eq!(job.attempt, 2);
    worker.shutdown().await;
}

/// `add` returns the sum; `misbehave` (told to) fails for good.
struct Kinds;

impl World for Kinds {
    fn outcome(&self, _node: &str, kind: &str, _element: Option<(usize, &Value)>) -> Outcome {
        match kind {
            "misbehave" => Outcome::Err("BAD_INPUT".into()),
            _ => Outcome::Ok(json!(3)),
        }
    }

    fn signalled(&self, _node: &str, _signal: &str) -> Option<Value> {
        None
    }
}

/// A quorum of two over one completion and two failures: the model skips it.
async fn quorum_after_failures(fault: bool) -> Vec<String> {
    let (db, client) = recording().await;
    if fault {
        decide_joins_early(&db.database().expect("pool"))
            .await
            .expect("fault");
    }
    let spec: WorkflowSpec = serde_json::from_value(json!({
        "name": "quorum",
        "nodes": {
            "ok": {"kind": "add", "args": {"a": 1, "b": 2}},
            "bad1": {"kind": "misbehave", "args": {"do": "permanent"}},
            "bad2": {"kind": "misbehave", "args": {"do": "permanent"}},
            "two": {"kind": "add", "args": {"a": 0, "b": 0}, "waits_for": ["ok", "bad1", "bad2"],
                    "join": "quorum", "min_success": 2}
        }
    }))
    .expect("spec");
    let model = decide(&spec, &Kinds).expect("modelled");
    assert_eq!(model.nodes["two"].state(), "skipped");
    let run = client
        .start_workflow_spec(&spec, &json!(null), None)
        .await
        .expect("start");
    let worker = start(
        Worker::new(client.clone())
            .config(fast_config())
            .register(Add)
            .register(Misbehave),
    );
    let status = client
        .wait_workflow(run.id, Duration::from_secs(30))
        .await
        .expect("ends");
    worker.shutdown().await;
    differences(&model, &status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_decided_early_is_a_workflow_mismatch() {
    let _serial = SERIAL.lock().await;
    let wrong = quorum_after_failures(true).await;
    assert!(
        wrong
            .iter()
            .any(|w| w.contains("node two is completed, the model says skipped")),
        "{wrong:?}"
    );
    assert!(quorum_after_failures(false).await.is_empty());
}

/// A draining worker (`worker --once`) runs a retry that became available after the claim
/// that found nothing and before it looked for what is left: that look finds it available
/// and the worker claims once more, where it called its queues drained and left the retry
/// waiting. The worker is held between the two until the retry is promoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_promoted_between_a_draining_workers_last_claim_and_its_last_look_is_run() {
    let _serial = SERIAL.lock().await;
    let (_db, client) = common::setup().await;
    let check = remuda::testing::fault::hold("drain check");
    let id = client
        .enqueue::<Add>(&common::AddArgs { a: 2, b: 3 })
        .await
        .expect("enqueue");
    let conn = client.database().conn().await.expect("conn");
    // a retry waiting for its time, far ahead (tried once before)
    conn.execute(
        "UPDATE remuda.jobs_live SET state = 'scheduled', attempt = 1, run_at = now() + interval '1 hour' WHERE id = $1",
        &[&id],
    )
    .await
    .expect("a waiting retry");
    let worker = Worker::new(client.clone())
        .config(remuda::WorkerConfig {
            exit_when_drained: true,
            drain_wait: Duration::from_secs(1),
            maintenance: false,
            ..fast_config()
        })
        .register(Add);
    let run = tokio::spawn(worker.run(std::future::pending()));
    check.reached().await;
    // its time comes, and it is promoted, while the worker is between its claim and its look
    conn.execute(
        "UPDATE remuda.jobs_live SET run_at = now() WHERE id = $1",
        &[&id],
    )
    .await
    .expect("due");
    conn.query_one("SELECT remuda.promote_jobs(ARRAY[$1::bigint])", &[&id])
        .await
        .expect("promoted");
    check.release();
    let report = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the worker drained")
        .expect("joined")
        .expect("ran");
    let job = client.job(id).await.expect("job").expect("exists");
    assert_eq!(
        job.state,
        remuda::JobState::Completed,
        "the retry promoted before the last look was left waiting: {report:?}"
    );
}
