//! Weighted fair share between the groups of a queue, held by several `remuda worker`
//! processes together: starts follow the weights under backlog whatever the number of keys a
//! group spreads its jobs over, key limits still hold, and a group with nothing waiting
//! leaves its share to the others and takes it back, without a burst, when its jobs come.

mod common;

use common::{code, json, migrated, remuda, stderr, stdout, TempDir, TestDatabase, WorkerProcess};
use remuda::NewJob;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const QUEUE: &str = "tenants";

/// The task `work` as a command that sleeps 20 ms.
const SLEEPS: &str = r#"command = ["sh", "-c", "cat >/dev/null; sleep 0.02"]"#;

/// A worker config whose one task (`work`, in the fair queue) sleeps 20 ms.
fn config(dir: &TempDir, concurrency: u32) -> std::path::PathBuf {
    config_polling(dir, concurrency, "100ms", SLEEPS)
}

/// The same with a poll interval of `poll`, the task run as `task` says.
fn config_polling(dir: &TempDir, concurrency: u32, poll: &str, task: &str) -> std::path::PathBuf {
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
concurrency = {concurrency}
poll_interval = "{poll}"
maintenance_interval = "250ms"
shutdown_timeout = "5s"

[tasks.work]
queue = "{QUEUE}"
{task}
"#
        ),
    )
}

async fn cli_ok(db: &TestDatabase, args: &[&str]) -> serde_json::Value {
    let output = remuda(db, args).await;
    assert_eq!(code(&output), 0, "{args:?}: {}", stderr(&output));
    if args.contains(&"--json") {
        json(&output)
    } else {
        serde_json::Value::Null
    }
}

/// `n` jobs of `group`, the `i`-th with concurrency key `key(i)` when given.
fn jobs(group: &str, n: usize, key: Option<&dyn Fn(usize) -> String>) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            let job = NewJob::from_json("work", remuda::Jsonb("{}".into()))
                .queue(QUEUE)
                .group(group);
            match key {
                Some(key) => job.concurrency_key(key(i)),
                None => job,
            }
        })
        .collect()
}

/// The groups of the queue's started jobs, in the order they started (by claim time, then
/// id: the jobs of one claim share a start time).
async fn starts(db: &TestDatabase) -> Vec<String> {
    let client = db.client().await.expect("client");
    let conn = client.database().conn().await.expect("conn");
    conn.query(
        "SELECT group_key FROM remuda.jobs WHERE queue = $1 AND started_at IS NOT NULL
         ORDER BY started_at, id",
        &[&QUEUE],
    )
    .await
    .expect("starts")
    .iter()
    .map(|r| r.get::<_, Option<String>>(0).unwrap_or_default())
    .collect()
}

async fn wait_finished(db: &TestDatabase, n: i64) {
    let client = db.client().await.expect("client");
    common::until("every job finished", Duration::from_secs(120), async || {
        common::count(
            &client,
            "SELECT count(*) FROM remuda.jobs WHERE state = 'completed'",
        )
        .await
            >= n
    })
    .await;
}

/// Checks each window of `window` starts of `order` for the shares `weights` give the
/// groups, within ±10 % of each group's own share.
fn assert_shares(order: &[String], window: usize, weights: &[(&str, f64)]) {
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    assert!(
        order.len() >= window,
        "only {} starts to compare",
        order.len()
    );
    for (n, chunk) in order.chunks_exact(window).enumerate() {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for g in chunk {
            *seen.entry(g.as_str()).or_default() += 1;
        }
        for (group, weight) in weights {
            let expected = window as f64 * weight / total;
            let got = seen.get(group).copied().unwrap_or(0) as f64;
            assert!(
                (got - expected).abs() <= expected * 0.10,
                "window {n} of {window} starts: group {group} started {got}, its weight gives {expected:.0} (±10 %); all: {seen:?}"
            );
        }
    }
}

