//! A worker whose background task fails never runs on half alive: it stops its jobs at once,
//! gives them back, and ends with an error. (A binary of its own: the failure is injected
//! for every worker of the process.)

mod common;

use common::{fast_config, setup};
use remuda::{JobContext, JobState, Task, TaskError, Worker};
use std::time::Duration;

/// Runs until stopped.
struct Forever;

impl Task for Forever {
    const KIND: &'static str = "forever";
    type Args = ();
    type Output = ();

    async fn run(&self, ctx: JobContext, _: ()) -> Result<(), TaskError> {
        ctx.cancelled().await;
        Err(TaskError::new("STOPPED", "asked to stop"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_heartbeat_dies_stops_its_jobs_and_fails() {
    let (_db, client) = setup().await;
    let id = client.enqueue::<Forever>(&()).await.expect("enqueue");
    let worker = Worker::new(client.clone())
        .config(fast_config())
        .register(Forever);
    let run = tokio::spawn(worker.run(std::future::pending()));
    for _ in 0..200 {
        if client.job(id).await.expect("lookup").expect("exists").state == JobState::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    remuda::testing::fail_background_task("heartbeat");
    // well within rescue_after (2 s): nobody may have rescued the job yet
    let ended = tokio::time::timeout(Duration::from_millis(1500), run)
        .await
        .expect("the worker stopped at once instead of running on without a heartbeat")
        .expect("worker task");
    remuda::testing::heal_background_tasks();
    let err = ended.expect_err("a failed worker reports it");
    assert!(err.to_string().contains("heartbeat task panicked"), "{err}");
    let job = client.job(id).await.expect("lookup").expect("exists");
    assert_eq!(job.state, JobState::Available, "given back: {job:?}");
    assert_eq!(job.attempt, 0, "the interrupted attempt is not counted");
}
