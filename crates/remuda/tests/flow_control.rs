//! Flow control under racing workers: queue pause, per-queue and cluster-wide caps on running
//! jobs, per-key limits with fair turns between keys, rate limits, admission control and queue
//! order. Limits are checked by sampling the database while the workers race: a single sample
//! over the limit fails the test.

mod common;

use common::{fast_config, setup, start, Running};
use remuda::{
    Client, Fairness, JobContext, NewJob, QueueChange, Task, TaskError, TaskOptions, Worker,
    WorkerConfig,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sleeps for its argument in milliseconds.
struct Nap;

impl Task for Nap {
    const KIND: &'static str = "nap";
    type Args = u64;
    type Output = ();

    fn options() -> TaskOptions {
        TaskOptions::default().queue("limited")
    }

    async fn run(&self, _ctx: JobContext, ms: u64) -> Result<(), TaskError> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    }
}

fn workers(client: &Client, n: usize, queues: &[&str]) -> Vec<Running> {
    (0..n)
        .map(|_| {
            start(
                Worker::new(client.clone())
                    .config(WorkerConfig {
                        concurrency: 4,
                        queues: queues.iter().map(|q| q.to_string()).collect(),
                        ..fast_config()
                    })
                    .register(Nap),
            )
        })
        .collect()
}

async fn scalar(client: &Client, query: &str) -> i64 {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(query, &[])
        .await
        .expect("query")
        .get(0)
}

