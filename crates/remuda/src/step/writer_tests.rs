//! The step writer against a real PostgreSQL: a batch the database refuses for one step is
//! written again step by step, so only that step fails; a step of a run that no longer holds
//! its job is refused and the others of its batch are recorded.

use super::writer::{write, Answer, Record};
use crate::testing::TestDatabase;
use crate::Database;
use chrono::{DateTime, Utc};

/// Inserts a job running for worker `w` at attempt 1; returns its id and claim time.
async fn running(db: &Database) -> (i64, DateTime<Utc>) {
    let row = db
        .conn()
        .await
        .expect("conn")
        .query_one(
            "INSERT INTO remuda.jobs (kind, state, attempt, worker_id, started_at)
             VALUES ('x', 'running', 1, 'w', now()) RETURNING id, started_at",
            &[],
        )
        .await
        .expect("insert");
    (row.get(0), row.get(1))
}

fn step(job: (i64, DateTime<Utc>), name: &str) -> (Record, tokio::sync::oneshot::Receiver<Answer>) {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let record = Record {
        job: job.0,
        name: name.into(),
        output: "\"out\"".into(),
        attempt: 1,
        started_at: job.1,
        reply,
    };
    (record, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_the_database_refuses_fails_alone_and_its_batch_is_recorded() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    db.conn()
        .await
        .expect("conn")
        .batch_execute(
            "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned step'; END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER refuse_poison BEFORE INSERT ON remuda.steps
                 FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
        )
        .await
        .expect("trigger");
    let (a, b) = (running(&db).await, running(&db).await);
    let stale = running(&db).await;
    let (first, first_answer) = step(a, "charge");
    let (poison, poison_answer) = step(b, "poison");
    let (mut moved, moved_answer) = step(stale, "charge");
    moved.attempt = 2;
    write(&db, "w", vec![first, poison, moved]).await;

    let first = first_answer.await.expect("answered").expect("recorded");
    assert_eq!(first.as_deref(), Some("\"out\""));
    let poison = poison_answer.await.expect("answered");
    assert!(
        poison.as_ref().is_err_and(|e| e.contains("poisoned step")),
        "{poison:?}"
    );
    let moved = moved_answer.await.expect("answered").expect("no error");
    assert_eq!(moved, None, "not the run that holds the job");
    let stored: Vec<(i64, String)> = db
        .conn()
        .await
        .expect("conn")
        .query("SELECT job_id, name FROM remuda.steps ORDER BY job_id", &[])
        .await
        .expect("steps")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(stored, [(a.0, "charge".to_string())]);
}
