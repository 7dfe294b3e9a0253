//! Pages of jobs: each state in its own order, walked to the end by cursor without a job
//! missed or repeated, filtered by queue, kind, worker and args, and counts that stop at
//! their cap.

mod common;

use remuda::{Client, JobFilter, JobState, NewJob, COUNT_CAP};
use serde_json::json;

/// Inserts `n` jobs per queue of `queues` (args `{"i": i, "queue": q}`) and returns their ids.
async fn insert(client: &Client, queues: &[&str], n: usize) -> Vec<i64> {
    let jobs: Vec<NewJob> = queues
        .iter()
        .flat_map(|q| {
            (0..n).map(move |i| {
                NewJob::new("k", &json!({"i": i, "queue": q}))
                    .expect("job")
                    .queue(*q)
                    .priority((i % 3) as i32)
            })
        })
        .collect();
    client.insert_many(&jobs).await.expect("insert")
}

/// Sets state `state` on the jobs `ids` (finished ones `seconds` apart, in id order).
async fn set_state(db: &remuda::Database, ids: &[i64], state: &str, worker: Option<&str>) {
    let conn = db.conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = $2::text::remuda.job_state, worker_id = $3,
                started_at = now(), attempt = 1,
                finished_at = CASE WHEN $2 IN ('completed', 'failed', 'cancelled', 'expired')
                                   THEN now() - (1000 - id % 1000) * interval '1 second' END
         WHERE id = ANY($1)",
        &[&ids, &state, &worker],
    )
    .await
    .expect("update");
}

