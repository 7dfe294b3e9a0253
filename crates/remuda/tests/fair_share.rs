//! Weighted fair share between the groups of a queue (`fairness = group`), within one worker
//! process: priority first, then the groups share each priority's starts; the jobs without a
//! group get their share behind any backlog; groups nobody here can run hold back no one, caps and weights hold together, and every way in
//! (one, many, COPY, unique, formed, SQL) keeps the job's group.

mod common;

use common::{fast_config, setup, start, Running};
use remuda::{
    Client, Fairness, JobContext, NewJob, QueueChange, Task, TaskError, TaskOptions, Worker,
    WorkerConfig,
};
use std::time::{Duration, Instant};

/// Does nothing, in the fair queue.
struct Tick;

impl Task for Tick {
    const KIND: &'static str = "tick";
    type Args = u64;
    type Output = ();

    fn options() -> TaskOptions {
        TaskOptions::default().queue("fair")
    }

    async fn run(&self, _ctx: JobContext, ms: u64) -> Result<(), TaskError> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    }
}

fn worker(client: &Client, concurrency: usize) -> Running {
    start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency,
                queues: vec!["fair".into()],
                ..fast_config()
            })
            .register(Tick),
    )
}

async fn fair_queue(client: &Client, change: QueueChange) {
    client
        .change_queue(
            "fair",
            &QueueChange {
                fairness: Some(Fairness::Group),
                ..change
            },
        )
        .await
        .expect("fair queue");
}

fn ticks(group: Option<&str>, n: usize, priority: i32) -> Vec<NewJob> {
    (0..n)
        .map(|_| {
            let job = NewJob::for_task::<Tick>(&1)
                .expect("job")
                .priority(priority);
            match group {
                Some(g) => job.group(g),
                None => job,
            }
        })
        .collect()
}

