//! Retention against a real PostgreSQL: exactly what is past its age goes, per state and
//! per queue; a stale leader deletes nothing; a dry run only counts; a pruned job's unique
//! key is free again; a row someone holds is passed over, not waited for.

use super::retention::{prune, Keep, Pruned, Retention};
use crate::testing::TestDatabase;
use crate::{Database, QueueChange};
use std::time::Duration;

/// Inserts a job in `state` of `queue` that finished `hours` ago; returns its id.
async fn finished(db: &Database, queue: &str, state: &str, hours: i32) -> i64 {
    db.conn()
        .await
        .expect("conn")
        .query_one(
            "INSERT INTO remuda.jobs (queue, kind, state, finished_at)
             VALUES ($1, 'x', $2::text::remuda.job_state, now() - make_interval(hours => $3))
             RETURNING id",
            &[&queue, &state, &hours],
        )
        .await
        .expect("insert")
        .get(0)
}

async fn remaining(db: &Database) -> Vec<i64> {
    db.conn()
        .await
        .expect("conn")
        .query("SELECT id FROM remuda.jobs ORDER BY id", &[])
        .await
        .expect("ids")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_exactly_what_is_past_its_age_per_state_and_per_queue() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    // queue "short" keeps completed jobs 1 hour; queue "kept" keeps failed ones for ever
    client
        .change_queue(
            "short",
            &QueueChange {
                retain_completed: Some(Some(Keep::For(Duration::from_secs(3600)))),
                ..QueueChange::default()
            },
        )
        .await
        .expect("short");
    client
        .change_queue(
            "kept",
            &QueueChange {
                retain_failed: Some(Some(Keep::Forever)),
                ..QueueChange::default()
            },
        )
        .await
        .expect("kept");
    let mut gone = Vec::new();
    let mut stay = Vec::new();
    // defaults: completed 1 day, cancelled and expired 7 days, failed 30 days
    gone.push(finished(&db, "default", "completed", 25).await);
    stay.push(finished(&db, "default", "completed", 23).await);
    gone.push(finished(&db, "default", "cancelled", 7 * 24 + 1).await);
    stay.push(finished(&db, "default", "cancelled", 7 * 24 - 1).await);
    gone.push(finished(&db, "default", "expired", 7 * 24 + 1).await);
    stay.push(finished(&db, "default", "expired", 6 * 24).await);
    gone.push(finished(&db, "default", "failed", 30 * 24 + 1).await);
    stay.push(finished(&db, "default", "failed", 29 * 24).await);
    // the queues' own settings win
    gone.push(finished(&db, "short", "completed", 2).await);
    stay.push(finished(&db, "short", "failed", 2).await);
    stay.push(finished(&db, "kept", "failed", 365 * 24).await);
    gone.push(finished(&db, "kept", "completed", 25).await);
    // jobs that are not finished stay whatever their finished_at says (a retried job)
    stay.push(finished(&db, "default", "available", 1000).await);
    stay.push(finished(&db, "short", "scheduled", 1000).await);

    let retention = Retention::default();
    let counted = prune(&db, &retention, None, true).await.expect("dry run");
    assert_eq!(
        counted,
        Pruned {
            completed: 3,
            failed: 1,
            cancelled: 1,
            expired: 1,
            workflows: 0,
            notifications: 0,
            activity: 0,
            audit: 0,
            failures: 0
        }
    );
    assert_eq!(
        remaining(&db).await.len(),
        gone.len() + stay.len(),
        "a dry run deletes nothing"
    );
    let pruned = prune(&db, &retention, None, false).await.expect("prune");
    assert_eq!(pruned, counted, "it deletes what the dry run counted");
    stay.sort_unstable();
    assert_eq!(remaining(&db).await, stay);

    // "never" for a state keeps it everywhere but in queues that say otherwise
    let never = Retention {
        completed: Keep::Forever,
        ..Retention::default()
    };
    let old = finished(&db, "default", "completed", 1000).await;
    let short = finished(&db, "short", "completed", 2).await;
    prune(&db, &never, None, false).await.expect("prune");
    let left = remaining(&db).await;
    assert!(left.contains(&old) && !left.contains(&short), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leader_prunes_nothing_and_a_held_row_is_passed_over() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let (stale, current) = super::test_leases::stale_and_current(&db).await;
    let held = finished(&db, "default", "completed", 48).await;
    let free = finished(&db, "default", "completed", 48).await;
    let retention = Retention::default();
    let none = prune(&db, &retention, Some(&stale), false)
        .await
        .expect("stale prune");
    assert_eq!(none.total(), 0);
    assert_eq!(
        remaining(&db).await,
        vec![held, free],
        "the stale leader deleted nothing"
    );

    // another transaction holds one of the rows: pruning goes on without it, at once
    let mut holder = db.conn().await.expect("conn");
    let tx = holder.transaction().await.expect("begin");
    tx.execute(
        "SELECT 1 FROM remuda.jobs WHERE id = $1 FOR UPDATE",
        &[&held],
    )
    .await
    .expect("hold");
    let started = std::time::Instant::now();
    let pruned = prune(&db, &retention, Some(&current), false)
        .await
        .expect("prune");
    assert_eq!(pruned.completed, 1);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "it did not wait for the held row"
    );
    tx.rollback().await.expect("release");
    assert_eq!(remaining(&db).await, vec![held]);
    prune(&db, &retention, Some(&current), false)
        .await
        .expect("prune");
    assert!(remaining(&db).await.is_empty(), "the next round takes it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pruned_jobs_unique_key_is_free_again() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let job = crate::NewJob::new("x", &serde_json::json!({}))
        .expect("job")
        .unique_key("nightly");
    let first = client
        .insert_each(std::slice::from_ref(&job))
        .await
        .expect("insert");
    let id = first[0].id;
    db.conn()
        .await
        .expect("conn")
        .execute(
            "UPDATE remuda.jobs SET state = 'completed', finished_at = now() - interval '2 days' WHERE id = $1",
            &[&id],
        )
        .await
        .expect("finish it");
    let again = client
        .insert_each(std::slice::from_ref(&job))
        .await
        .expect("insert");
    assert_eq!(again[0].id, id, "a completed job still holds its key");
    prune(&db, &Retention::default(), None, false)
        .await
        .expect("prune");
    let after = client
        .insert_each(std::slice::from_ref(&job))
        .await
        .expect("insert");
    assert_ne!(after[0].id, id, "the key is free once the job is pruned");
}

/// The rows every scan node of a statement's plan read, from `EXPLAIN (ANALYZE, FORMAT
/// JSON)`: actual rows plus rows removed by a filter, summed over the tree.
fn rows_read(plan: &serde_json::Value) -> f64 {
    let own = ["Actual Rows", "Rows Removed by Filter"]
        .iter()
        .filter_map(|k| plan.get(*k).and_then(serde_json::Value::as_f64))
        .sum::<f64>();
    let is_jobs = plan.get("Relation Name").and_then(|r| r.as_str()) == Some("jobs");
    let children: f64 = plan
        .get("Plans")
        .and_then(|p| p.as_array())
        .map_or(0.0, |p| p.iter().map(rows_read).sum());
    if is_jobs {
        own + children
    } else {
        children
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_a_queue_keeps_longer_are_never_read_by_the_walk() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    client
        .change_queue(
            "kept",
            &QueueChange {
                retain_completed: Some(Some(Keep::Forever)),
                ..QueueChange::default()
            },
        )
        .await
        .expect("kept");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (queue, kind, state, finished_at)
         SELECT 'kept', 'x', 'completed', now() - interval '2 days' FROM generate_series(1, 5000);
         INSERT INTO remuda.jobs (queue, kind, state, finished_at)
         SELECT 'default', 'x', 'completed', now() - interval '2 days' FROM generate_series(1, 3);
         ANALYZE remuda.jobs",
    )
    .await
    .expect("load");
    let statement = crate::sql::PRUNE
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let plan: serde_json::Value = conn
        .query_one(
            &format!("EXPLAIN (ANALYZE, FORMAT JSON) {statement}"),
            &[
                &"completed",
                &86_400_000i64,
                &10_000i64,
                &None::<String>,
                &None::<i64>,
            ],
        )
        .await
        .expect("explain")
        .get(0);
    let read = rows_read(&plan[0]["Plan"]);
    assert!(read < 50.0, "the walk read {read} rows of jobs: {plan}");
    assert_eq!(
        remaining(&db).await.len(),
        5000,
        "the default queue's 3 went, the kept queue's stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ages_over_a_hundred_years_are_refused() {
    let test = TestDatabase::new().await.expect("test database");
    let client = test.client().await.expect("client");
    let centuries = Keep::For(Duration::from_secs(200 * 365 * 86_400));
    let err = client
        .change_queue(
            "q",
            &QueueChange {
                retain_failed: Some(Some(centuries)),
                ..QueueChange::default()
            },
        )
        .await
        .expect_err("refused");
    assert!(
        err.to_string().contains("failed jobs is over 100 years"),
        "{err}"
    );
    let retention = Retention {
        expired: centuries,
        ..Retention::default()
    };
    let err = client.prune(&retention, true).await.expect_err("refused");
    assert!(
        err.to_string().contains("expired jobs is over 100 years"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_unreadable_rate_buckets_go_and_a_live_one_stays() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let (_, current) = super::test_leases::stale_and_current(&db).await;
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.queues (name, rate_limit, rate_period_ms) VALUES ('limited', 10, 60000);
         INSERT INTO remuda.rate_buckets (scope, tokens, refreshed_at) VALUES
             ('[\"limited\"]', 3, now()),
             ('[\"limited\", \"k\"]', 3, now() - interval '2 minutes'),
             ('[\"unlimited\"]', 3, now()),
             ('queue:legacy', 3, now())",
    )
    .await
    .expect("buckets");
    let deleted: i64 = conn
        .query_one(
            crate::sql::RATE_BUCKETS_PRUNE,
            &[&current.leader_id, &current.term],
        )
        .await
        .expect("prune buckets")
        .get(0);
    assert_eq!(deleted, 3);
    let left: Vec<String> = conn
        .query("SELECT scope FROM remuda.rate_buckets", &[])
        .await
        .expect("left")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, ["[\"limited\"]"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activity_minutes_audit_entries_and_set_aside_failures_past_their_age_go_and_recent_ones_stay(
) {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.queue_minutes (queue, minute, completed) VALUES
             ('q', date_trunc('minute', now()) - interval '8 days', 1),
             ('q', date_trunc('minute', now()) - interval '6 days', 2),
             ('q', date_trunc('minute', now()), 3);
         INSERT INTO remuda.audit (at, actor, via, action, target) VALUES
             (now() - interval '91 days', 'admin', 'api', 'retry', 'job 1'),
             (now() - interval '89 days', 'admin', 'api', 'retry', 'job 2');
         INSERT INTO remuda.workflows (id, name, definition, definition_hash, nodes_left)
             VALUES (77, 'stuck', '{}', 'h', 1);
         INSERT INTO remuda.failures (source, subject, sqlstate, message, first_at, last_at) VALUES
             ('notify', 'job 1', 'XX000', 'old', now() - interval '40 days', now() - interval '31 days'),
             ('notify', 'job 2', 'XX000', 'seen again lately', now() - interval '40 days', now() - interval '29 days'),
             ('workflow_timers', 'run 77 (stop)', 'XX000', 'the run 77 stands', now() - interval '40 days', now() - interval '31 days'),
             ('workflow_timers', 'run 78 (stop)', 'XX000', 'run 78 is gone', now() - interval '40 days', now() - interval '31 days')",
    )
    .await
    .expect("rows");
    let retention = Retention::default();
    let counted = prune(&db, &retention, None, true).await.expect("dry run");
    assert_eq!(
        (counted.activity, counted.audit, counted.failures),
        (1, 1, 2)
    );
    let pruned = prune(&db, &retention, None, false).await.expect("prune");
    assert_eq!((pruned.activity, pruned.audit, pruned.failures), (1, 1, 2));
    let subjects: Vec<String> = conn
        .query("SELECT subject FROM remuda.failures ORDER BY subject", &[])
        .await
        .expect("failures")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        subjects,
        ["job 2", "run 77 (stop)"],
        "kept from its last occurrence, and a standing run's mark while it stands"
    );
    let minutes: Vec<i64> = conn
        .query(
            "SELECT completed FROM remuda.queue_minutes ORDER BY minute",
            &[],
        )
        .await
        .expect("minutes")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(minutes, [2, 3]);
    let targets: Vec<String> = conn
        .query("SELECT target FROM remuda.audit", &[])
        .await
        .expect("audit")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(targets, ["job 2"]);
    // kept for ever when told so
    conn.batch_execute(
        "INSERT INTO remuda.queue_minutes (queue, minute) VALUES ('q', now() - interval '1 year')",
    )
    .await
    .expect("old minute");
    let forever = Retention {
        activity: Keep::Forever,
        ..Retention::default()
    };
    let pruned = prune(&db, &forever, None, false).await.expect("prune");
    assert_eq!(pruned.activity, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttle_windows_go_once_passed_and_their_job_ended_or_is_gone() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let (_, current) = super::test_leases::stale_and_current(&db).await;
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.jobs (id, kind, state, started_at, finished_at) VALUES
             (1, 'x', 'completed', now() - interval '1 hour', now() - interval '1 hour'),
             (2, 'x', 'completed', now() - interval '1 second', now()),
             (3, 'x', 'running', now() - interval '1 hour', NULL),
             (4, 'x', 'scheduled', NULL, NULL);
         INSERT INTO remuda.throttles (kind, scope, key, job_id, period_ms, next_at) VALUES
             ('x', '', 'ended long ago', 1, 60000, now() - interval '1 minute'),
             ('x', '', 'gone', 99, 60000, now() - interval '1 minute'),
             ('x', '', 'started within the period', 2, 60000, now() - interval '1 minute'),
             ('x', '', 'runs', 3, 60000, now() - interval '1 minute'),
             ('x', '', 'waits', 4, 60000, now() - interval '1 minute'),
             ('x', '', 'not yet passed', 1, 60000, now() + interval '1 minute')",
    )
    .await
    .expect("windows");
    let deleted: i64 = conn
        .query_one(
            crate::sql::THROTTLES_PRUNE,
            &[&current.leader_id, &current.term],
        )
        .await
        .expect("prune windows")
        .get(0);
    assert_eq!(deleted, 2);
    let left: Vec<String> = conn
        .query("SELECT key FROM remuda.throttles ORDER BY key", &[])
        .await
        .expect("left")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        left,
        [
            "not yet passed",
            "runs",
            "started within the period",
            "waits"
        ]
    );
}

/// Makes the finished part's partition of the day `days` ago (UTC), as the days ahead are
/// made, unless the database has it (migrated before midnight), and returns its name.
async fn past_day(db: &Database, days: i32) -> String {
    let conn = db.conn().await.expect("conn");
    let row = conn
        .query_one(
            "SELECT format('jobs_finished_%s', to_char(d, 'YYYYMMDD')), d::text, (d + 1)::text
             FROM (SELECT (now() AT TIME ZONE 'UTC')::date - $1::int AS d) x",
            &[&days],
        )
        .await
        .expect("the day's name");
    let (name, from, to): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    conn.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS remuda.{name} PARTITION OF remuda.jobs_finished
         FOR VALUES FROM ('{from} 00:00+00') TO ('{to} 00:00+00')"
    ))
    .await
    .expect("a past day's partition");
    name
}

