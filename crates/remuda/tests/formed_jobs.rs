//! Jobs formed from many enqueues of one key — debounced, throttled, batched — against a real
//! PostgreSQL: race-free under parallel enqueuers (one job, no lost args), inside the caller's
//! transaction, with the windows and caps they promise and clear errors for what does not fit.

mod common;

use common::{setup, start_with};
use remuda::{Client, Inserted, JobContext, JobState, NewJob, Task, TaskError, TaskOptions};
use serde_json::{json, Value};
use std::time::Duration;

fn debounced(key: &str, args: Value, delay: Duration) -> NewJob {
    NewJob::new("reindex", &args)
        .expect("job")
        .unique_key(key)
        .debounce(delay)
}

async fn enqueue(client: &Client, job: NewJob) -> Inserted {
    client.insert_each(&[job]).await.expect("enqueue")[0]
}

async fn jobs_of(client: &Client, kind: &str) -> Vec<(i64, String, Value, Option<Value>)> {
    let conn = client.database().conn().await.expect("conn");
    conn.query(
        "SELECT id, state::text, args, formed FROM remuda.jobs WHERE kind = $1 ORDER BY id",
        &[&kind],
    )
    .await
    .expect("jobs")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debounce_under_eight_parallel_enqueuers_gives_one_job_with_the_last_args() {
    let (_db, client) = setup().await;
    let mut clients = Vec::new();
    for c in 0..8 {
        let client = client.clone();
        clients.push(tokio::spawn(async move {
            let mut joined = 0;
            for n in 0..25 {
                let job = debounced(
                    "doc:1",
                    json!({"client": c, "n": n}),
                    Duration::from_secs(3600),
                );
                joined += usize::from(enqueue(&client, job).await.joined);
            }
            joined
        }));
    }
    let mut joined = 0;
    for c in clients {
        joined += c.await.expect("enqueuer");
    }
    let jobs = jobs_of(&client, "reindex").await;
    assert_eq!(jobs.len(), 1, "one job: {jobs:?}");
    let (_, state, args, formed) = &jobs[0];
    assert_eq!(state, "scheduled");
    assert_eq!(joined, 199, "every enqueue but the first joined it");
    assert_eq!(
        formed.as_ref(),
        Some(&json!({"debounced": 200})),
        "none lost"
    );
    // the last to commit was some enqueuer's last
    assert_eq!(args["n"], 24, "{args}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounce_moves_the_start_and_its_max_caps_how_far() {
    let (_db, client) = setup().await;
    // (a cap no shorter than the debounce: a shorter one is refused, as it would leave
    // nothing to debounce)
    let job = |args| {
        debounced("a", args, Duration::from_millis(1500)).debounce_max(Duration::from_secs(2))
    };
    let first = enqueue(&client, job(json!(1))).await;
    let created = client.job(first.id).await.expect("job").expect("exists");
    // the next enqueue would move the start to 2.2 s or more after the first
    tokio::time::sleep(Duration::from_millis(700)).await;
    let again = enqueue(&client, job(json!(2))).await;
    assert_eq!((again.id, again.joined), (first.id, true));
    let job = client.job(first.id).await.expect("job").expect("exists");
    assert_eq!(job.args, json!(2), "the latest args");
    assert!(
        job.run_at <= created.created_at + chrono::Duration::seconds(2),
        "capped at the first enqueue + max: {} vs {}",
        job.run_at,
        created.created_at
    );
    assert!(job.run_at >= created.created_at + chrono::Duration::milliseconds(1900));
}

/// Records what it ran.
struct Reindex;

impl Task for Reindex {
    const KIND: &'static str = "reindex";
    type Args = Value;
    type Output = Value;

    async fn run(&self, _ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        Ok(args)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_debounced_job_runs_the_next_enqueue_makes_a_new_one() {
    let (_db, client) = setup().await;
    let worker = start_with(&client, Reindex);
    let first = enqueue(&client, debounced("b", json!(1), Duration::from_millis(50))).await;
    let done = client
        .wait(first.id, Duration::from_secs(20))
        .await
        .expect("ran");
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.formed, Some(json!({"debounced": 1})));
    let next = enqueue(&client, debounced("b", json!(2), Duration::from_millis(50))).await;
    assert_ne!(next.id, first.id);
    assert!(!next.joined);
    client
        .wait(next.id, Duration::from_secs(20))
        .await
        .expect("ran");
    worker.shutdown().await;
}

fn throttled(key: &str, args: Value, latest: bool) -> NewJob {
    NewJob::new("reindex", &args)
        .expect("job")
        .unique_key(key)
        .throttle(Duration::from_millis(1500), latest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_holds_its_window_and_a_waiting_job_keeps_or_takes_the_args() {
    let (_db, client) = setup().await;
    let worker = start_with(&client, Reindex);
    let first = enqueue(&client, throttled("sync:1", json!("a"), false)).await;
    let one = client
        .wait(first.id, Duration::from_secs(20))
        .await
        .expect("ran");
    // inside the window: one job waits for its end, and the next enqueues join it
    let second = enqueue(&client, throttled("sync:1", json!("b"), false)).await;
    let third = enqueue(&client, throttled("sync:1", json!("c"), false)).await;
    assert_eq!(
        (third.id, third.joined, second.joined),
        (second.id, true, false)
    );
    let waiting = client.job(second.id).await.expect("job").expect("exists");
    let started = one.started_at.expect("started");
    assert_eq!(
        waiting.run_at,
        started + chrono::Duration::milliseconds(1500)
    );
    assert_eq!(waiting.args, json!("b"), "the first's args kept");
    let latest = enqueue(&client, throttled("sync:1", json!("d"), true)).await;
    assert_eq!(latest.id, second.id);
    let two = client
        .wait(second.id, Duration::from_secs(20))
        .await
        .expect("ran");
    worker.shutdown().await;
    assert_eq!(two.args, json!("d"), "--throttle-latest takes the latest");
    assert_eq!(two.formed, Some(json!({"throttled": 3})));
    let gap = two.started_at.expect("started") - started;
    assert!(
        gap >= chrono::Duration::milliseconds(1500),
        "one start per window: {gap}"
    );
}

/// Takes a batch.
struct Digest;

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Event {
    i: u32,
}

impl Task for Digest {
    const KIND: &'static str = "digest";
    type Args = Vec<Event>;
    type Output = u32;

    fn options() -> TaskOptions {
        TaskOptions::default().batch(64, Duration::from_secs(3600))
    }

    async fn run(&self, _ctx: JobContext, events: Vec<Event>) -> Result<u32, TaskError> {
        Ok(events.iter().map(|e| e.i).sum())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_enqueues_from_four_clients_make_full_batches_holding_every_arg_once() {
    let (_db, client) = setup().await;
    let mut clients = Vec::new();
    for c in 0..4u32 {
        let client = client.clone();
        clients.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for k in 0..250u32 {
                let event = Event { i: c * 250 + k };
                let batch = client
                    .enqueue_to_batch::<Digest, _>("hourly", &event)
                    .await
                    .expect("enqueue");
                ids.push(batch.id);
            }
            ids
        }));
    }
    for c in clients {
        c.await.expect("enqueuer");
    }
    let jobs = jobs_of(&client, "digest").await;
    assert_eq!(jobs.len(), 16, "ceil(1000 / 64) batches");
    let mut seen: Vec<u64> = Vec::new();
    let mut shapes: Vec<(usize, &str)> = Vec::new();
    for (_, state, args, formed) in &jobs {
        let list = args.as_array().expect("a list");
        let formed = formed.as_ref().expect("formed");
        assert_eq!(formed["batched"], list.len(), "{formed}");
        assert_eq!(
            formed["enqueued_at"].as_array().map(Vec::len),
            Some(list.len())
        );
        shapes.push((list.len(), state.as_str()));
        seen.extend(list.iter().map(|e| e["i"].as_u64().expect("i")));
    }
    shapes.sort_unstable();
    let mut expected = vec![(40, "scheduled")];
    expected.extend(std::iter::repeat_n((64, "available"), 15));
    assert_eq!(
        shapes, expected,
        "15 full batches run now, the rest waits for more"
    );
    seen.sort_unstable();
    assert_eq!(seen, (0..1000).collect::<Vec<u64>>(), "every arg once");

    // a batch task receives the list
    let worker = start_with(&client, Digest);
    let full = jobs
        .iter()
        .find(|j| j.1 == "available")
        .expect("a full batch");
    let first = client
        .wait(full.0, Duration::from_secs(20))
        .await
        .expect("ran");
    worker.shutdown().await;
    let expected: u64 = jobs[0]
        .2
        .as_array()
        .expect("list")
        .iter()
        .map(|e| e["i"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(first.result, Some(remuda::JobResult::Ok(json!(expected))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formed_enqueues_in_a_rolled_back_transaction_leave_nothing() {
    let (db, client) = setup().await;
    let (mut conn, connection) = tokio_postgres::connect(db.conninfo(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let tx = conn.transaction().await.expect("begin");
    let jobs = [
        debounced("c", json!(1), Duration::from_secs(60)),
        debounced("c", json!(2), Duration::from_secs(60)),
        NewJob::new("digest", &Event { i: 1 }).expect("job").batch(
            "k",
            10,
            Duration::from_secs(60),
        ),
    ];
    let inserted = client.insert_each_in(&tx, &jobs).await.expect("enqueue");
    assert_eq!(inserted[1].id, inserted[0].id, "joined in the transaction");
    assert!(inserted[1].joined);
    tx.rollback().await.expect("rollback");
    assert!(jobs_of(&client, "reindex").await.is_empty());
    assert!(jobs_of(&client, "digest").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_formation_that_does_not_fit_is_refused_saying_why() {
    let (_db, client) = setup().await;
    let cases = [
        (
            NewJob::new("reindex", &1)
                .expect("job")
                .debounce(Duration::from_secs(1)),
            "needs a unique key",
        ),
        (
            debounced("d", json!(1), Duration::from_secs(1)).delay(Duration::from_secs(5)),
            "leave run_at and delay out",
        ),
        (
            NewJob::new("digest", &1)
                .expect("job")
                .batch("k", 0, Duration::from_secs(1)),
            "batch_size must be at least 1",
        ),
        (debounced("d", json!(1), Duration::ZERO), "more than zero"),
        (
            debounced("d", json!(1), Duration::from_secs(10)).debounce_max(Duration::from_secs(5)),
            "shorter than the debounce",
        ),
    ];
    for (job, says) in cases {
        let error = client.insert_each(&[job]).await.expect_err("refused");
        assert!(matches!(error, remuda::Error::InvalidInput(_)), "{error}");
        assert!(
            error.to_string().contains(says),
            "{error} should say {says:?}"
        );
    }
    assert!(jobs_of(&client, "reindex").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_enqueues_form_jobs_by_the_same_rules() {
    let (_db, client) = setup().await;
    let conn = client.database().conn().await.expect("conn");
    let id = |sql: &'static str| {
        let conn = &conn;
        async move {
            conn.query_one(sql, &[])
                .await
                .expect("enqueue")
                .get::<_, i64>(0)
        }
    };
    let first = id(
        "SELECT remuda.enqueue('reindex', '{\"v\": 1}', unique_key => 'k', debounce => '1 hour')",
    )
    .await;
    let second = id(
        "SELECT remuda.enqueue('reindex', '{\"v\": 2}', unique_key => 'k', debounce => '1 hour')",
    )
    .await;
    assert_eq!(first, second);
    let batch = id("SELECT remuda.enqueue('digest', '{\"i\": 1}', batch_key => 'b', batch_size => 2, batch_wait => '1 hour')").await;
    let full = id("SELECT remuda.enqueue('digest', '{\"i\": 2}', batch_key => 'b', batch_size => 2, batch_wait => '1 hour')").await;
    assert_eq!(batch, full);
    let job = client.job(full).await.expect("job").expect("exists");
    assert_eq!(job.state, JobState::Available);
    assert_eq!(job.args, json!([{"i": 1}, {"i": 2}]));
    let refused = conn
        .query_one(
            "SELECT remuda.enqueue('digest', '{}', batch_key => 'b', batch_size => 2)",
            &[],
        )
        .await
        .expect_err("no wait");
    let message = refused.as_db_error().map(|e| e.message().to_string());
    assert!(
        message.as_deref().is_some_and(|m| m.contains("batch_wait")),
        "{message:?}"
    );
}

/// Fails its first attempt (retryably) once the test opens the gate; then succeeds.
struct GatedOnce {
    started: std::sync::Arc<tokio::sync::Notify>,
    open: std::sync::Arc<tokio::sync::Notify>,
}

impl Task for GatedOnce {
    const KIND: &'static str = "reindex";
    type Args = Value;
    type Output = Value;

    async fn run(&self, ctx: JobContext, args: Value) -> Result<Value, TaskError> {
        if ctx.attempt == 1 {
            self.started.notify_one();
            self.open.notified().await;
            return Err(TaskError::new("LATER", "try again"));
        }
        Ok(args)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_formed_job_is_retried_beside_the_next_job_of_its_key() {
    let (_db, client) = setup().await;
    let task = GatedOnce {
        started: Default::default(),
        open: Default::default(),
    };
    let (started, open) = (task.started.clone(), task.open.clone());
    let worker = start_with(&client, task);
    let first = enqueue(&client, debounced("e", json!(1), Duration::from_millis(10))).await;
    started.notified().await;
    // it runs: the next enqueue of the key makes a new job, which waits
    let next = enqueue(&client, debounced("e", json!(2), Duration::from_secs(3600))).await;
    assert_ne!(next.id, first.id);
    assert!(!next.joined);
    open.notify_one();
    let done = client
        .wait(first.id, Duration::from_secs(20))
        .await
        .expect("retried and ran");
    worker.shutdown().await;
    assert_eq!(done.state, JobState::Completed, "{:?}", done.result);
    assert_eq!(done.attempt, 2);
    assert_eq!(done.errors[0].code, "LATER");
    let waiting = client.job(next.id).await.expect("job").expect("exists");
    assert_eq!(
        waiting.state,
        JobState::Scheduled,
        "the next job still waits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_job_cancelled_before_it_started_keeps_its_window() {
    let (_db, client) = setup().await;
    let worker = start_with(&client, Reindex);
    let first = enqueue(&client, throttled("w", json!(1), false)).await;
    client
        .wait(first.id, Duration::from_secs(20))
        .await
        .expect("ran");
    worker.shutdown().await;
    let second = enqueue(&client, throttled("w", json!(2), false)).await;
    let window_end = client
        .job(second.id)
        .await
        .expect("job")
        .expect("exists")
        .run_at;
    client.cancel(second.id).await.expect("cancel");
    let third = enqueue(&client, throttled("w", json!(3), false)).await;
    let third = client.job(third.id).await.expect("job").expect("exists");
    assert_eq!(third.state, JobState::Scheduled);
    assert_eq!(
        third.run_at, window_end,
        "the window the cancelled job waited for"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_load_of_batch_enqueues_forms_the_batch() {
    let (_db, client) = setup().await;
    let jobs: Vec<NewJob> = (0..3)
        .map(|i| {
            NewJob::new("digest", &Event { i }).expect("job").batch(
                "bulk",
                10,
                Duration::from_secs(3600),
            )
        })
        .collect();
    let inserted = client.insert_bulk(&jobs).await.expect("load");
    assert_eq!(inserted, 1, "one job formed");
    let formed = jobs_of(&client, "digest").await;
    assert_eq!(formed.len(), 1);
    assert_eq!(formed[0].2, json!([{"i": 0}, {"i": 1}, {"i": 2}]));
}

/// A batch's args stay within the args limit: the item that would take them past it closes
/// the batch, which becomes available at once with what it holds, and starts the next one;
/// no item is lost or repeated, and an item over the limit by itself is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_closes_when_its_next_item_would_pass_the_args_limit() {
    const ADD: &str = "SELECT remuda.enqueue('digest', $1::jsonb, batch_key => 'b', batch_size => 100, batch_wait => '1 hour')";
    let (_db, client) = setup().await;
    let mut conn = client.database().conn().await.expect("conn");
    // five items of 42 bytes under a limit of 100: two make 88 bytes of args, three 132
    let five = async |tx: &remuda::db::Tx<'_>| {
        tx.batch_execute("SET LOCAL remuda.max_payload = 100")
            .await
            .expect("limit");
        for i in 0..5 {
            let item = json!(format!("{i}{}", "x".repeat(39)));
            tx.query_one(ADD, &[&item]).await.expect("enqueue");
        }
    };
    let tx = conn.transaction().await.expect("begin");
    five(&tx).await;
    let too_big = json!("y".repeat(120));
    let refused = tx.query_one(ADD, &[&too_big]).await.expect_err("too big");
    let why = refused.as_db_error().map(|e| e.message().to_string());
    assert!(
        why.as_deref().is_some_and(|m| m.contains("over the limit")),
        "{refused:?}"
    );
    drop(tx);
    let tx = conn.transaction().await.expect("begin");
    five(&tx).await;
    tx.commit().await.expect("commit");

    let rows = conn
        .query(
            "SELECT state::text, args, octet_length(args::text)::int FROM remuda.jobs WHERE kind = 'digest' ORDER BY id",
            &[],
        )
        .await
        .expect("batches");
    let states: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        states,
        ["available", "available", "scheduled"],
        "two closed, one collecting"
    );
    for row in &rows {
        assert!(row.get::<_, i32>(2) <= 100, "within the limit: {row:?}");
    }
    let items: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            let args: Value = r.get(1);
            args.as_array()
                .expect("a list")
                .iter()
                .map(|v| v.as_str().expect("an item")[..1].to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        items,
        ["0", "1", "2", "3", "4"],
        "every item once, in order"
    );
}

/// A batch closed by an item that names another queue wakes the workers of the batch's
/// queue (where it waits), not of the item's: the notification names the batch's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_closed_by_an_item_of_another_queue_wakes_the_batchs_workers() {
    const ADD: &str = "SELECT remuda.enqueue('digest', $1::jsonb, queue => $2, batch_key => 'b', batch_size => 100, batch_wait => '1 hour')";
    let db = remuda::testing::TestDatabase::new()
        .await
        .expect("database");
    let client = db.client().await.expect("client");
    let (listener, mut connection) = tokio_postgres::connect(db.conninfo(), tokio_postgres::NoTls)
        .await
        .expect("listener");
    let (heard, mut hear) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = futures_util::StreamExt::next(&mut messages).await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message {
                let _ = heard.send(n.payload().to_string());
            }
        }
    });
    listener
        .batch_execute("LISTEN remuda_insert")
        .await
        .expect("listen");

    let mut conn = client.database().conn().await.expect("conn");
    let tx = conn.transaction().await.expect("begin");
    tx.batch_execute("SET LOCAL remuda.max_payload = 30")
        .await
        .expect("limit");
    let first: i64 = tx
        .query_one(ADD, &[&json!({"i": 1}), &"home"])
        .await
        .expect("the batch, in its queue")
        .get(0);
    // {"i": 2} takes the batch's args to 20 bytes; {"i": 30000000} would take them past 30
    tx.query_one(ADD, &[&json!({"i": 2}), &"elsewhere"])
        .await
        .expect("joins");
    let next: i64 = tx
        .query_one(ADD, &[&json!({"i": 30_000_000}), &"elsewhere"])
        .await
        .expect("closes the batch and starts the next")
        .get(0);
    tx.commit().await.expect("commit");
    assert_ne!(first, next);
    let closed = client.job(first).await.expect("job").expect("exists");
    assert_eq!(
        (closed.queue.as_str(), closed.state),
        ("home", JobState::Available)
    );
    let payload = tokio::time::timeout(Duration::from_secs(10), hear.recv())
        .await
        .expect("a notification")
        .expect("the listener");
    assert_eq!(payload, "home", "the batch's queue is woken");
}

/// Jobs are found by the key they were given, whatever holds it: a plain unique job, a
/// periodic one (stored with its period's suffix), a debounced job and a batch waiting, and a
/// unique job finished in one of its unique states (its key kept past its end); another
/// kind's job of the same key is not, nor a key that only starts like it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_found_by_the_key_they_were_given_whatever_holds_it() {
    let (_db, client) = setup().await;
    let job = |kind: &str| NewJob::new(kind, &json!({})).expect("job");
    let plain = enqueue(&client, job("send").unique_key("k")).await.id;
    // a key that only starts like it (not a period's suffix) is another key
    enqueue(&client, job("send").unique_key("k@example.com")).await;
    let other_kind = enqueue(&client, job("other").unique_key("k")).await.id;
    let periodic = enqueue(
        &client,
        job("report")
            .unique_key("k")
            .unique_period(Duration::from_secs(3600)),
    )
    .await
    .id;
    let debounce = enqueue(
        &client,
        debounced("k", json!({}), Duration::from_secs(3600)),
    )
    .await;
    let batch = enqueue(
        &client,
        job("digest").batch("k", 10, Duration::from_secs(3600)),
    )
    .await
    .id;
    let kept = enqueue(
        &client,
        NewJob::new("add", &common::AddArgs { a: 1, b: 2 })
            .expect("job")
            .unique_key("k")
            .unique_states([
                JobState::Scheduled,
                JobState::Available,
                JobState::Running,
                JobState::Completed,
            ]),
    )
    .await
    .id;
    let worker = start_with(&client, common::Add);
    client
        .wait(kept, Duration::from_secs(30))
        .await
        .expect("completed");
    worker.shutdown().await;

    let found = |kind: &'static str, key: &'static str| {
        let client = client.clone();
        async move {
            client
                .find_by_key(kind, key)
                .await
                .expect("find")
                .iter()
                .map(|j| (j.id, j.state))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(found("send", "k").await, [(plain, JobState::Available)]);
    assert_eq!(
        found("other", "k").await,
        [(other_kind, JobState::Available)]
    );
    assert_eq!(
        found("report", "k").await,
        [(periodic, JobState::Available)]
    );
    assert_eq!(
        found("reindex", "k").await,
        [(debounce.id, JobState::Scheduled)]
    );
    assert_eq!(found("digest", "k").await, [(batch, JobState::Scheduled)]);
    assert_eq!(found("add", "k").await, [(kept, JobState::Completed)]);
    assert!(found("send", "").await.is_empty());
    assert!(found("nobody", "k").await.is_empty());
    let other_key = client.find_by_key("send", "k2").await.expect("find");
    assert!(other_key.is_empty(), "{other_key:?}");
}

/// A task that declares its debounce once: every keyed enqueue through `NewJob::for_task`
/// is debounced by it.
struct Indexer;

impl Task for Indexer {
    const KIND: &'static str = "indexer";
    type Args = Value;
    type Output = ();

    fn options() -> TaskOptions {
        TaskOptions::default().debounce(Duration::from_secs(3600), Some(Duration::from_secs(7200)))
    }

    async fn run(&self, _ctx: JobContext, _args: Value) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounce_declared_on_the_task_forms_its_keyed_enqueues_and_an_enqueues_own_wins() {
    let (_db, client) = setup().await;
    let keyed = |v: i64| {
        NewJob::for_task::<Indexer>(&json!({ "v": v }))
            .expect("job")
            .unique_key("doc")
    };
    let first = enqueue(&client, keyed(1)).await;
    let second = enqueue(&client, keyed(2)).await;
    assert_eq!((second.id, second.joined), (first.id, true));
    let jobs = jobs_of(&client, "indexer").await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].2, json!({"v": 2}));
    assert_eq!(jobs[0].3, Some(json!({"debounced": 2})));
    // without a key: a plain job; with a formation of its own: that one
    let plain = enqueue(
        &client,
        NewJob::for_task::<Indexer>(&json!({})).expect("job"),
    )
    .await;
    assert!(!plain.joined && plain.id != first.id);
    let throttled = enqueue(
        &client,
        NewJob::for_task::<Indexer>(&json!({}))
            .expect("job")
            .throttle(Duration::from_secs(60), false)
            .unique_key("other"),
    )
    .await;
    let formed = jobs_of(&client, "indexer")
        .await
        .into_iter()
        .find(|j| j.0 == throttled.id)
        .and_then(|j| j.3);
    assert_eq!(formed, Some(json!({"throttled": 1})));
    // unique states (what a formation takes no part of): a plain unique job, as asked
    let plain_unique = enqueue(
        &client,
        NewJob::for_task::<Indexer>(&json!({}))
            .expect("job")
            .unique_key("states")
            .unique_states([JobState::Scheduled, JobState::Available, JobState::Running]),
    )
    .await;
    let formed = jobs_of(&client, "indexer")
        .await
        .into_iter()
        .find(|j| j.0 == plain_unique.id)
        .map(|j| j.3);
    assert_eq!(formed, Some(None), "not debounced");
    // a task declaring both is refused when its options are checked
    let both = TaskOptions::default()
        .debounce(Duration::from_secs(1), None)
        .throttle(Duration::from_secs(1), false);
    let refused = both.validate("both").expect_err("both");
    assert!(
        refused.to_string().contains("give one of them"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_enqueues_of_one_call_take_their_keys_in_order_so_two_transactions_never_deadlock() {
    let (db, client) = setup().await;
    let connect = async || {
        let (conn, connection) = tokio_postgres::connect(db.conninfo(), tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        conn
    };
    let (mut first, mut second) = (connect().await, connect().await);
    let day = Duration::from_secs(86_400);
    let one = first.transaction().await.expect("begin");
    let a = client
        .insert_each_in(&one, &[debounced("a", json!("one"), day)])
        .await
        .expect("a");
    // the other transaction enqueues b then a, in one call: it waits for a, holding nothing
    let other = {
        let client = client.clone();
        tokio::spawn(async move {
            let two = second.transaction().await.expect("begin");
            let jobs = [
                debounced("b", json!("two"), day),
                debounced("a", json!("two"), day),
            ];
            let inserted = client.insert_each_in(&two, &jobs).await;
            two.commit().await.expect("commit");
            inserted
        })
    };
    let watch = connect().await;
    // (the second transaction waits for a lock)
    common::until(Duration::from_secs(10), || async {
        let waiting: i64 = watch
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                 WHERE NOT l.granted AND d.datname = current_database()",
                &[],
            )
            .await
            .expect("locks")
            .get(0);
        waiting > 0
    })
    .await;
    // …so this one takes b at once (in the callers' orders, the two would deadlock here)
    let b = client
        .insert_each_in(&one, &[debounced("b", json!("one"), day)])
        .await
        .expect("b, without a deadlock");
    one.commit().await.expect("commit");
    let two = other
        .await
        .expect("joined")
        .expect("the second call, without a deadlock");
    assert_eq!(
        (two[0].id, two[1].id),
        (b[0].id, a[0].id),
        "answered in the caller's order, each joining the waiting job of its key"
    );
    assert!(two[0].joined && two[1].joined);
}
