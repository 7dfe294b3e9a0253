//! Outcomes PostgreSQL cannot store as they are (NUL characters) neither block the worker nor
//! get lost; operators' retries keep the job's defaults; a job cancelled behind the worker's
//! back (no notification) is still stopped.

mod common;

use common::{error_code, setup, start_with};
use remuda::{JobContext, JobResult, JobState, NewJob, Task, TaskError};
use std::time::Duration;

/// Returns or fails with whatever text it is given.
struct Echo;

#[derive(serde::Serialize, serde::Deserialize)]
struct EchoArgs {
    fail: bool,
    text: String,
}

impl Task for Echo {
    const KIND: &'static str = "echo";
    type Args = EchoArgs;
    type Output = String;

    fn options() -> remuda::TaskOptions {
        remuda::TaskOptions::default().max_attempts(1)
    }

    async fn run(&self, _ctx: JobContext, args: EchoArgs) -> Result<String, TaskError> {
        // args cannot carry a NUL (refused at enqueue): the task makes them from a marker
        let text = args.text.replace("<NUL>", "\u{0}");
        if args.fail {
            Err(TaskError::new("BAD\u{0}CODE", text))
        } else {
            Ok(text)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_characters_are_refused_at_enqueue_and_handled_in_outcomes() {
    let (_db, client) = setup().await;
    let err = client
        .insert(NewJob::new("echo", &"a\u{0}b").expect("job"))
        .await
        .expect_err("NUL in args");
    assert!(err.to_string().contains("NUL character"), "{err}");

    let result_nul = client
        .enqueue::<Echo>(&EchoArgs {
            fail: false,
            text: "x<NUL>y".into(),
        })
        .await
        .expect("enqueue");
    let error_nul = client
        .enqueue::<Echo>(&EchoArgs {
            fail: true,
            text: "broken<NUL>message".into(),
        })
        .await
        .expect("enqueue");
    let fine = client
        .enqueue::<Echo>(&EchoArgs {
            fail: false,
            text: "fine".into(),
        })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Echo);

    let job = client
        .wait(result_nul, Duration::from_secs(10))
        .await
        .expect("final");
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(error_code(&job), Some("RESULT_INVALID"), "{:?}", job.result);
    let job = client
        .wait(error_nul, Duration::from_secs(10))
        .await
        .expect("final");
    match job.result {
        Some(JobResult::Err(e)) => {
            assert_eq!(e.code, "BAD\u{FFFD}CODE");
            assert_eq!(e.message, "broken\u{FFFD}message");
        }
        other => panic!("expected the error, got {other:?}"),
    }
    let job = client
        .wait(fine, Duration::from_secs(10))
        .await
        .expect("final");
    assert_eq!(
        job.result,
        Some(JobResult::Ok("fine".into())),
        "the worker kept going"
    );
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrying_keeps_the_kinds_default_attempts_and_lifts_an_expired_deadline() {
    let (_db, client) = setup().await;
    let id = client
        .insert(
            NewJob::new(
                "echo",
                &EchoArgs {
                    fail: false,
                    text: "late".into(),
                },
            )
            .expect("job")
            .expires_at(chrono::Utc::now() + chrono::Duration::milliseconds(300)),
        )
        .await
        .expect("insert");
    // no worker until the deadline has passed
    tokio::time::sleep(Duration::from_millis(500)).await;
    let worker = start_with(&client, Echo);
    let job = client
        .wait(id, Duration::from_secs(10))
        .await
        .expect("expired");
    assert_eq!(job.state, JobState::Expired);
    assert_eq!(client.retry(id).await.expect("retry"), JobState::Expired);
    let job = client.wait(id, Duration::from_secs(10)).await.expect("ran");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(
        job.max_attempts,
        Some(1),
        "the worker's default for the kind, not a forced 1 + attempts"
    );
    assert!(job.expires_at.is_none());
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_without_a_notification_is_still_stopped() {
    let (db, client) = setup().await;
    let worker = start_with(&client, common::Misbehave);
    let id = client
        .insert(
            NewJob::for_task::<common::Misbehave>(&common::MisbehaveArgs::Sleep { ms: 60_000 })
                .expect("job")
                .timeout(Duration::from_secs(120)),
        )
        .await
        .expect("insert");
    for _ in 0..200 {
        if client.job(id).await.expect("lookup").expect("exists").state == JobState::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // behind the worker's back: no remuda_cancel notification
    db.database()
        .expect("pool")
        .conn()
        .await
        .expect("conn")
        .execute(
            "UPDATE remuda.jobs SET state = 'cancelled', finished_at = now() WHERE id = $1",
            &[&id],
        )
        .await
        .expect("cancel by SQL");
    // the worker notices at its next check and frees the slot: shutdown has nothing to release
    tokio::time::sleep(Duration::from_millis(800)).await;
    let report = worker.shutdown().await;
    assert_eq!(
        report.released, 0,
        "the cancelled job was no longer running"
    );
    assert_eq!(
        client.job(id).await.expect("lookup").expect("exists").state,
        JobState::Cancelled
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_is_not_about_the_data_is_retried_not_blamed_on_the_job() {
    let (db, client) = setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("conn");
    // as during a rolling deploy: completions (the moves into the finished part) are refused
    // for a while with a permission error, which says nothing about the outcome being written
    conn.batch_execute(
        "CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.state = 'completed' THEN
             RAISE EXCEPTION 'permission denied for table jobs' USING ERRCODE = 'insufficient_privilege';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_completion BEFORE INSERT ON remuda.jobs_finished
           FOR EACH ROW EXECUTE FUNCTION refuse_completion();",
    )
    .await
    .expect("install the refusal");
    let id = client
        .enqueue::<Echo>(&EchoArgs {
            fail: false,
            text: "fine".into(),
        })
        .await
        .expect("enqueue");
    let worker = start_with(&client, Echo);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let job = client.job(id).await.expect("lookup").expect("exists");
    assert_eq!(
        job.state,
        JobState::Running,
        "not failed for the server's state: {job:?}"
    );
    conn.batch_execute("DROP TRIGGER refuse_completion ON remuda.jobs_finished")
        .await
        .expect("deploy done");
    let job = client
        .wait(id, Duration::from_secs(15))
        .await
        .expect("written");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.result, Some(JobResult::Ok("fine".into())));
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_keeps_the_servers_words() {
    let (db, client) = setup().await;
    let pool = db.database().expect("pool");
    pool.conn()
        .await
        .expect("conn")
        .batch_execute(
            "CREATE FUNCTION refuse_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               RAISE EXCEPTION 'inserts are closed' USING ERRCODE = 'insufficient_privilege',
                 DETAIL = 'the table is read-only for maintenance', HINT = 'try again after 02:00';
             END $$;
             CREATE TRIGGER refuse_inserts BEFORE INSERT ON remuda.jobs
               FOR EACH ROW EXECUTE FUNCTION refuse_inserts();",
        )
        .await
        .expect("install the refusal");
    let err = client
        .insert(NewJob::new("echo", &1).expect("job"))
        .await
        .expect_err("refused");
    let text = err.to_string();
    for words in [
        "inserts are closed",
        "SQLSTATE 42501",
        "detail: the table is read-only for maintenance",
        "hint: try again after 02:00",
    ] {
        assert!(text.contains(words), "{words:?} missing from {text}");
    }
}