/// A past day goes whole: its partition is dropped, not deleted from row by row, and the
/// keys and steps of its jobs go with it. What is kept longer stays, moved to the default
/// partition: the jobs of a state or a queue kept longer than the day's age (failed jobs,
/// kept 30 days; a queue kept for ever), and those of a workflow run that still exists. A
/// day not yet a day past its end stays whole. The jobs it dropped are counted by state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_past_day_goes_whole_and_what_is_kept_longer_stays() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    client
        .change_queue(
            "forever",
            &QueueChange {
                retain_completed: Some(Some(Keep::Forever)),
                ..QueueChange::default()
            },
        )
        .await
        .expect("forever");
    let old = past_day(&db, 3).await;
    let recent = past_day(&db, 1).await;
    let conn = db.conn().await.expect("conn");
    let run: i64 = conn
        .query_one(
            "INSERT INTO remuda.workflows (name, definition, definition_hash, nodes_left)
             VALUES ('w', '{}', md5('{}'), 1) RETURNING id",
            &[],
        )
        .await
        .expect("a running workflow run")
        .get(0);
    // an hour into each day (UTC), so that every row is in its day's partition
    let day = |n: i32| {
        format!("((now() AT TIME ZONE 'UTC')::date - {n})::timestamp AT TIME ZONE 'UTC' + interval '1 hour'")
    };
    let (three, one) = (day(3), day(1));
    conn.batch_execute(&format!(
        "INSERT INTO remuda.jobs (queue, kind, state, finished_at)
         SELECT 'default', 'x', 'completed', {three} + n * interval '1 second'
         FROM generate_series(1, 2000) n;
         INSERT INTO remuda.jobs (queue, kind, state, finished_at)
         SELECT 'default', 'x', 'failed', {three} FROM generate_series(1, 5);
         INSERT INTO remuda.jobs (queue, kind, state, finished_at)
         SELECT 'forever', 'x', 'completed', {three} FROM generate_series(1, 7);
         INSERT INTO remuda.jobs (queue, kind, state, finished_at, unique_key, unique_states)
         VALUES ('default', 'keyed', 'completed', {three}, 'k', '{{scheduled,available,running,completed}}');
         INSERT INTO remuda.jobs (queue, kind, state, finished_at)
         SELECT 'default', 'x', 'completed', {one} FROM generate_series(1, 11);
         INSERT INTO remuda.jobs (queue, kind, state, finished_at, workflow_id, workflow)
         VALUES ('default', 'x', 'completed', {three}, {run}, '{{\"node\": \"a\"}}');
         INSERT INTO remuda.steps (job_id, name, attempt, output)
         SELECT id, 'a', 1, '1' FROM remuda.{old} WHERE queue = 'default' AND state = 'completed'
           AND workflow_id IS NULL LIMIT 3;"
    ))
    .await
    .expect("load");
    let keyed_held: i64 = conn
        .query_one("SELECT count(*) FROM remuda.unique_finished", &[])
        .await
        .expect("holds")
        .get(0);
    assert_eq!(keyed_held, 1, "the finished unique job holds its key");
    let pruned = prune(&db, &Retention::default(), None, false)
        .await
        .expect("prune");
    assert_eq!(
        (pruned.completed, pruned.failed),
        (2001, 0),
        "the day's completed jobs went, past their day of age: {pruned:?}"
    );
    let exists = |name: String| {
        let db = db.clone();
        async move {
            db.conn()
                .await
                .expect("conn")
                .query_one("SELECT to_regclass('remuda.' || $1) IS NOT NULL", &[&name])
                .await
                .expect("regclass")
                .get::<_, bool>(0)
        }
    };
    assert!(!exists(old.clone()).await, "the old day is dropped");
    assert!(exists(recent.clone()).await, "a day a day old stays");
    let kept: Vec<(String, i64)> = conn
        .query(
            "SELECT queue || ' ' || state || CASE WHEN workflow_id IS NULL THEN '' ELSE ' of a run' END,
                    count(*)
             FROM remuda.jobs_finished_kept GROUP BY 1 ORDER BY 1",
            &[],
        )
        .await
        .expect("kept")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        kept,
        vec![
            ("default completed of a run".to_string(), 1),
            ("default failed".to_string(), 5),
            ("forever completed".to_string(), 7)
        ],
        "kept past their day: a running workflow's job, failed jobs (kept 30 days), a queue kept for ever"
    );
    let left: (i64, i64) = conn
        .query_one(
            "SELECT (SELECT count(*) FROM remuda.unique_finished), (SELECT count(*) FROM remuda.steps)",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .expect("holds and steps");
    assert_eq!(
        left,
        (0, 0),
        "the dropped jobs' keys and steps went with them"
    );
    let again = client
        .insert_each(&[crate::NewJob::new("keyed", &serde_json::json!({}))
            .expect("job")
            .unique_key("k")])
        .await
        .expect("insert");
    assert!(!again[0].duplicate, "the key is free");
    // the recent day's 11, the 13 kept, and the new keyed job
    assert_eq!(remaining(&db).await.len(), 11 + 13 + 1);
}

