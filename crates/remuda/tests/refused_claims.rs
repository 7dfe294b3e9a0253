//! A claim the database refuses (it answers with an error) took nothing: the worker retries
//! it without scanning for orphans, which only a claim whose answer was lost needs.

mod common;

use common::{fast_config, setup, start, Add, AddArgs};
use remuda::{JobState, Worker};
use std::sync::atomic::Ordering;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_claim_is_retried_without_an_orphan_scan() {
    let (db, client) = setup().await;
    let pool = db.database().expect("pool");
    let conn = pool.conn().await.expect("conn");
    conn.batch_execute(
        "CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.state = 'running' THEN
             RAISE EXCEPTION 'claims refused for the test' USING ERRCODE = 'lock_not_available';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_claims BEFORE UPDATE ON remuda.jobs
           FOR EACH ROW EXECUTE FUNCTION refuse_claims();",
    )
    .await
    .expect("install the refusal");
    let id = client
        .enqueue::<Add>(&AddArgs { a: 1, b: 2 })
        .await
        .expect("enqueue");
    let worker = Worker::new(client.clone())
        .config(fast_config())
        .register(Add);
    let stats = worker.stats();
    let running = start(worker);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        client.job(id).await.expect("lookup").expect("exists").state,
        JobState::Available,
        "every claim was refused"
    );
    assert_eq!(
        stats.orphan_checks.load(Ordering::Relaxed),
        0,
        "a refused claim left nothing to look for"
    );
    conn.batch_execute("DROP TRIGGER refuse_claims ON remuda.jobs")
        .await
        .expect("remove the refusal");
    let job = client.wait(id, Duration::from_secs(15)).await.expect("ran");
    assert_eq!(job.state, JobState::Completed);
    running.shutdown().await;
}
