//! The finalization seam: every statement that ends a run or finishes a job hands its rows to
//! `remuda.transitioned()` in its own transaction, where registered hooks add their work and
//! commit or roll back with the state change; the completer's batches are transactions whose
//! lost commit answers are settled, not counted as stale.

mod common;

use common::{error_code, fast_config, setup, start, Gate};
use remuda::{
    Backoff, Client, JobContext, JobState, NewJob, Task, TaskError, TaskOptions, Worker,
    WorkerConfig,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Whether a `SnoozeOnce` job has snoozed (one such job per test binary).
static SNOOZED: AtomicBool = AtomicBool::new(false);

/// Does as its arguments say: fail (retryably), snooze once, hold until asked to stop, or
/// return its input.
struct Script;

#[derive(Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
enum Step {
    Fail,
    SnoozeOnce,
    Hold,
    Ok,
}

impl Task for Script {
    const KIND: &'static str = "script";
    type Args = Step;
    type Output = String;

    fn options() -> TaskOptions {
        TaskOptions::default()
            .max_attempts(2)
            .backoff(Backoff::Fixed {
                delay: Duration::from_millis(50),
                jitter: false,
            })
    }

    async fn run(&self, ctx: JobContext, step: Step) -> Result<String, TaskError> {
        match step {
            Step::Fail => Err(TaskError::new("BOOM", format!("attempt {}", ctx.attempt))),
            // a snooze gives the attempt back: the attempt number cannot tell the runs apart
            Step::SnoozeOnce if !SNOOZED.swap(true, Ordering::SeqCst) => {
                Err(TaskError::snooze(Duration::from_millis(10)))
            }
            Step::Hold => {
                ctx.cancel.cancelled().await;
                Err(TaskError::new("STOPPED", "asked to stop"))
            }
            Step::SnoozeOnce | Step::Ok => Ok(format!("done on attempt {}", ctx.attempt)),
        }
    }
}

/// A hook that records every row it is given (id, old state, new state, flags) in
/// `seen_transitions`.
const RECORDING_HOOK: &str = "
    CREATE TABLE seen_transitions (id bigint, old_state text, new_state text, flags int);
    CREATE FUNCTION record_transitions(changed remuda.transition[]) RETURNS void
    LANGUAGE sql AS $$
        INSERT INTO seen_transitions
        SELECT c.id, c.old_state::text, c.new_state::text, c.flags FROM unnest(changed) c
    $$;
    INSERT INTO remuda.transition_hooks (name, function)
    VALUES ('record', 'record_transitions(remuda.transition[])');";

async fn seen(client: &Client) -> BTreeSet<(i64, String, String)> {
    let conn = client.database().conn().await.expect("connection");
    conn.query("SELECT id, old_state, new_state FROM seen_transitions", &[])
        .await
        .expect("seen transitions")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

async fn sql(client: &Client, text: &str) {
    let conn = client.database().conn().await.expect("connection");
    conn.batch_execute(text).await.expect(text);
}

async fn state(client: &Client, id: i64) -> JobState {
    client.job(id).await.expect("job").expect("exists").state
}

async fn wait_until_state(client: &Client, id: i64, state: JobState) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let job = client.job(id).await.expect("job").expect("exists");
        if job.state == state {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {id} stayed {:?}, never {state:?}",
            job.state
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn worker(client: &Client) -> Worker {
    Worker::new(client.clone())
        .config(WorkerConfig {
            shutdown_timeout: Duration::from_millis(300),
            ..fast_config()
        })
        .register(Script)
}

/// Retry, failure, snooze, an awaited success, release at shutdown, cancel, an operator's
/// retry, expiry and rescue all reach the hook, each with its old and new state; a plain
/// job's success (the lean lane) does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transition_reaches_the_registered_hook_in_its_own_transaction() {
    let (_db, client) = setup().await;
    sql(&client, RECORDING_HOOK).await;
    // a queue no worker serves, for jobs that must wait
    let parked = |step: &Step| NewJob::new("script", step).expect("job").queue("parked");

    let failing = client
        .enqueue::<Script>(&Step::Fail)
        .await
        .expect("enqueue");
    let snoozing = client
        .enqueue::<Script>(&Step::SnoozeOnce)
        .await
        .expect("enqueue");
    let plain = client.enqueue::<Script>(&Step::Ok).await.expect("enqueue");
    let awaited = client
        .insert(
            parked(&Step::Ok)
                .queue("default")
                .delay(Duration::from_secs(1)),
        )
        .await
        .expect("enqueue");
    let cancelled = client.insert(parked(&Step::Ok)).await.expect("enqueue");
    let expiring = client
        .insert(
            parked(&Step::Ok).expires_at(chrono::Utc::now() + chrono::Duration::milliseconds(300)),
        )
        .await
        .expect("enqueue");
    // a job running for a worker that died an hour ago, to be rescued
    let orphan = client.insert(parked(&Step::Ok)).await.expect("enqueue");
    sql(
        &client,
        &format!(
            "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
             VALUES ('gone', 'gone', 'nowhere', 1, '{{parked}}', '{{script}}', 1, 1000, now() - interval '1 hour');
             UPDATE remuda.jobs SET state = 'running', worker_id = 'gone', attempt = 1, max_attempts = 3,
                                    started_at = now() - interval '1 hour'
             WHERE id = {orphan};"
        ),
    )
    .await;

    let running = start(worker(&client));
    let job = client
        .wait(awaited, Duration::from_secs(20))
        .await
        .expect("awaited job");
    assert_eq!(job.state, JobState::Completed);
    wait_until_state(&client, failing, JobState::Failed).await;
    wait_until_state(&client, snoozing, JobState::Completed).await;
    wait_until_state(&client, plain, JobState::Completed).await;
    wait_until_state(&client, expiring, JobState::Expired).await;
    wait_until_state(&client, orphan, JobState::Available).await;
    client.cancel(cancelled).await.expect("cancel");
    client.retry(cancelled).await.expect("retry");
    // held by the worker until it shuts down, then given back
    let held = client
        .enqueue::<Script>(&Step::Hold)
        .await
        .expect("enqueue");
    wait_until_state(&client, held, JobState::Running).await;
    let report = running.shutdown().await;
    assert_eq!(report.rejected, 0, "{report:?}");
    wait_until_state(&client, held, JobState::Available).await;

    let t = |id: i64, old: &str, new: &str| (id, old.to_string(), new.to_string());
    let expected: BTreeSet<_> = [
        t(failing, "running", "scheduled"),
        t(failing, "running", "failed"),
        t(snoozing, "running", "scheduled"),
        t(awaited, "running", "completed"),
        t(expiring, "available", "expired"),
        t(orphan, "running", "available"),
        t(cancelled, "available", "cancelled"),
        t(cancelled, "cancelled", "available"),
        t(held, "running", "available"),
    ]
    .into_iter()
    .collect();
    let got = seen(&client).await;
    assert_eq!(got, expected, "the hook saw: {got:?}");
    assert!(
        !got.iter().any(|(id, ..)| *id == plain),
        "a plain job's success takes the lean lane, past the seam"
    );
    let failed = client.job(failing).await.expect("job").expect("exists");
    assert_eq!(error_code(&failed), Some("BOOM"));
    assert_eq!(
        failed.attempt, 2,
        "failed on its last attempt, as retry_or_fail decided"
    );
}

/// A hook that fails for a reason of its data is set aside: the state change stands, the
/// rows the hook wrote before it failed are rolled back with it, the failure is recorded in
/// `remuda.failures`, and the other rows of the statement get the hook's work. A hook that
/// fails for a conflict (a lock not available) takes the state change down with it, to be
/// tried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_failing_for_one_row_is_set_aside_and_holds_back_no_other() {
    let (_db, client) = setup().await;
    sql(
        &client,
        "CREATE TABLE attempts (id bigint);
         CREATE TABLE refusing (id bigint, code text);
         CREATE FUNCTION refuse(changed remuda.transition[]) RETURNS void LANGUAGE plpgsql AS $$
         DECLARE
             code text;
         BEGIN
             INSERT INTO attempts SELECT c.id FROM unnest(changed) c;
             SELECT r.code INTO code FROM refusing r JOIN unnest(changed) c ON c.id = r.id LIMIT 1;
             IF code IS NOT NULL THEN
                 RAISE EXCEPTION 'the hook refuses' USING ERRCODE = code;
             END IF;
         END $$;
         INSERT INTO remuda.transition_hooks (name, function)
         VALUES ('refuse', 'refuse(remuda.transition[])');",
    )
    .await;
    let parked = |n: i64| NewJob::new("script", &n).expect("job").queue("parked");
    let ids = client
        .insert_many(&[parked(1), parked(2), parked(3)])
        .await
        .expect("enqueue");
    let in_parked = remuda::JobFilter {
        queue: Some("parked".into()),
        ..Default::default()
    };
    let cancel = || client.act_on_matching(&in_parked, remuda::BulkAction::Cancel, None, false);
    let (bad, good) = (ids[1], [ids[0], ids[2]]);
    // a conflict: the cancel is refused and the job stays as it was
    sql(
        &client,
        &format!("INSERT INTO refusing VALUES ({bad}, '55P03')"),
    )
    .await;
    cancel().await.expect_err("a conflict is raised on");
    assert_eq!(state(&client, bad).await, JobState::Available);
    // bad data: the three are cancelled, the bad one's hook work set aside
    sql(
        &client,
        &format!("UPDATE refusing SET code = 'RH001' WHERE id = {bad}"),
    )
    .await;
    assert_eq!(cancel().await.expect("cancel").changed, 3);
    for id in ids.iter() {
        assert_eq!(state(&client, *id).await, JobState::Cancelled);
    }
    let conn = client.database().conn().await.expect("connection");
    let mut rows: Vec<i64> = conn
        .query("SELECT id FROM attempts", &[])
        .await
        .expect("attempts")
        .iter()
        .map(|r| r.get(0))
        .collect();
    rows.sort_unstable();
    assert_eq!(rows, good.to_vec(), "only the others' hook work stays");
    let failure = conn
        .query_one(
            "SELECT source, subject, sqlstate, message FROM remuda.failures",
            &[],
        )
        .await
        .expect("one failure recorded");
    assert_eq!(failure.get::<_, String>(0), "refuse");
    assert_eq!(failure.get::<_, String>(1), format!("job {bad}"));
    assert_eq!(failure.get::<_, String>(2), "RH001");
    assert_eq!(failure.get::<_, String>(3), "the hook refuses");
}

/// A [`Gate`] whose job fails for good, once let go, when its number is negative.
struct Hinge(Gate);

impl Task for Hinge {
    const KIND: &'static str = "hinge";
    type Args = i64;
    type Output = i64;

    async fn run(&self, ctx: JobContext, n: i64) -> Result<i64, TaskError> {
        let n = self.0.run(ctx, n).await?;
        if n < 0 {
            return Err(TaskError::permanent("NEGATIVE", "a negative number"));
        }
        Ok(n)
    }
}

/// Where a [`CommitEater`] cuts the client off, once armed.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// After letting the next `COMMIT` through, before its answer comes back: the commit
    /// happened, the client cannot know it.
    AfterCommit,
    /// Before the next `COMMIT` reaches the server, whose session is kept open as a network
    /// partition would leave it (idle in its transaction, holding its locks).
    BeforeCommit,
    /// After letting the COMMIT of the next lean write of successes through
    /// (`complete_ok.sql`, sent in a transaction of its own with its planner settings),
    /// before its answer comes back: the write happened, the client cannot know it.
    AfterLeanWrite,
}