/// Samples `query` (a count) every few milliseconds until `done`, returning the largest value.
fn sampler(
    client: &Client,
    query: &'static str,
    done: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<i64> {
    let client = client.clone();
    tokio::spawn(async move {
        let mut max = 0;
        while !done.load(Ordering::SeqCst) {
            max = max.max(scalar(&client, query).await);
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        max
    })
}

/// Start times of the jobs (of one concurrency key), in order.
async fn start_times(client: &Client, key: Option<&str>) -> Vec<chrono::DateTime<chrono::Utc>> {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query(
            "SELECT started_at FROM remuda.jobs
             WHERE $1::text IS NULL OR concurrency_key = $1 ORDER BY started_at",
            &[&key],
        )
        .await
        .expect("starts")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The most starts within any one second.
fn most_starts_in_a_second(starts: &[chrono::DateTime<chrono::Utc>]) -> usize {
    (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|u| **u - starts[i] < chrono::Duration::seconds(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

async fn wait_all_completed(client: &Client, n: i64, limit: Duration) {
    let started = Instant::now();
    while scalar(
        client,
        "SELECT count(*) FROM remuda.jobs WHERE state = 'completed'",
    )
    .await
        < n
    {
        assert!(
            started.elapsed() < limit,
            "jobs did not all complete in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn stop(workers: Vec<Running>) {
    for w in workers {
        w.shutdown().await;
    }
}

fn naps(n: usize, ms: u64) -> Vec<NewJob> {
    (0..n)
        .map(|_| NewJob::for_task::<Nap>(&ms).expect("job"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_per_queue_holds_with_eight_workers_racing() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                max_running: Some(Some(3)),
                ..Default::default()
            },
        )
        .await
        .expect("limit");
    client.insert_many(&naps(150, 15)).await.expect("enqueue");
    let done = Arc::new(AtomicBool::new(false));
    let sample = sampler(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE state = 'running' AND queue = 'limited'",
        done.clone(),
    );
    let racing = workers(&client, 8, &["limited"]);
    wait_all_completed(&client, 150, Duration::from_secs(60)).await;
    done.store(true, Ordering::SeqCst);
    let max = sample.await.expect("sampler");
    stop(racing).await;
    assert!(max <= 3, "{max} jobs ran at once, over max_running 3");
    assert!(max >= 2, "the limit was used ({max})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_cap_holds_across_queues() {
    let (_db, client) = setup().await;
    client.set_cluster_max_running(Some(5)).await.expect("cap");
    let mut jobs = naps(80, 15);
    jobs.extend(naps(80, 15).into_iter().map(|j| j.queue("other")));
    client.insert_many(&jobs).await.expect("enqueue");
    let done = Arc::new(AtomicBool::new(false));
    let sample = sampler(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE state = 'running'",
        done.clone(),
    );
    let racing = workers(&client, 8, &["limited", "other"]);
    wait_all_completed(&client, 160, Duration::from_secs(60)).await;
    done.store(true, Ordering::SeqCst);
    let max = sample.await.expect("sampler");
    stop(racing).await;
    assert!(
        max <= 5,
        "{max} jobs ran at once, over the cluster cap of 5"
    );
    assert!(max >= 3, "the cap was used ({max})");
    client.set_cluster_max_running(None).await.expect("clear");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_limit_holds_and_a_big_tenant_does_not_starve_a_small_one() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                key_limit: Some(Some(2)),
                ..Default::default()
            },
        )
        .await
        .expect("limit");
    // the big tenant's backlog is enqueued first
    let big: Vec<NewJob> = naps(300, 10)
        .into_iter()
        .map(|j| j.concurrency_key("customer:1"))
        .collect();
    client.insert_many(&big).await.expect("enqueue");
    let small: Vec<NewJob> = naps(10, 10)
        .into_iter()
        .map(|j| j.concurrency_key("customer:2"))
        .collect();
    client.insert_many(&small).await.expect("enqueue");
    let done = Arc::new(AtomicBool::new(false));
    let sample = sampler(
        &client,
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM remuda.jobs
         WHERE state = 'running' GROUP BY concurrency_key) k",
        done.clone(),
    );
    let racing = workers(&client, 4, &["limited"]);
    // the small tenant's ten jobs finish while most of the big backlog still waits
    let started = Instant::now();
    loop {
        let small_done = scalar(
            &client,
            "SELECT count(*) FROM remuda.jobs WHERE state = 'completed' AND concurrency_key = 'customer:2'",
        )
        .await;
        if small_done == 10 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the small tenant starved"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let big_done = scalar(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE state = 'completed' AND concurrency_key = 'customer:1'",
    )
    .await;
    assert!(
        big_done < 150,
        "the small tenant waited for half the big backlog ({big_done})"
    );
    wait_all_completed(&client, 310, Duration::from_secs(120)).await;
    done.store(true, Ordering::SeqCst);
    let max = sample.await.expect("sampler");
    stop(racing).await;
    assert!(
        max <= 2,
        "{max} jobs of one key ran at once, over key_limit 2"
    );
    assert_eq!(max, 2, "the limit was used");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_spaces_starts_across_workers() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                rate: Some(Some((10, Duration::from_secs(1)))),
                ..Default::default()
            },
        )
        .await
        .expect("rate");
    client.insert_many(&naps(30, 1)).await.expect("enqueue");
    let racing = workers(&client, 4, &["limited"]);
    wait_all_completed(&client, 30, Duration::from_secs(30)).await;
    stop(racing).await;
    // a bucket of 10 that refills 10 a second: at most 20 starts in any second, and 30
    // starts take at least 2 s
    let starts = start_times(&client, None).await;
    let busiest = most_starts_in_a_second(&starts);
    assert!(busiest <= 20, "{busiest} starts within a second");
    let spread = starts[starts.len() - 1] - starts[0];
    assert!(
        spread >= chrono::Duration::milliseconds(1800),
        "30 starts at 10/s took only {spread}"
    );
}

/// Asserts that no more than `burst` of `starts` (in order) went at once, and the rest came
/// no faster than `per_start` apart after them (the bucket's refill).
fn assert_bursts(
    starts: &[chrono::DateTime<chrono::Utc>],
    burst: usize,
    per_start: i64,
    what: &str,
) {
    // (the claim's time and its bucket's clock differ by the statement's own microseconds)
    let slack = chrono::Duration::milliseconds(15);
    for (k, at) in starts.iter().enumerate().skip(burst) {
        let least = chrono::Duration::milliseconds(per_start * (k + 1 - burst) as i64);
        assert!(
            *at - starts[0] + slack >= least,
            "{what}: start {k} came {} after the first, before {least}",
            *at - starts[0]
        );
    }
    assert!(
        starts[burst - 1] - starts[0] < chrono::Duration::milliseconds(per_start),
        "{what}: the burst of {burst} did not go at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rates_burst_caps_the_starts_at_once_and_spreads_the_rest_evenly() {
    let (_db, client) = setup().await;
    let refused = client
        .change_queue(
            "limited",
            &QueueChange {
                rate_burst: Some(2),
                ..Default::default()
            },
        )
        .await
        .expect_err("a burst without a rate");
    assert!(
        refused.to_string().contains("give the rate too"),
        "{refused}"
    );
    // one bucket per key, of 2 tokens, refilled 10 a second
    client
        .change_queue(
            "limited",
            &QueueChange {
                rate: Some(Some((10, Duration::from_secs(1)))),
                rate_per: Some(remuda::RatePer::Key),
                rate_burst: Some(2),
                ..Default::default()
            },
        )
        .await
        .expect("rate");
    assert_eq!(
        client.queue("limited").await.expect("show").rate_burst,
        Some(2)
    );
    let mut jobs = Vec::new();
    for key in ["a", "b"] {
        jobs.extend(naps(6, 1).into_iter().map(|j| j.concurrency_key(key)));
    }
    client.insert_many(&jobs).await.expect("enqueue");
    let racing = workers(&client, 2, &["limited"]);
    wait_all_completed(&client, 12, Duration::from_secs(30)).await;
    stop(racing).await;
    for key in ["a", "b"] {
        assert_bursts(&start_times(&client, Some(key)).await, 2, 100, key);
    }
    // the queue's one bucket, of 1 token: every start a tenth of a second after the last
    client
        .change_queue(
            "limited",
            &QueueChange {
                rate: Some(Some((10, Duration::from_secs(1)))),
                rate_burst: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("rate");
    let conn = client.database().conn().await.expect("conn");
    conn.execute("DELETE FROM remuda.jobs", &[])
        .await
        .expect("clear");
    client.insert_many(&naps(6, 1)).await.expect("enqueue");
    let racing = workers(&client, 2, &["limited"]);
    wait_all_completed(&client, 6, Duration::from_secs(30)).await;
    stop(racing).await;
    assert_bursts(&start_times(&client, None).await, 1, 100, "the queue");
    // a rate set again without a burst holds its N again
    let again = QueueChange {
        rate: Some(Some((10, Duration::from_secs(1)))),
        ..Default::default()
    };
    let shown = client.change_queue("limited", &again).await.expect("rate");
    assert_eq!(shown.rate_burst, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_keeps_its_jobs_until_resumed() {
    let (_db, client) = setup().await;
    let racing = workers(&client, 2, &["limited"]);
    client.pause_queue("limited").await.expect("pause");
    // a worker sees the pause within a second (here: at once, by notification)
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let id = client
        .insert(NewJob::for_task::<Nap>(&1).expect("job"))
        .await
        .expect("enqueue");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let job = client.job(id).await.expect("get").expect("exists");
    assert_eq!(
        job.state,
        remuda::JobState::Available,
        "paused: not claimed"
    );
    assert!(client.queue("limited").await.expect("show").paused);
    client.resume_queue("limited").await.expect("resume");
    let job = client
        .wait(id, Duration::from_secs(5))
        .await
        .expect("ran after resume");
    assert_eq!(job.state, remuda::JobState::Completed);
    stop(racing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_over_max_depth_is_refused_whole() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                max_depth: Some(Some(5)),
                ..Default::default()
            },
        )
        .await
        .expect("depth");
    client.insert_many(&naps(4, 1)).await.expect("four fit");
    let err = client
        .insert_many(&naps(2, 1))
        .await
        .expect_err("six do not");
    assert!(matches!(err, remuda::Error::QueueFull(_)), "{err:?}");
    assert!(err.to_string().contains("max_depth of 5"), "{err}");
    let err = client
        .insert_bulk(&naps(3, 1))
        .await
        .expect_err("nor by COPY");
    assert!(matches!(err, remuda::Error::QueueFull(_)), "{err:?}");
    assert_eq!(
        scalar(&client, "SELECT count(*) FROM remuda.jobs").await,
        4,
        "all or none"
    );
    // racing enqueuers never push it over
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut ok = 0;
                for _ in 0..5 {
                    if client
                        .insert(NewJob::for_task::<Nap>(&1).expect("job"))
                        .await
                        .is_ok()
                    {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let mut accepted = 0;
    for r in racers {
        accepted += r.await.expect("join");
    }
    assert_eq!(accepted, 1, "one more fit");
    assert_eq!(scalar(&client, "SELECT count(*) FROM remuda.jobs").await, 5);
    // other queues are not affected
    client
        .insert_many(
            &naps(10, 1)
                .into_iter()
                .map(|j| j.queue("free"))
                .collect::<Vec<_>>(),
        )
        .await
        .expect("no limit there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_queue_order_runs_the_first_queue_first() {
    let (_db, client) = setup().await;
    let mut jobs: Vec<NewJob> = naps(20, 5).into_iter().map(|j| j.queue("low")).collect();
    jobs.extend(naps(20, 5).into_iter().map(|j| j.queue("high")));
    client.insert_many(&jobs).await.expect("enqueue");
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: 2,
                claim_batch: 2,
                queues: vec!["high".into(), "low".into()],
                queue_order: remuda::worker::QueueOrder::Strict,
                ..fast_config()
            })
            .register(Nap),
    );
    wait_all_completed(&client, 40, Duration::from_secs(30)).await;
    worker.shutdown().await;
    let last_high: chrono::DateTime<chrono::Utc> = client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT max(started_at) FROM remuda.jobs WHERE queue = 'high'",
            &[],
        )
        .await
        .expect("q")
        .get(0);
    let first_low: chrono::DateTime<chrono::Utc> = client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT min(started_at) FROM remuda.jobs WHERE queue = 'low'",
            &[],
        )
        .await
        .expect("q")
        .get(0);
    assert!(
        last_high <= first_low,
        "a low job started before the high queue was empty"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_only_on_the_named_worker_or_one_with_every_capability() {
    let (_db, client) = setup().await;
    let worker = |name: &str, caps: &[&str]| {
        start(
            Worker::new(client.clone())
                .config(WorkerConfig {
                    name: Some(name.into()),
                    capabilities: caps.iter().map(|c| c.to_string()).collect(),
                    queues: vec!["limited".into()],
                    maintenance: true,
                    ..fast_config()
                })
                .register(Nap),
        )
    };
    let racing = vec![
        worker("gpu-1", &["gpu", "ffmpeg"]),
        worker("gpu-2", &["gpu"]),
        worker("cpu-1", &[]),
        worker("cpu-2", &["ffmpeg"]),
    ];
    let nap = || NewJob::for_task::<Nap>(&2).expect("job");
    let mut jobs = Vec::new();
    for _ in 0..10 {
        jobs.push(nap().target_worker("gpu-1"));
        jobs.push(nap().requires(["gpu"]));
        jobs.push(nap().requires(["gpu", "ffmpeg"]));
        jobs.push(nap());
    }
    let ids = client.insert_many(&jobs).await.expect("enqueue");
    let nobody = client
        .insert_many(&[
            nap().requires(["tpu"]),
            nap().target_worker("gpu-9"),
            nap()
                .requires(["tpu"])
                .expires_at(chrono::Utc::now() + chrono::Duration::milliseconds(300)),
        ])
        .await
        .expect("enqueue");
    wait_all_completed(&client, 40, Duration::from_secs(30)).await;
    for (i, id) in ids.iter().enumerate() {
        let job = client.job(*id).await.expect("get").expect("exists");
        let ran_on = job.worker.as_deref().unwrap_or("?");
        match i % 4 {
            0 => assert_eq!(ran_on, "gpu-1", "{job:?}"),
            1 => assert!(ran_on.starts_with("gpu-"), "{job:?}"),
            2 => assert_eq!(ran_on, "gpu-1", "only gpu-1 has both: {job:?}"),
            _ => {}
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let expired = client.job(nobody[2]).await.expect("get").expect("exists");
        if expired.state == remuda::JobState::Expired {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the unroutable job's deadline expires it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = client.queue_stats().await.expect("stats");
    let limited = stats.iter().find(|s| s.queue == "limited").expect("queue");
    assert_eq!(limited.unroutable, 2, "visible as nobody's: {stats:?}");
    for id in &nobody[..2] {
        let job = client.job(*id).await.expect("get").expect("exists");
        assert_eq!(job.state, remuda::JobState::Available);
    }
    stop(racing).await;
    let job = client.job(nobody[0]).await.expect("get").expect("exists");
    assert_eq!(job.requires, Some(vec!["tpu".to_string()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_per_key_gives_each_key_its_own_bucket() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                rate: Some(Some((5, Duration::from_secs(1)))),
                rate_per: Some(remuda::RatePer::Key),
                ..Default::default()
            },
        )
        .await
        .expect("rate");
    let mut jobs = Vec::new();
    for key in ["a", "b"] {
        jobs.extend(naps(12, 1).into_iter().map(|j| j.concurrency_key(key)));
    }
    client.insert_many(&jobs).await.expect("enqueue");
    let racing = workers(&client, 4, &["limited"]);
    wait_all_completed(&client, 24, Duration::from_secs(30)).await;
    stop(racing).await;
    let conn = client.database().conn().await.expect("conn");
    let mut first_second_total = 0;
    let all_first: chrono::DateTime<chrono::Utc> = conn
        .query_one("SELECT min(started_at) FROM remuda.jobs", &[])
        .await
        .expect("q")
        .get(0);
    for key in ["a", "b"] {
        let starts = start_times(&client, Some(key)).await;
        let busiest = most_starts_in_a_second(&starts);
        assert!(busiest <= 10, "key {key}: {busiest} starts within a second");
        assert!(
            starts[starts.len() - 1] - starts[0] >= chrono::Duration::milliseconds(900),
            "key {key}: 12 starts at 5/s need more than a second"
        );
        first_second_total += starts
            .iter()
            .filter(|t| **t - all_first < chrono::Duration::milliseconds(500))
            .count();
    }
    assert!(
        first_second_total >= 8,
        "both keys started their bursts at once ({first_second_total} in the first half second): one bucket per key, not one for the queue"
    );
    let shown = client.queue("limited").await.expect("show");
    assert_eq!(shown.rate_per, remuda::RatePer::Key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_nobody_can_run_at_the_head_of_a_limited_queue_do_not_block_it() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                max_running: Some(Some(2)),
                ..Default::default()
            },
        )
        .await
        .expect("limit");
    let stuck: Vec<NewJob> = naps(20, 1)
        .into_iter()
        .map(|j| j.target_worker("offline"))
        .collect();
    client.insert_many(&stuck).await.expect("enqueue");
    let others = client.insert_many(&naps(5, 1)).await.expect("enqueue");
    let racing = workers(&client, 2, &["limited"]);
    for id in others {
        let job = client
            .wait(id, Duration::from_secs(10))
            .await
            .expect("ran past the jobs nobody can take");
        assert_eq!(job.state, remuda::JobState::Completed);
    }
    stop(racing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_round_robin_gives_a_heavier_queue_more_turns() {
    let (_db, client) = setup().await;
    let mut jobs: Vec<NewJob> = naps(40, 1).into_iter().map(|j| j.queue("light")).collect();
    jobs.extend(naps(40, 1).into_iter().map(|j| j.queue("heavy")));
    client.insert_many(&jobs).await.expect("enqueue");
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: 1,
                claim_batch: 1,
                queues: vec!["light".into(), "heavy".into()],
                queue_weights: [("heavy".to_string(), 3)].into_iter().collect(),
                ..fast_config()
            })
            .register(Nap),
    );
    wait_all_completed(&client, 40, Duration::from_secs(30)).await;
    worker.shutdown().await;
    // of the first 40 starts, about three quarters went to the heavy queue
    let heavy: i64 = scalar(
        &client,
        "SELECT count(*) FROM (SELECT queue FROM remuda.jobs WHERE started_at IS NOT NULL
                               ORDER BY started_at, id LIMIT 40) f WHERE queue = 'heavy'",
    )
    .await;
    assert!(
        (26..=34).contains(&heavy),
        "{heavy} of the first 40 starts were heavy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_shorter_than_the_poll_interval_is_used_in_full() {
    let (_db, client) = setup().await;
    // 50 starts a second in buckets of 10 per 200 ms; the worker polls once a second, and its
    // jobs outlast the test, so no completion wakes it either: only the bucket's refill can
    client
        .change_queue(
            "limited",
            &QueueChange {
                rate: Some(Some((10, Duration::from_millis(200)))),
                ..Default::default()
            },
        )
        .await
        .expect("rate");
    client
        .insert_many(&naps(300, 60_000))
        .await
        .expect("enqueue");
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: 300,
                queues: vec!["limited".into()],
                poll_interval: Duration::from_secs(1),
                shutdown_timeout: Duration::from_millis(100),
                cancel_grace: Duration::from_millis(100),
                ..fast_config()
            })
            .register(Nap),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = scalar(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE started_at IS NOT NULL",
    )
    .await;
    worker.shutdown().await;
    // a claim per poll would have started about 10 + 2 × 10; the rate allows 10 + 2 × 50
    assert!(
        (60..=115).contains(&started),
        "{started} jobs started in 2 s at 10 per 200 ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_without_a_key_behind_a_tenant_at_its_limit_is_found() {
    let (_db, client) = setup().await;
    client
        .change_queue(
            "limited",
            &QueueChange {
                key_limit: Some(Some(1)),
                ..Default::default()
            },
        )
        .await
        .expect("key limit");
    // 1 500 jobs of one tenant ahead of a job without a key: more than the 1 000 a claim
    // looks through for jobs without a key
    let hot: Vec<NewJob> = naps(1500, 60_000)
        .into_iter()
        .map(|j| j.concurrency_key("hot").priority(-1))
        .collect();
    client.insert_bulk(&hot).await.expect("enqueue the tenant");
    let lone = client.insert(naps(1, 1).remove(0)).await.expect("enqueue");
    let worker = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: 4,
                queues: vec!["limited".into()],
                shutdown_timeout: Duration::from_millis(100),
                cancel_grace: Duration::from_millis(100),
                ..fast_config()
            })
            .register(Nap),
    );
    let job = client
        .wait(lone, Duration::from_secs(10))
        .await
        .expect("the job without a key runs while the tenant waits at its limit");
    assert_eq!(job.state, remuda::JobState::Completed);
    worker.shutdown().await;
}

/// Holds queue `limited`'s claim lock until a worker's claim waits for it, enqueues a job
/// meanwhile, lets the claim go on and returns the job's (created_at, started_at).
async fn start_behind_the_claim_lock(
    change: QueueChange,
) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
    let (_db, client) = setup().await;
    client
        .change_queue("limited", &change)
        .await
        .expect("limit");
    let mut holder = client.database().conn().await.expect("conn");
    let lock = holder.transaction().await.expect("transaction");
    lock.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('remuda.claim:limited', 0))",
        &[],
    )
    .await
    .expect("the claim lock");
    let worker = workers(&client, 1, &["limited"]).remove(0);
    // the worker's claim (a poll of the empty queue) waits for the lock, its transaction begun
    let deadline = Instant::now() + Duration::from_secs(20);
    while scalar(
        &client,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
           AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
    )
    .await
        == 0
    {
        assert!(Instant::now() < deadline, "no claim waited for the lock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let id = client
        .insert(NewJob::for_task::<Nap>(&0).expect("job"))
        .await
        .expect("enqueue");
    lock.commit().await.expect("release");
    let job = client
        .wait(id, Duration::from_secs(20))
        .await
        .expect("the job ran");
    stop(vec![worker]).await;
    (job.created_at, job.started_at.expect("started"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_claim_stamps_the_moment_it_took_the_job_not_its_wait_for_the_lock() {
    let (created, started) = start_behind_the_claim_lock(QueueChange {
        max_running: Some(Some(3)),
        ..Default::default()
    })
    .await;
    assert!(
        started >= created,
        "started {started} before created {created}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_claim_stamps_the_moment_it_took_the_job_not_its_wait_for_the_lock() {
    let (created, started) = start_behind_the_claim_lock(QueueChange {
        fairness: Some(Fairness::Group),
        ..Default::default()
    })
    .await;
    assert!(
        started >= created,
        "started {started} before created {created}"
    );
}
