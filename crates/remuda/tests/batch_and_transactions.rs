//! Batch insert and enqueueing inside the caller's transaction.

mod common;

use remuda::{JobFilter, JobState, NewJob};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_ten_thousand_is_inserted_in_one_call() {
    let (_db, client) = common::setup().await;
    let jobs: Vec<NewJob> = (0..10_000)
        .map(|i| NewJob::new("noop", &serde_json::json!({ "i": i })).expect("job"))
        .collect();
    let ids = client.insert_many(&jobs).await.expect("batch insert");
    assert_eq!(ids.len(), 10_000);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids come back in insert order"
    );
    let first = client.job(ids[0]).await.expect("lookup").expect("exists");
    assert_eq!(first.args, serde_json::json!({"i": 0}));
    let last = client
        .job(ids[9_999])
        .await
        .expect("lookup")
        .expect("exists");
    assert_eq!(last.args, serde_json::json!({"i": 9_999}));
    let stats = client.queue_stats().await.expect("stats");
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].count(JobState::Available), 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_one_bad_job_inserts_nothing() {
    let (_db, client) = common::setup().await;
    let mut jobs: Vec<NewJob> = (0..10)
        .map(|i| NewJob::new("noop", &i).expect("job"))
        .collect();
    jobs.push(NewJob::new("noop", &0).expect("job").max_attempts(0));
    let err = client.insert_many(&jobs).await.expect_err("refused");
    assert!(
        err.to_string().contains("max_attempts must be at least 1"),
        "{err}"
    );
    assert!(client
        .jobs(&JobFilter::default())
        .await
        .expect("list")
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_enqueued_in_a_rolled_back_transaction_do_not_exist() {
    let (db, client) = common::setup().await;
    let pool = db.database().expect("pool");
    let mut conn = pool.conn().await.expect("connection");
    let tx = conn.transaction().await.expect("begin");
    let ids = client
        .insert_in(
            &**tx,
            &[
                NewJob::new("noop", &1).expect("job"),
                NewJob::new("noop", &2).expect("job"),
            ],
        )
        .await
        .expect("insert in transaction");
    assert_eq!(ids.len(), 2);
    tx.rollback().await.expect("rollback");
    for id in ids {
        assert!(
            client.job(id).await.expect("lookup").is_none(),
            "job {id} must not exist"
        );
    }

    let tx = conn.transaction().await.expect("begin");
    let ids = client
        .insert_in(&**tx, &[NewJob::new("noop", &3).expect("job")])
        .await
        .expect("insert");
    assert!(
        client.job(ids[0]).await.expect("lookup").is_none(),
        "invisible before commit"
    );
    tx.commit().await.expect("commit");
    assert!(
        client.job(ids[0]).await.expect("lookup").is_some(),
        "exists after commit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_jobs_are_scheduled_and_listed_with_filters() {
    let (_db, client) = common::setup().await;
    let later = client
        .insert(
            NewJob::new("noop", &1)
                .expect("job")
                .delay(std::time::Duration::from_secs(3600))
                .queue("q1"),
        )
        .await
        .expect("insert");
    let now = client
        .insert(
            NewJob::new("other", &2)
                .expect("job")
                .queue("q2")
                .priority(5),
        )
        .await
        .expect("insert");
    let job = client.job(later).await.expect("lookup").expect("exists");
    assert_eq!(job.state, JobState::Scheduled);
    let scheduled = client
        .jobs(&JobFilter {
            state: Some(JobState::Scheduled),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(
        scheduled.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![later]
    );
    let q2 = client
        .jobs(&JobFilter {
            queue: Some("q2".into()),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(q2.len(), 1);
    assert_eq!(q2[0].id, now);
    assert_eq!(q2[0].priority, 5);
    let by_kind = client
        .jobs(&JobFilter {
            kind: Some("other".into()),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(by_kind.len(), 1);
}