/// A proxy to the shared server that cuts the client off where told (see [`Cut`]).
struct CommitEater {
    port: u16,
    armed: Arc<AtomicBool>,
    eaten: Arc<AtomicBool>,
}

impl CommitEater {
    async fn start(upstream: std::net::SocketAddr, at: Cut) -> CommitEater {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let armed = Arc::new(AtomicBool::new(false));
        let eaten = Arc::new(AtomicBool::new(false));
        let (a, e) = (armed.clone(), eaten.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (armed, eaten) = (a.clone(), e.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, mut server_write) = server.into_split();
                    let cut = tokio_util::sync::CancellationToken::new();
                    let back = tokio::spawn(copy_until(server_read, client_write, cut.clone()));
                    let mut client_read = client_read;
                    // the startup message has no type byte; every message after it has one
                    let mut typed = false;
                    // the names of the lean statement and of the general lane's first
                    // statement (transaction_id.sql) on this connection, and which of them the
                    // open transaction ran: only their COMMITs are cut (claims send one too)
                    let mut lean: Option<Vec<u8>> = None;
                    let mut general: Option<Vec<u8>> = None;
                    let mut lean_bound = false;
                    let mut general_bound = false;
                    loop {
                        let Some(message) = read_message(&mut client_read, typed).await else {
                            break;
                        };
                        typed = true;
                        let body = message.get(5..).unwrap_or_default();
                        let name = body.split(|b| *b == 0).next().unwrap_or_default().to_vec();
                        match message.first() {
                            Some(b'P')
                                if String::from_utf8_lossy(body)
                                    .contains("Write many successful outcomes at once") =>
                            {
                                lean = Some(name)
                            }
                            Some(b'P')
                                if String::from_utf8_lossy(body)
                                    .contains("The id of the current transaction") =>
                            {
                                general = Some(name)
                            }
                            Some(b'B') => {
                                let statement = body.split(|b| *b == 0).nth(1).unwrap_or_default();
                                lean_bound |= lean.as_deref() == Some(statement);
                                general_bound |= general.as_deref() == Some(statement);
                            }
                            _ => {}
                        }
                        let commit = message.first() == Some(&b'Q')
                            && message.get(5..11) == Some(b"COMMIT".as_slice());
                        let trigger = commit
                            && match at {
                                Cut::AfterLeanWrite => lean_bound,
                                _ => general_bound,
                            };
                        if commit {
                            (lean_bound, general_bound) = (false, false);
                        }
                        let cut_here = trigger && armed.swap(false, Ordering::SeqCst);
                        if cut_here && at == Cut::BeforeCommit {
                            // the server never hears of it; its session stays open
                            cut.cancel();
                            eaten.store(true, Ordering::SeqCst);
                            // (the copy back ends and closes the client's side; the server's
                            // side stays open for as long as the test runs)
                            std::future::pending::<()>().await;
                        }
                        if server_write.write_all(&message).await.is_err() {
                            break;
                        }
                        if cut_here {
                            // the server commits; its answer never reaches the client
                            cut.cancel();
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            eaten.store(true, Ordering::SeqCst);
                            break;
                        }
                    }
                    cut.cancel();
                    let _ = back.await;
                });
            }
        });
        CommitEater { port, armed, eaten }
    }
}