/// (group, priority) of the started jobs, in the order they started.
async fn started(client: &Client) -> Vec<(String, i32)> {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query(
            "SELECT coalesce(group_key, ''), priority FROM remuda.jobs
             WHERE started_at IS NOT NULL ORDER BY started_at, id",
            &[],
        )
        .await
        .expect("starts")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn wait_completed(client: &Client, n: usize) {
    let started = Instant::now();
    loop {
        let done: i64 = client
            .database()
            .conn()
            .await
            .expect("conn")
            .query_one(
                "SELECT count(*) FROM remuda.jobs WHERE state = 'completed'",
                &[],
            )
            .await
            .expect("count")
            .get(0);
        if done as usize >= n {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "only {done} of {n} jobs completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_comes_first_and_the_groups_share_each_priority() {
    let (_db, client) = setup().await;
    fair_queue(&client, QueueChange::default()).await;
    // `a` has low-priority jobs first in line, enqueued on their own, and urgent ones behind;
    // `b` only urgent ones
    client
        .insert_many(&ticks(Some("a"), 6, 5))
        .await
        .expect("enqueue");
    let mut jobs = ticks(Some("a"), 6, 0);
    jobs.extend(ticks(Some("b"), 12, 0));
    client.insert_many(&jobs).await.expect("enqueue");
    let running = worker(&client, 1);
    wait_completed(&client, 24).await;
    running.shutdown().await;

    let order = started(&client).await;
    // the urgent jobs first, a's and b's one start each in turn while both have some
    for (n, pair) in order[..12].chunks_exact(2).enumerate() {
        let mut groups: Vec<&str> = pair.iter().map(|(g, _)| g.as_str()).collect();
        groups.sort_unstable();
        assert_eq!(groups, ["a", "b"], "pair {n} of {order:?}");
        assert!(pair.iter().all(|(_, p)| *p == 0), "pair {n} of {order:?}");
    }
    // then b's other urgent jobs, and a's others last
    let rest: Vec<(&str, i32)> = order[12..].iter().map(|(g, p)| (g.as_str(), *p)).collect();
    assert_eq!(
        rest,
        [[("b", 0); 6].as_slice(), [("a", 5); 6].as_slice()].concat(),
        "{order:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_without_a_group_get_their_share_behind_a_grouped_backlog() {
    let (_db, client) = setup().await;
    fair_queue(&client, QueueChange::default()).await;
    // a tenant's backlog well past the first thousand waiting jobs, then a small tenant and
    // jobs without a group, enqueued after it
    client
        .insert_many(&ticks(Some("big"), 3000, 0))
        .await
        .expect("backlog");
    let mut jobs = ticks(Some("small"), 150, 0);
    jobs.extend(ticks(None, 150, 0));
    client.insert_many(&jobs).await.expect("enqueue");
    // (a long poll interval: a claim that looks through the whole queue is rare)
    let running = start(
        Worker::new(client.clone())
            .config(WorkerConfig {
                concurrency: 10,
                queues: vec!["fair".into()],
                poll_interval: Duration::from_secs(30),
                ..fast_config()
            })
            .register(Tick),
    );
    wait_completed(&client, 600).await;
    running.shutdown().await;

    // the three share the first 300 starts a third each
    let order = started_groups(&client).await;
    for group in ["big", "small", ""] {
        let n = order[..300].iter().filter(|g| *g == group).count();
        assert!(
            (85..=115).contains(&n),
            "group {group:?}: {n} of the first 300 starts"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_nobody_here_can_run_and_the_jobs_without_a_group_hold_back_no_one() {
    let (_db, client) = setup().await;
    fair_queue(&client, QueueChange::default()).await;
    // a group whose jobs only an absent worker may run, first in line with the least
    // virtual time forever (nobody starts its jobs)
    let stuck: Vec<NewJob> = ticks(Some("stuck"), 50, -1)
        .into_iter()
        .map(|j| j.target_worker("offline"))
        .collect();
    client.insert_many(&stuck).await.expect("enqueue");
    let mut jobs = ticks(Some("live"), 30, 0);
    jobs.extend(ticks(None, 30, 0));
    client.insert_many(&jobs).await.expect("enqueue");
    let running = worker(&client, 1);
    wait_completed(&client, 60).await;
    running.shutdown().await;

    // the group '' (no group) and `live` shared the starts one for one
    let order = started(&client).await;
    let first: Vec<&str> = order[..20].iter().map(|(g, _)| g.as_str()).collect();
    let live = first.iter().filter(|g| **g == "live").count();
    assert!((9..=11).contains(&live), "{first:?}");
    let groups = client.queue_groups("fair").await.expect("groups");
    let stuck = groups
        .iter()
        .find(|g| g.group.as_deref() == Some("stuck"))
        .expect("the stuck group is listed");
    assert_eq!((stuck.waiting, stuck.starts_last_minute), (50, 0));
    let none = groups
        .iter()
        .find(|g| g.group.is_none())
        .expect("the jobs without a group are listed");
    assert_eq!(none.starts_last_minute, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_holds_in_a_fair_queue_and_the_weights_hold_under_it() {
    let (_db, client) = setup().await;
    fair_queue(
        &client,
        QueueChange {
            max_running: Some(Some(2)),
            ..QueueChange::default()
        },
    )
    .await;
    client
        .set_group_weight("fair", Some("heavy"), 4.0)
        .await
        .expect("weight");
    let mut jobs = ticks(Some("heavy"), 200, 0);
    jobs.extend(ticks(Some("light"), 50, 0));
    // 20 ms each: a cap of 2 is reached
    for job in &mut jobs {
        job.args = remuda::Jsonb("20".into());
    }
    client.insert_many(&jobs).await.expect("enqueue");
    let conn = client.database().conn().await.expect("conn");
    let runners: Vec<Running> = (0..2).map(|_| worker(&client, 4)).collect();
    let mut most = 0i64;
    let started = Instant::now();
    loop {
        let row = conn
            .query_one(
                "SELECT count(*) FILTER (WHERE state = 'running'),
                        count(*) FILTER (WHERE state = 'completed') FROM remuda.jobs",
                &[],
            )
            .await
            .expect("sample");
        most = most.max(row.get(0));
        if row.get::<_, i64>(1) >= 250 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "drain");
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    for r in runners {
        r.shutdown().await;
    }
    assert!(most <= 2, "{most} running under a cap of 2");
    let order = started_groups(&client).await;
    let heavy = order[..200].iter().filter(|g| *g == "heavy").count();
    assert!(
        (150..=170).contains(&heavy),
        "weight 4 to 1: {heavy} of 200"
    );
}

async fn started_groups(client: &Client) -> Vec<String> {
    started(client).await.into_iter().map(|(g, _)| g).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_in_keeps_the_group() {
    let (_db, client) = setup().await;
    let one = client
        .insert(NewJob::for_task::<Tick>(&1).expect("job").group("one"))
        .await
        .expect("one");
    let many = client
        .insert_many(&[NewJob::for_task::<Tick>(&1).expect("job").group("many")])
        .await
        .expect("many")[0];
    client
        .insert_bulk(&[NewJob::for_task::<Tick>(&1).expect("job").group("copy")])
        .await
        .expect("copy");
    let unique = client
        .insert(
            NewJob::for_task::<Tick>(&1)
                .expect("job")
                .group("unique")
                .unique_key("u"),
        )
        .await
        .expect("unique");
    let debounced = client
        .insert(
            NewJob::for_task::<Tick>(&1)
                .expect("job")
                .group("formed")
                .unique_key("d")
                .debounce(Duration::from_secs(60)),
        )
        .await
        .expect("debounced");
    let conn = client.database().conn().await.expect("conn");
    let sql: i64 = conn
        .query_one(
            "SELECT remuda.enqueue('tick', '1', queue => 'fair', group_key => 'sql')",
            &[],
        )
        .await
        .expect("sql")
        .get(0);
    let group = async |id: i64| -> Option<String> {
        conn.query_one("SELECT group_key FROM remuda.jobs WHERE id = $1", &[&id])
            .await
            .expect("job")
            .get(0)
    };
    assert_eq!(group(one).await.as_deref(), Some("one"));
    assert_eq!(group(many).await.as_deref(), Some("many"));
    assert_eq!(group(unique).await.as_deref(), Some("unique"));
    assert_eq!(group(debounced).await.as_deref(), Some("formed"));
    assert_eq!(group(sql).await.as_deref(), Some("sql"));
    let copied: i64 = conn
        .query_one(
            "SELECT count(*) FROM remuda.jobs WHERE group_key = 'copy'",
            &[],
        )
        .await
        .expect("copy")
        .get(0);
    assert_eq!(copied, 1);

    // an empty or oversized group is refused with what was wrong, and nothing is written
    let refused = client
        .insert(NewJob::for_task::<Tick>(&1).expect("job").group(""))
        .await
        .expect_err("an empty group");
    assert!(refused.to_string().contains("group"), "{refused}");
    let refused = conn
        .query_one(
            "SELECT remuda.enqueue('tick', '1', group_key => repeat('g', 1001))",
            &[],
        )
        .await
        .expect_err("an oversized group");
    assert!(
        refused
            .to_string()
            .contains("group must be 1 to 1000 bytes")
            || format!("{refused:?}").contains("group must be 1 to 1000 bytes"),
        "{refused:?}"
    );
    let weight = client.set_group_weight("fair", Some("a"), 0.0).await;
    assert!(weight.is_err(), "a weight of 0 is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_its_limit_holds_back_only_its_own_jobs_not_its_groups_others() {
    let (_db, client) = setup().await;
    fair_queue(
        &client,
        QueueChange {
            key_limit: Some(Some(1)),
            ..QueueChange::default()
        },
    )
    .await;
    // the group's first 40 jobs share key `a` (one at a time), then 20 of key `b…`
    let mut jobs: Vec<NewJob> = ticks(Some("g"), 40, 0)
        .into_iter()
        .map(|j| j.concurrency_key("a"))
        .collect();
    jobs.extend(
        ticks(Some("g"), 20, 0)
            .into_iter()
            .enumerate()
            .map(|(i, j)| j.concurrency_key(format!("b{i}"))),
    );
    for job in &mut jobs {
        job.args = remuda::Jsonb("20".into());
    }
    client.insert_many(&jobs).await.expect("enqueue");
    let running = worker(&client, 4);
    wait_completed(&client, 60).await;
    running.shutdown().await;
    let keys: Vec<String> = client
        .database()
        .conn()
        .await
        .expect("conn")
        .query(
            "SELECT concurrency_key FROM remuda.jobs ORDER BY started_at, id LIMIT 12",
            &[],
        )
        .await
        .expect("starts")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let others = keys.iter().filter(|k| k.starts_with('b')).count();
    assert!(others >= 8, "the other keys start beside `a`: {keys:?}");
}

/// The start tags of `group`'s waiting jobs in fair queue `fair`, in id order.
async fn tags(client: &Client, group: &str) -> Vec<Option<f64>> {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query(
            "SELECT fair_tag FROM remuda.jobs WHERE queue = 'fair' AND group_key = $1 ORDER BY id",
            &[&group],
        )
        .await
        .expect("tags")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_enqueues_of_one_group_at_once_never_share_a_turn_nor_wait_for_each_other() {
    let (_db, client) = setup().await;
    fair_queue(&client, QueueChange::default()).await;
    let insert =
        "INSERT INTO remuda.jobs (kind, queue, group_key, args) VALUES ('tick', 'fair', 'g', '1')";
    let mut first = client.database().conn().await.expect("conn");
    let mut second = client.database().conn().await.expect("conn");
    let one = first.transaction().await.expect("begin");
    one.execute(insert, &[]).await.expect("first enqueue");
    // the second enqueue of the group, while the first is not committed, does not wait for it
    // and takes no turn the first may also have taken
    let two = second.transaction().await.expect("begin");
    tokio::time::timeout(Duration::from_secs(5), two.execute(insert, &[]))
        .await
        .expect("the second enqueue did not wait for the first")
        .expect("second enqueue");
    two.commit().await.expect("commit");
    one.commit().await.expect("commit");
    assert_eq!(tags(&client, "g").await, [Some(0.0), None]);
    // the next claim that looks through the queue tags it, after the first's turn
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .execute(
            "SELECT remuda.fair_tag_jobs(ARRAY(SELECT id FROM remuda.jobs_live WHERE fair_tag IS NULL))",
            &[],
        )
        .await
        .expect("sweep");
    assert_eq!(tags(&client, "g").await, [Some(0.0), Some(1.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_formed_job_given_a_group_takes_its_turn_in_that_group() {
    let (_db, client) = setup().await;
    fair_queue(&client, QueueChange::default()).await;
    client
        .insert_many(&ticks(Some("g"), 3, 0))
        .await
        .expect("backlog");
    // a throttled job due at once, given its group by the enqueue that formed it
    client
        .insert(
            NewJob::for_task::<Tick>(&1)
                .expect("job")
                .group("g")
                .unique_key("t")
                .throttle(Duration::from_secs(60), false),
        )
        .await
        .expect("throttled");
    assert_eq!(
        tags(&client, "g").await,
        [Some(0.0), Some(1.0), Some(2.0), Some(3.0)]
    );
}