/// A job that finished on a day without its partition waits in the default partition; when
/// the leader makes the day, the job moves into it and keeps its unique key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_made_late_takes_its_jobs_from_the_default_partition_with_their_keys() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let conn = db.conn().await.expect("conn");
    let today: String = conn
        .query_one(
            "SELECT format('jobs_finished_%s', to_char((now() AT TIME ZONE 'UTC')::date, 'YYYYMMDD'))",
            &[],
        )
        .await
        .expect("today")
        .get(0);
    conn.batch_execute(&format!("DROP TABLE remuda.{today}"))
        .await
        .expect("as if the leader had not made today yet");
    let keyed = || {
        crate::NewJob::new("keyed", &serde_json::json!({}))
            .expect("job")
            .unique_key("late")
    };
    let id = client.insert(keyed()).await.expect("insert");
    conn.query_one(
        "SELECT count(*) FROM remuda.finish_jobs(ARRAY[$1::bigint], '{completed}',
             ARRAY['{\"ok\": 1}'::jsonb], '{NULL}', '{NULL}', '{NULL}', '{NULL}')",
        &[&id],
    )
    .await
    .expect("completed");
    let place = || {
        let db = db.clone();
        async move {
            db.conn()
                .await
                .expect("conn")
                .query_one(
                    "SELECT tableoid::regclass::text FROM remuda.jobs WHERE id = $1",
                    &[&id],
                )
                .await
                .expect("where")
                .get::<_, String>(0)
        }
    };
    assert_eq!(place().await, "remuda.jobs_finished_kept");
    prune(&db, &Retention::default(), None, false)
        .await
        .expect("prune");
    assert_eq!(place().await, format!("remuda.{today}"));
    let again = client.insert_each(&[keyed()]).await.expect("insert")[0];
    assert_eq!(
        (again.id, again.duplicate),
        (id, true),
        "the key is held still"
    );
}