async fn read_message(from: &mut tokio::net::tcp::OwnedReadHalf, typed: bool) -> Option<Vec<u8>> {
    let mut head = vec![0u8; if typed { 5 } else { 4 }];
    from.read_exact(&mut head).await.ok()?;
    let at = head.len() - 4;
    let len = u32::from_be_bytes(head[at..].try_into().ok()?) as usize;
    let mut body = vec![0u8; len.checked_sub(4)?];
    from.read_exact(&mut body).await.ok()?;
    head.extend_from_slice(&body);
    Some(head)
}

async fn copy_until(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: tokio_util::sync::CancellationToken,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            n = from.read(&mut buf) => match n { Ok(0) | Err(_) => return, Ok(n) => n },
            _ = cut.cancelled() => return,
        };
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Runs one job through a worker whose connections pass through a [`CommitEater`] armed
/// while the job runs, and checks that its outcome was written and counted once. A cut at a
/// COMMIT needs the general lane's transaction: the job fails then (a success of a plain
/// job is a lean write).
async fn complete_through_a_cut(at: Cut) {
    let (_db, client) = setup().await;
    let conn = client.database().conn().await.expect("connection");
    let row = conn
        .query_one("SELECT current_database(), current_user", &[])
        .await
        .expect("names");
    let (database, user): (String, String) = (row.get(0), row.get(1));
    let eater = CommitEater::start("127.0.0.1:5432".parse().expect("address"), at).await;
    let through = Client::connect(&format!(
        "host=127.0.0.1 port={} user={user} dbname={database} sslmode=disable",
        eater.port
    ))
    .await
    .expect("client through the proxy");
    let started = Arc::new(tokio::sync::Notify::new());
    let open = Arc::new(tokio::sync::Notify::new());
    let lean = at == Cut::AfterLeanWrite;
    let id = client
        .enqueue::<Hinge>(&if lean { 7 } else { -7 })
        .await
        .expect("enqueue");
    let running = start(
        Worker::new(through)
            .config(WorkerConfig {
                maintenance: false,
                ..fast_config()
            })
            .register(Hinge(Gate {
                started: started.clone(),
                open: open.clone(),
            })),
    );
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the job started");
    eater.armed.store(true, Ordering::SeqCst);
    open.notify_one();
    let end = if lean {
        JobState::Completed
    } else {
        JobState::Failed
    };
    wait_until_state(&client, id, end).await;
    // the completer hears of the broken connection and settles its write
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let report = running.shutdown().await;
    assert!(eater.eaten.load(Ordering::SeqCst), "the connection was cut");
    let job = client.job(id).await.expect("job").expect("exists");
    assert_eq!(job.attempt, 1, "run once");
    let written = if lean {
        report.completed
    } else {
        report.failed
    };
    assert_eq!(
        (written, report.rejected),
        (1, 0),
        "the outcome is counted as written, once, not as stale: {report:?}"
    );
}

/// The connection breaks after the completer's COMMIT reached the server and before its
/// answer came back. The completer asks the database whether that transaction committed
/// and counts the batch once, as completed: not as stale, and not written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_was_lost_is_counted_once_not_as_stale() {
    complete_through_a_cut(Cut::AfterCommit).await;
}

/// The connection breaks before the COMMIT reached the server, which keeps the session open
/// (a partition sends no FIN): the transaction stays open, holding the job's row. The
/// completer ends that session and writes the batch again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_never_arrived_is_ended_on_the_server_and_written_again() {
    complete_through_a_cut(Cut::BeforeCommit).await;
}

/// The answer of a lean write's COMMIT (plain successes, no transaction id kept) is lost:
/// the completer finds the rows that write completed before writing again, and counts them
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lean_write_whose_answer_was_lost_is_counted_once_not_as_stale() {
    complete_through_a_cut(Cut::AfterLeanWrite).await;
}
