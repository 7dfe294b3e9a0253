//! Enqueue → run → typed result, through the library API against a real PostgreSQL.

mod common;

use common::{setup, start_with, Add, AddArgs, Gate};
use remuda::{JobResult, JobState, NewJob};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_job_runs_and_its_typed_result_is_stored() {
    let (_db, client) = setup().await;
    let id = client
        .enqueue::<Add>(&AddArgs { a: 2, b: 40 })
        .await
        .expect("enqueue");
    let before = client.job(id).await.expect("lookup").expect("exists");
    assert_eq!(before.state, JobState::Available);
    assert_eq!(before.kind, "add");
    assert_eq!(before.max_attempts, Some(25));

    let worker = start_with(&client, Add);
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("finished");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.result, Some(JobResult::Ok(serde_json::json!(42))));
    assert_eq!(job.attempt, 1);
    assert!(job.errors.is_empty());
    assert!(job.started_at.is_some() && job.finished_at.is_some());
    let report = worker.shutdown().await;
    assert_eq!(report.completed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_times_out_when_nobody_runs_the_job() {
    let (_db, client) = setup().await;
    let id = client
        .insert(NewJob::new("nobody_runs_this", &serde_json::json!({})).expect("job"))
        .await
        .expect("insert");
    let err = client
        .wait(id, Duration::from_millis(300))
        .await
        .expect_err("no worker");
    assert!(
        matches!(err, remuda::Error::WaitTimeout { id: i, .. } if i == id),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_the_worker_does_not_know_is_left_for_another_worker() {
    let (_db, client) = setup().await;
    let unknown = client
        .insert(NewJob::new("unknown_kind", &1).expect("job"))
        .await
        .expect("insert");
    let known = client
        .enqueue::<Add>(&AddArgs { a: 1, b: 1 })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Add);
    client
        .wait(known, Duration::from_secs(10))
        .await
        .expect("known kind ran");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job = client.job(unknown).await.expect("lookup").expect("exists");
    assert_eq!(job.state, JobState::Available);
    assert_eq!(job.attempt, 0, "not burned");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn args_over_the_size_limit_are_refused_and_nothing_is_written() {
    let (_db, client) = setup().await;
    let client = client.with_max_payload(1024);
    let big = "x".repeat(2000);
    let err = client
        .insert(NewJob::new("add", &big).expect("job"))
        .await
        .expect_err("too big");
    assert!(
        err.to_string().contains("over the limit of 1024 bytes"),
        "{err}"
    );
    assert!(client
        .jobs(&Default::default())
        .await
        .expect("list")
        .is_empty());
}

/// The completer finds a finished job at the place its claim left the row; a job whose row
/// moved while it ran (here: someone started waiting for it) is still completed, by id, and
/// no outcome is counted as stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_row_moved_while_it_ran_is_still_completed() {
    let (db, client) = setup().await;
    let started = Arc::new(tokio::sync::Notify::new());
    let open = Arc::new(tokio::sync::Notify::new());
    let id = client.enqueue::<Gate>(&7).await.expect("enqueue");
    let worker = start_with(
        &client,
        Gate {
            started: started.clone(),
            open: open.clone(),
        },
    );
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the job started");
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    let place =
        "SELECT ctid::text AS place, flags & 1 = 1 AS awaited FROM remuda.jobs WHERE id = $1";
    let claimed: String = conn
        .query_one(place, &[&id])
        .await
        .expect("row")
        .get("place");
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.wait(id, Duration::from_secs(20)).await })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let moved = loop {
        let row = conn.query_one(place, &[&id]).await.expect("row");
        if row.get::<_, bool>("awaited") {
            break row.get::<_, String>("place");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "wait never marked the job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_ne!(
        claimed, moved,
        "marking the job awaited wrote a new row version"
    );
    open.notify_one();
    let job = waiter.await.expect("joined").expect("finished");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.result, Some(JobResult::Ok(serde_json::json!(7))));
    let report = worker.shutdown().await;
    assert_eq!((report.completed, report.rejected), (1, 0), "{report:?}");
}