/// The starts made while every one of `groups` still had jobs waiting: up to the first
/// group's last start.
fn while_backlogged(order: &[String], groups: &[&str]) -> Vec<String> {
    let cutoff = groups
        .iter()
        .map(|g| order.iter().rposition(|s| s == g).unwrap_or(0))
        .min()
        .unwrap_or(0);
    order[..cutoff].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_groups_weighted_3_1_1_start_in_that_proportion_across_worker_processes() {
    let db = migrated().await;
    cli_ok(
        &db,
        &[
            "queue",
            "set",
            QUEUE,
            "--fairness",
            "group",
            "--key-limit",
            "1",
        ],
    )
    .await;
    cli_ok(&db, &["queue", "group", QUEUE, "big", "--weight", "3"]).await;
    // the big tenant spreads its jobs over 100 keys: with keys taking turns alone it would
    // take 100 of every 102 starts
    let client = db.client().await.expect("client");
    let mut all = jobs("big", 900, Some(&|i| format!("big:{}", i % 100)));
    all.extend(jobs("small", 300, None));
    all.extend(jobs("other", 300, None));
    client.insert_bulk(&all).await.expect("enqueue");

    // the most jobs of one key running at once, sampled while the workers run
    let most_per_key = Arc::new(AtomicI64::new(0));
    let sampling = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let (most, stop) = (most_per_key.clone(), sampling.clone());
        let conn = client.database().conn().await.expect("conn");
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let row = conn
                    .query_one(
                        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM remuda.jobs
                         WHERE state = 'running' AND queue = $1 AND concurrency_key IS NOT NULL
                         GROUP BY concurrency_key) k",
                        &[&QUEUE],
                    )
                    .await
                    .expect("sample");
                most.fetch_max(row.get(0), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };

    let dir = TempDir::new();
    let config = config(&dir, 4);
    let workers: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::start(&db, &config)).collect();
    wait_finished(&db, 1500).await;
    sampling.cancel();
    sampler.await.expect("sampler");
    for w in workers {
        assert!(w.stop().await.success());
    }

    let order = starts(&db).await;
    let backlogged = while_backlogged(&order, &["big", "small", "other"]);
    assert!(
        backlogged.len() >= 1000,
        "{} starts compared",
        backlogged.len()
    );
    assert_shares(
        &backlogged,
        250,
        &[("big", 3.0), ("small", 1.0), ("other", 1.0)],
    );
    assert_eq!(
        most_per_key.load(Ordering::Relaxed),
        1,
        "the key limit of 1 held"
    );

    let groups = cli_ok(&db, &["queue", "groups", QUEUE, "--json"]).await;
    let started: HashMap<String, i64> = groups
        .as_array()
        .expect("a list")
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap_or("").to_string(),
                g["starts_last_minute"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(
        started,
        HashMap::from([
            ("big".into(), 900),
            ("small".into(), 300),
            ("other".into(), 300)
        ]),
        "{groups}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_group_leaves_its_share_and_takes_it_back_without_a_burst() {
    let db = migrated().await;
    cli_ok(&db, &["queue", "set", QUEUE, "--fairness", "group"]).await;
    cli_ok(&db, &["queue", "group", QUEUE, "early", "--weight", "3"]).await;
    let client = db.client().await.expect("client");
    // `idle` (weight 1) has nothing waiting: `early` and `late` share 3:1
    let mut all = jobs("early", 1200, None);
    all.extend(jobs("late", 400, None));
    client.insert_bulk(&all).await.expect("enqueue");

    let dir = TempDir::new();
    let config = config(&dir, 4);
    let workers: Vec<WorkerProcess> = (0..2).map(|_| WorkerProcess::start(&db, &config)).collect();
    let conn = client.database().conn().await.expect("conn");
    common::until("400 starts", Duration::from_secs(60), async || {
        common::count(
            &client,
            "SELECT count(*) FROM remuda.jobs WHERE started_at IS NOT NULL",
        )
        .await
            >= 400
    })
    .await;
    // the idle group comes back with a backlog: it takes its share at once, and no more
    // (it saved up nothing while it had no jobs)
    client
        .insert_bulk(&jobs("idle", 300, None))
        .await
        .expect("enqueue");
    let came_back: chrono::DateTime<chrono::Utc> = conn
        .query_one("SELECT now()", &[])
        .await
        .expect("now")
        .get(0);
    wait_finished(&db, 1900).await;
    for w in workers {
        assert!(w.stop().await.success());
    }

    let before: Vec<String> = conn
        .query(
            "SELECT group_key FROM remuda.jobs WHERE started_at < $1 ORDER BY started_at, id",
            &[&came_back],
        )
        .await
        .expect("starts")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_shares(&before[..400], 200, &[("early", 3.0), ("late", 1.0)]);

    let order = starts(&db).await;
    let first_idle = order
        .iter()
        .position(|g| g == "idle")
        .expect("the idle group started");
    let after = while_backlogged(&order[first_idle..], &["early", "late", "idle"]);
    assert_shares(&after, 200, &[("early", 3.0), ("late", 1.0), ("idle", 1.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_refuse_what_would_break_their_list_and_the_list_says_what_it_shows() {
    let db = migrated().await;
    // a group with a tab or newline is refused by every door: the CLI, the library, SQL
    for group in ["a\tb", "a\nb"] {
        let out = remuda(
            &db,
            &[
                "enqueue", "work", "--queue", QUEUE, "--group", group, "--args", "{}",
            ],
        )
        .await;
        assert_eq!(code(&out), 2, "{group:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("control character"),
            "{}",
            stderr(&out)
        );
        let out = remuda(&db, &["queue", "group", QUEUE, group, "--weight", "2"]).await;
        assert_eq!(code(&out), 2, "{group:?}: {}", stderr(&out));
    }
    let client = db.client().await.expect("client");
    let refused = client
        .insert(NewJob::from_json("work", remuda::Jsonb("{}".into())).group("a\nb"))
        .await;
    assert!(
        matches!(&refused, Err(remuda::Error::InvalidInput(m)) if m.contains("control character")),
        "{refused:?}"
    );
    let conn = client.database().conn().await.expect("conn");
    let sql = conn
        .query_one(
            "SELECT remuda.enqueue_job('work', '{}'::jsonb, group_key => E'a\\tb')",
            &[],
        )
        .await;
    let message = sql
        .err()
        .and_then(|e| e.as_db_error().map(|d| d.message().to_string()))
        .unwrap_or_default();
    assert!(message.contains("control character"), "{message}");
    // a negative weight is read as a number, and its range refused
    let out = remuda(&db, &["queue", "group", QUEUE, "acme", "--weight", "-1"]).await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("from 0.001 to 1000"),
        "{}",
        stderr(&out)
    );
    // a group named like the row of the jobs without a group is shown quoted
    client
        .insert_many(&[
            NewJob::from_json("work", remuda::Jsonb("{}".into())).queue(QUEUE),
            NewJob::from_json("work", remuda::Jsonb("{}".into()))
                .queue(QUEUE)
                .group("(none)"),
        ])
        .await
        .expect("enqueue");
    let out = remuda(&db, &["queue", "groups", QUEUE]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let rows: Vec<String> = stdout(&out).lines().skip(1).map(str::to_string).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter().any(|r| r.starts_with("\"(none)\" ")),
        "{rows:?}"
    );
    assert!(rows.iter().any(|r| r.starts_with("(none) ")), "{rows:?}");
    // without fair share on, the list says its fair shares are not applied
    assert!(
        stderr(&out).contains("fair share is off on queue"),
        "{}",
        stderr(&out)
    );
    cli_ok(&db, &["queue", "set", QUEUE, "--fairness", "group"]).await;
    let out = remuda(&db, &["queue", "groups", QUEUE]).await;
    assert!(
        !stderr(&out).contains("fair share is off"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("~starts/min"), "{}", stdout(&out));
}

/// The noisy neighbour a SaaS operator meets: one tenant's 30 000-job backlog, the jobs
/// without a group with a backlog of their own beside it, and two small tenants enqueuing a
/// job every 100 ms each, on two worker processes with the default poll interval. The small
/// tenants' jobs start at the next turns (behind a few claims' starts, not the backlog), and the jobs without a group take half of what the small
/// tenants leave (they are one group of weight 1, as the noisy tenant is).
///
/// The jobs are the built-in no-op, so that the workers start far more jobs a second than
/// the small tenants' 20: a small tenant is one whose jobs come slower than its share of the
/// starts (a quarter of them here). Jobs that spawn a process each started 41 a second on a
/// loaded machine, a tenant's share fell to its 10 jobs a second, and its jobs queued behind
/// each other as any at its share would, fairness or not. Both backlogs are checked to
/// outlast the small tenants' jobs, without which the test would prove nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_tenants_backlog_starves_neither_small_tenants_nor_the_jobs_without_a_group() {
    let db = migrated().await;
    cli_ok(&db, &["queue", "set", QUEUE, "--fairness", "group"]).await;
    let client = db.client().await.expect("client");
    client
        .insert_bulk(&jobs("noisy", 30_000, None))
        .await
        .expect("the noisy tenant's backlog");
    let ungrouped: Vec<NewJob> = (0..30_000)
        .map(|_| NewJob::from_json("work", remuda::Jsonb("{}".into())).queue(QUEUE))
        .collect();
    client
        .insert_bulk(&ungrouped)
        .await
        .expect("the jobs without a group");

    let dir = TempDir::new();
    // (the default poll interval: a claim that looks through the whole queue once a second)
    let config = config_polling(&dir, 10, "1s", r#"builtin = "noop""#);
    let workers: Vec<WorkerProcess> = (0..2).map(|_| WorkerProcess::start(&db, &config)).collect();
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    for _ in 0..40 {
        ticker.tick().await;
        let mut small = jobs("b", 1, None);
        small.extend(jobs("c", 1, None));
        client
            .insert_many(&small)
            .await
            .expect("a small tenant's job");
    }
    common::until(
        "every small tenant's job started",
        Duration::from_secs(30),
        async || {
            common::count(
                &client,
                "SELECT count(*) FROM remuda.jobs WHERE group_key IN ('b', 'c') AND started_at IS NULL",
            )
            .await
                == 0
        },
    )
    .await;
    let left = common::count(
        &client,
        "SELECT least(count(*) FILTER (WHERE group_key = 'noisy'), count(*) FILTER (WHERE group_key IS NULL))
         FROM remuda.jobs WHERE state = 'available'",
    )
    .await;
    assert!(
        left > 0,
        "a backlog drained before the small tenants' last job started: nothing was left to starve them"
    );
    for w in workers {
        assert!(w.stop().await.success());
    }

    let conn = client.database().conn().await.expect("conn");
    let early = common::count(
        &client,
        "SELECT count(*) FROM remuda.jobs WHERE group_key IN ('b', 'c') AND started_at < created_at",
    )
    .await;
    assert_eq!(early, 0, "a job started before it was created");
    // How long a job waits depends on how fast the machine is; how many starts go ahead of
    // it after it came does not: a small tenant's job is due at the next turn of the groups,
    // so at most the claims already under way (two workers, 10 slots each) and the next few
    // go before it, where without fair share the whole backlog would
    let ahead: Vec<i64> = conn
        .query(
            "SELECT (SELECT count(*) FROM remuda.jobs o
                     WHERE o.queue = j.queue AND o.started_at > j.created_at AND o.started_at < j.started_at)
             FROM remuda.jobs j WHERE j.group_key IN ('b', 'c') ORDER BY 1",
            &[],
        )
        .await
        .expect("the starts ahead of each small tenant's job")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ahead.len(), 80);
    let p99 = ahead[ahead.len() * 99 / 100 - 1];
    assert!(
        p99 <= 60,
        "the small tenants' jobs waited behind up to {p99} starts (p99): {ahead:?}"
    );

    // the noisy tenant and the jobs without a group shared the rest one for one
    let order = starts(&db).await;
    let noisy = order.iter().filter(|g| *g == "noisy").count();
    let none = order.iter().filter(|g| g.is_empty()).count();
    assert!(noisy + none >= 100, "only {} starts", noisy + none);
    let half = (noisy + none) as f64 / 2.0;
    assert!(
        (none as f64 - half).abs() <= half * 0.15,
        "the jobs without a group started {none}, the noisy tenant {noisy}"
    );
}
