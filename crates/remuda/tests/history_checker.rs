//! Verification mode: every state change of a job recorded from the job table itself, and a
//! checker that holds the history against the state machine. Each class of finding is shown
//! caught by a fault put in by hand, and a clean run shows nothing.

mod common;

use common::{findings, recording, setup, start_with, Add, AddArgs, Flaky, FlakyArgs};
use remuda::verify::{check, set_history};
use remuda::{JobState, NewJob};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

/// Enqueues `a + b`: its id.
async fn add(client: &remuda::Client, a: i64, b: i64) -> i64 {
    client
        .enqueue::<Add>(&AddArgs { a, b })
        .await
        .expect("enqueue")
}

async fn sql(db: &common::TestDatabase, statement: &str) {
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.batch_execute(statement).await.expect(statement);
}

async fn path(db: &common::TestDatabase, id: i64) -> Vec<String> {
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("connection");
    conn.query(
        "SELECT coalesce(from_state, '-') || '>' || coalesce(to_state, '-') FROM remuda.history WHERE job_id = $1 ORDER BY seq",
        &[&id],
    )
    .await
    .expect("history")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_by_default_nothing_is_recorded() {
    let (db, client) = setup().await;
    if std::env::var_os("REMUDA_TEST_HISTORY").is_some() {
        // the suite runs with every database recording: this one is put back as it would be
        set_history(&db.database().expect("pool"), false)
            .await
            .expect("off");
    }
    let id = add(&client, 1, 2).await;
    assert!(
        path(&db, id).await.is_empty(),
        "no trigger while the mode is off"
    );
    let pool = db.database().expect("pool");
    set_history(&pool, true).await.expect("on");
    set_history(&pool, true)
        .await
        .expect("on twice is no error");
    set_history(&pool, false).await.expect("off");
    add(&client, 1, 2).await;
    let pool = db.database().expect("pool");
    let rows: i64 = pool
        .conn()
        .await
        .expect("connection")
        .query_one("SELECT count(*) FROM remuda.history", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 0, "switched off again, nothing is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_retries_and_a_cancel_records_every_change_and_is_clean() {
    let (db, client) = recording().await;
    let flaky = client
        .enqueue::<Flaky>(&FlakyArgs {
            succeed_on: 2,
            code: "FLAKY".into(),
        })
        .await
        .expect("enqueue");
    let later = client
        .insert(
            NewJob::for_task::<Flaky>(&FlakyArgs {
                succeed_on: 1,
                code: "FLAKY".into(),
            })
            .expect("job")
            .delay(Duration::from_secs(3600)),
        )
        .await
        .expect("insert");
    client.cancel(later).await.expect("cancel");
    let worker = start_with(
        &client,
        Flaky {
            runs: Arc::new(AtomicUsize::new(0)),
        },
    );
    let job = client
        .wait(flaky, Duration::from_secs(20))
        .await
        .expect("done");
    assert_eq!(job.state, JobState::Completed);
    worker.shutdown().await;
    assert_eq!(
        path(&db, flaky).await,
        [
            "->available",
            "available>running",
            "running>scheduled",
            "scheduled>available",
            "available>running",
            "running>completed"
        ]
    );
    assert_eq!(
        path(&db, later).await,
        ["->scheduled", "scheduled>cancelled"]
    );
    let report = findings(&db).await;
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.jobs, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_outside_the_state_machine_is_an_illegal_transition() {
    let (db, client) = recording().await;
    let id = add(&client, 1, 2).await;
    // a completion written around the claim: available straight to completed
    sql(
        &db,
        &format!("UPDATE remuda.jobs SET state = 'completed', finished_at = now() WHERE id = {id}"),
    )
    .await;
    let report = findings(&db).await;
    assert_eq!(report.illegal_transitions.len(), 1, "{report:#?}");
    assert_eq!(report.illegal_transitions[0].job, Some(id));
    assert!(report.illegal_transitions[0]
        .what
        .contains("available → completed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_was_not_recorded_is_a_gap_in_the_path() {
    let (db, client) = recording().await;
    let id = add(&client, 1, 2).await;
    // a claim written while the recorder was away, then a legal change recorded after it
    sql(&db, "ALTER TABLE remuda.jobs DISABLE TRIGGER jobs_history").await;
    sql(
        &db,
        &format!("UPDATE remuda.jobs SET state = 'running', attempt = 1, worker_id = 'w', started_at = now() WHERE id = {id}"),
    )
    .await;
    sql(&db, "ALTER TABLE remuda.jobs ENABLE TRIGGER jobs_history").await;
    let report = findings(&db).await;
    assert_eq!(report.illegal_transitions.len(), 1, "{report:#?}");
    assert!(report.illegal_transitions[0]
        .what
        .contains("the row is running, its history ends available"));
    sql(
        &db,
        &format!("UPDATE remuda.jobs SET state = 'completed' WHERE id = {id}"),
    )
    .await;
    let report = findings(&db).await;
    assert!(
        report.illegal_transitions[0]
            .what
            .contains("the path breaks: it was available, the next change starts from running"),
        "{report:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_claim_ended_twice_is_accepted_twice() {
    let (db, client) = recording().await;
    let id = add(&client, 1, 2).await;
    let worker = start_with(&client, Add);
    client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("done");
    worker.shutdown().await;
    // a stale completion accepted without its guard: the same claim ended again
    sql(
        &db,
        &format!("UPDATE remuda.jobs SET state = 'running' WHERE id = {id}; UPDATE remuda.jobs SET state = 'completed' WHERE id = {id}"),
    )
    .await;
    let report = findings(&db).await;
    assert_eq!(report.accepted_twice.len(), 1, "{report:#?}");
    assert_eq!(report.accepted_twice[0].job, Some(id));
    assert!(report.accepted_twice[0].what.contains("attempt 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_gone_without_a_recorded_deletion_is_lost() {
    let (db, client) = recording().await;
    let kept = add(&client, 1, 2).await;
    let gone = add(&client, 3, 4).await;
    sql(&db, "ALTER TABLE remuda.jobs DISABLE TRIGGER jobs_history").await;
    sql(&db, &format!("DELETE FROM remuda.jobs WHERE id = {gone}")).await;
    sql(&db, "ALTER TABLE remuda.jobs ENABLE TRIGGER jobs_history").await;
    let report = findings(&db).await;
    assert_eq!(report.lost.len(), 1, "{report:#?}");
    assert_eq!(report.lost[0].job, Some(gone));
    assert!(report.lost.iter().all(|f| f.job != Some(kept)));
    // a recorded deletion of a waiting job is no loss
    sql(&db, &format!("DELETE FROM remuda.jobs WHERE id = {kept}")).await;
    assert_eq!(findings(&db).await.lost.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_of_a_worker_that_is_gone_is_stuck() {
    let (db, client) = setup().await;
    let id = add(&client, 1, 2).await;
    sql(
        &db,
        &format!("UPDATE remuda.jobs SET state = 'running', attempt = 1, worker_id = 'nobody', started_at = now() WHERE id = {id}"),
    )
    .await;
    let report = findings(&db).await;
    assert_eq!(report.stuck.len(), 1, "{report:#?}");
    assert_eq!(report.stuck[0].job, Some(id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_job_rescued_and_run_again_is_clean() {
    let (db, client) = recording().await;
    let id = add(&client, 1, 2).await;
    // claimed by a worker that then went silent (as if killed)
    sql(
        &db,
        &format!(
            "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms, heartbeat_at)
             VALUES ('ghost', 'ghost', 'nowhere', 1, '{{default}}', '{{add}}', 1, 30000, now() - interval '1 hour');
             UPDATE remuda.jobs SET state = 'running', attempt = 1, max_attempts = 3, worker_id = 'ghost',
                    started_at = now() WHERE id = {id}"
        ),
    )
    .await;
    let stuck = findings(&db).await;
    assert_eq!(
        stuck.stuck.len(),
        1,
        "silent past its rescue_after: {stuck:#?}"
    );
    let worker = start_with(&client, Add);
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("rescued and run");
    assert_eq!((job.state, job.attempt), (JobState::Completed, 2));
    worker.shutdown().await;
    assert_eq!(
        path(&db, id).await,
        [
            "->available",
            "available>running",
            "running>available",
            "available>running",
            "running>completed"
        ]
    );
    let report = findings(&db).await;
    assert!(report.is_clean(), "{report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_and_nodes_are_recorded_and_a_node_decided_around_the_engine_is_reported() {
    let (db, client) = recording().await;
    let spec: remuda::workflow::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "name": "sum",
        "nodes": {
            "first": {"kind": "add", "args": {"a": 1, "b": 2}},
            "second": {"kind": "add", "args": {"a": 3, "b": 4}, "waits_for": ["first"]},
            "never": {"kind": "add", "args": {"a": 0, "b": 0}, "waits_for": ["second"],
                      "run_if": {"node": "second", "state": "failed"}}
        }
    }))
    .expect("spec");
    let run = client
        .start_workflow_spec(&spec, &serde_json::json!(null), None)
        .await
        .expect("start");
    let worker = start_with(&client, Add);
    let done = client
        .wait_workflow(run.id, Duration::from_secs(20))
        .await
        .expect("ends");
    assert_eq!(done.state, remuda::workflow::WorkflowState::Completed);
    worker.shutdown().await;
    let report = findings(&db).await;
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!((report.workflows, report.jobs), (1, 2));
    // a node decided around the engine: a finished run's skipped node marked completed
    sql(
        &db,
        &format!("UPDATE remuda.workflow_nodes SET state = 'completed' WHERE workflow_id = {} AND node = 'never'", run.id),
    )
    .await;
    let report = findings(&db).await;
    assert_eq!(report.illegal_transitions.len(), 1, "{report:#?}");
    let found = &report.illegal_transitions[0];
    assert_eq!(found.subject(), format!("run {} node never", run.id));
    assert!(found.what.contains("skipped → completed"), "{found:?}");
}

/// A run whose every node has ended while the run still runs is stuck, and so is a sleep
/// whose timer is overdue with nobody to fire it (no worker here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_left_running_after_its_nodes_and_an_overdue_timer_are_stuck() {
    let (db, client) = recording().await;
    let spec: remuda::workflow::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "name": "nap",
        "nodes": {"nap": {"sleep": "50ms"}}
    }))
    .expect("spec");
    let run = client
        .start_workflow_spec(&spec, &serde_json::json!(null), None)
        .await
        .expect("start");
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("conn");
    common::until(Duration::from_secs(10), || async {
        conn.query_one(
            "SELECT bool_and(wake_at < now()) FROM remuda.workflow_nodes WHERE workflow_id = $1",
            &[&run.id],
        )
        .await
        .map(|r| r.get::<_, Option<bool>>(0) == Some(true))
        .unwrap_or(false)
    })
    .await;
    let report = check(&pool, Duration::ZERO).await.expect("check");
    assert_eq!(report.stuck.len(), 1, "{report:#?}");
    assert_eq!(report.stuck[0].run, Some(run.id));
    assert_eq!(report.stuck[0].node.as_deref(), Some("nap"));
    // the node ended around the engine: the run is left running with nothing to run
    sql(
        &db,
        &format!("UPDATE remuda.workflow_nodes SET state = 'completed', wake_at = NULL WHERE workflow_id = {}", run.id),
    )
    .await;
    let report = findings(&db).await;
    assert!(
        report.stuck.iter().any(|f| f.run == Some(run.id)
            && f.node.is_none()
            && f.what.contains("every node has ended")),
        "{report:#?}"
    );
}