/// Every job of `filter`, page after page of `per_page`.
async fn walk(client: &Client, filter: JobFilter, per_page: i64) -> Vec<remuda::Job> {
    let mut filter = JobFilter {
        limit: Some(per_page),
        ..filter
    };
    let mut all = Vec::new();
    loop {
        let page = client.job_page(&filter).await.expect("page");
        assert!(page.jobs.len() as i64 <= per_page);
        all.extend(page.jobs);
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return all,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_paged_latest_first_across_queues_without_gaps() {
    let (db, client) = common::setup().await;
    let ids = insert(&client, &["a", "b", "c"], 10).await;
    set_state(
        &db.database().expect("db"),
        &ids,
        "completed",
        Some("w-1-x"),
    )
    .await;
    let all = walk(
        &client,
        JobFilter {
            state: Some(JobState::Completed),
            ..Default::default()
        },
        4,
    )
    .await;
    assert_eq!(all.len(), 30, "every job once");
    let mut seen: Vec<i64> = all.iter().map(|j| j.id).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 30, "no job twice");
    let keys: Vec<_> = all.iter().map(|j| (j.finished_at, j.id)).collect();
    assert!(
        keys.windows(2).all(|w| w[0] > w[1]),
        "latest finished first: {keys:?}"
    );
    let one_queue = walk(
        &client,
        JobFilter {
            state: Some(JobState::Completed),
            queue: Some("b".into()),
            ..Default::default()
        },
        3,
    )
    .await;
    assert_eq!(one_queue.len(), 10);
    assert!(one_queue.iter().all(|j| j.queue == "b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn available_jobs_are_paged_in_the_order_they_run() {
    let (_db, client) = common::setup().await;
    insert(&client, &["a", "b"], 9).await;
    let all = walk(
        &client,
        JobFilter {
            state: Some(JobState::Available),
            queue: Some("a".into()),
            ..Default::default()
        },
        2,
    )
    .await;
    assert_eq!(all.len(), 9);
    let keys: Vec<_> = all.iter().map(|j| (j.priority, j.run_at, j.id)).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    let every_queue = walk(
        &client,
        JobFilter {
            state: Some(JobState::Available),
            ..Default::default()
        },
        5,
    )
    .await;
    assert_eq!(every_queue.len(), 18);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_by_kind_worker_and_args_containment() {
    let (db, client) = common::setup().await;
    let ids = insert(&client, &["a"], 6).await;
    let database = db.database().expect("db");
    set_state(&database, &ids[..3], "running", Some("alpha-1-x")).await;
    set_state(&database, &ids[3..], "failed", Some("beta-2-y")).await;
    // running jobs are listed as their worker reported them at its last heartbeat
    let conn = database.conn().await.expect("conn");
    conn.execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency,
                                     rescue_after_ms, running, running_ids)
         VALUES ('alpha-1-x', 'alpha', 'h', 1, '{a}', '{k}', 4, 60000, 3, $1)",
        &[&&ids[..3]],
    )
    .await
    .expect("a worker's report");
    let by_worker = client
        .jobs(&JobFilter {
            worker: Some("alpha-1-x".into()),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(by_worker.len(), 3);
    let running_of_beta = client
        .jobs(&JobFilter {
            state: Some(JobState::Running),
            worker: Some("beta-2-y".into()),
            ..Default::default()
        })
        .await
        .expect("list");
    assert!(running_of_beta.is_empty());
    let by_args = client
        .jobs(&JobFilter {
            state: Some(JobState::Failed),
            args: Some(json!({"i": 4})),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(by_args.len(), 1);
    assert_eq!(by_args[0].args, json!({"i": 4, "queue": "a"}));
    let bad = client
        .jobs(&JobFilter {
            args: Some(json!(4)),
            ..Default::default()
        })
        .await
        .expect_err("a number is no containment filter");
    assert!(bad.to_string().contains("JSON object"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_for_another_state_is_refused_with_a_clear_error() {
    let (_db, client) = common::setup().await;
    insert(&client, &["a"], 3).await;
    let page = client
        .job_page(&JobFilter {
            limit: Some(1),
            ..Default::default()
        })
        .await
        .expect("page");
    let e = client
        .job_page(&JobFilter {
            state: Some(JobState::Completed),
            after: page.next,
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("another state filter"), "{e}");
    let e = client
        .job_page(&JobFilter {
            limit: Some(0),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("1 to 1000"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_counts_stop_at_their_cap_and_say_so() {
    let (db, client) = common::setup().await;
    let n = COUNT_CAP as usize + 5;
    let ids = insert(&client, &["big"], n).await;
    let database = db.database().expect("db");
    set_state(&database, &ids[..n - 2], "completed", None).await;
    set_state(&database, &ids[n - 2..], "failed", None).await;
    let exact = client.queue_stats().await.expect("stats");
    assert_eq!(exact[0].count(JobState::Completed), COUNT_CAP + 3);
    assert!(!exact[0].is_capped(JobState::Completed));
    let stats = client
        .queue_stats_capped(Some(COUNT_CAP))
        .await
        .expect("stats");
    let big = stats.iter().find(|s| s.queue == "big").expect("queue");
    assert_eq!(big.count(JobState::Completed), COUNT_CAP);
    assert!(big.is_capped(JobState::Completed));
    assert_eq!(big.count(JobState::Failed), 2);
    assert!(!big.is_capped(JobState::Failed));
    assert_eq!(big.count(JobState::Available), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_of_every_state_merges_them_latest_first_without_a_job_missed_or_repeated() {
    let (db, client) = common::setup().await;
    let ids = insert(&client, &["a", "b"], 40).await;
    let database = db.database().expect("db");
    set_state(&database, &ids[..20], "completed", None).await;
    set_state(&database, &ids[20..30], "failed", None).await;
    let conn = database.conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'scheduled', run_at = now() + (id % 50) * interval '1 minute'
         WHERE id = ANY($1)",
        &[&&ids[30..45]],
    )
    .await
    .expect("scheduled");
    let all = walk(&client, JobFilter::default(), 7).await;
    let mut seen: Vec<i64> = all.iter().map(|j| j.id).collect();
    seen.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(seen, expected, "every job once");
    let times: Vec<_> = all
        .iter()
        .map(|j| (remuda::client::listed_at(j), j.id))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] > w[1]),
        "latest first by the time that fits each state: {times:?}"
    );
    let of_b = walk(
        &client,
        JobFilter {
            queue: Some("b".into()),
            ..Default::default()
        },
        5,
    )
    .await;
    assert_eq!(of_b.len(), 40);
    assert!(of_b.iter().all(|j| j.queue == "b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_action_on_every_state_meets_each_job_once_running_ones_included() {
    let (db, client) = common::setup().await;
    // more than a statement's batch, the first ones due later than the rest: a walk by time
    // would meet the cancelled ones again
    let ids = insert(&client, &["a"], 1200).await;
    let database = db.database().expect("db");
    let conn = database.conn().await.expect("conn");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'scheduled', run_at = now() + interval '1 day'
         WHERE id = ANY($1)",
        &[&&ids[..600]],
    )
    .await
    .expect("scheduled");
    // running, claimed since its worker last reported
    set_state(&database, &ids[600..601], "running", Some("w-1-x")).await;
    let outcome = client
        .act_on_matching(
            &JobFilter::default(),
            remuda::BulkAction::Cancel,
            None,
            false,
        )
        .await
        .expect("bulk cancel");
    assert_eq!(
        (outcome.matched, outcome.changed),
        (1200, 1200),
        "{outcome:?}"
    );
}
