//! Unique jobs: a duplicate enqueue returns the existing job instead of inserting, under
//! racing clients, inside batches and transactions, by key or by args, within states and
//! periods, enforced by the live part's partial unique index and, for a key held past its
//! job's end, by `remuda.unique_finished`, across the moves between the two parts.

mod common;

use common::setup;
use remuda::{JobState, NewJob};
use std::time::Duration;

fn keyed(key: &str) -> NewJob {
    NewJob::new("report", &serde_json::json!({"for": key}))
        .expect("job")
        .unique_key(key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_enqueues_of_one_key_insert_one_job() {
    let (_db, client) = setup().await;
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..25 {
                    seen.push(
                        client
                            .insert_each(&[keyed("nightly")])
                            .await
                            .expect("enqueue")[0],
                    );
                }
                seen
            })
        })
        .collect();
    let mut all = Vec::new();
    for racer in racers {
        all.extend(racer.await.expect("join"));
    }
    let first = all[0].id;
    assert!(
        all.iter().all(|i| i.id == first),
        "every racer got the same job"
    );
    assert_eq!(
        all.iter().filter(|i| !i.duplicate).count(),
        1,
        "inserted once"
    );
    let jobs = client.jobs(&Default::default()).await.expect("list");
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].unique_key.as_deref(), Some("nightly"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_skip_duplicates_within_and_against_the_table() {
    let (_db, client) = setup().await;
    let existing = client.insert(keyed("a")).await.expect("first");
    let plain = NewJob::new("report", &serde_json::json!({})).expect("job");
    let result = client
        .insert_each(&[keyed("a"), plain.clone(), keyed("b"), keyed("b"), plain])
        .await
        .expect("batch");
    assert_eq!(result[0].id, existing);
    assert!(result[0].duplicate);
    assert!(!result[1].duplicate && !result[2].duplicate && !result[4].duplicate);
    assert!(result[3].duplicate, "second b in the same batch");
    assert_eq!(result[3].id, result[2].id);
    assert_eq!(
        client.jobs(&Default::default()).await.expect("list").len(),
        4
    );
    // the bulk path sends unique jobs through INSERT too
    let n = client
        .insert_bulk(&[keyed("a"), keyed("c"), NewJob::new("x", &1).expect("job")])
        .await
        .expect("bulk");
    assert_eq!(n, 2, "a was a duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_holding_a_key_decides_for_the_others() {
    let (_db, client) = setup().await;
    let mut holder_conn = client.database().conn().await.expect("conn");
    let holder = holder_conn.transaction().await.expect("begin");
    let held = client
        .insert_in(&**holder, &[keyed("k")])
        .await
        .expect("insert in tx")[0];
    // a second enqueue waits for the holder to end (the index entry is not yet committed)
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.insert_each(&[keyed("k")]).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "waits for the holder");
    holder.rollback().await.expect("rollback");
    let after_rollback = waiter.await.expect("join").expect("insert")[0];
    assert!(
        !after_rollback.duplicate,
        "the holder rolled back: inserted"
    );
    assert_ne!(after_rollback.id, held);

    let mut conn = client.database().conn().await.expect("conn");
    let tx = conn.transaction().await.expect("begin");
    let again = client
        .insert_each_in(&**tx, &[keyed("k")])
        .await
        .expect("insert")[0];
    assert!(again.duplicate);
    assert_eq!(again.id, after_rollback.id);
    tx.commit().await.expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scope_of_states_and_the_period_decide_what_is_a_duplicate() {
    let (_db, client) = setup().await;
    let conn = client.database().conn().await.expect("conn");
    // default scope includes completed: a finished report still blocks a new one
    let id = client.insert(keyed("done")).await.expect("insert");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'completed', finished_at = now() WHERE id = $1",
        &[&id],
    )
    .await
    .expect("complete");
    let again = client.insert_each(&[keyed("done")]).await.expect("insert")[0];
    assert_eq!((again.id, again.duplicate), (id, true));
    // a narrower scope: only while waiting or running
    let waiting = || {
        keyed("live").unique_states([JobState::Scheduled, JobState::Available, JobState::Running])
    };
    let first = client.insert(waiting()).await.expect("insert");
    assert!(client.insert_each(&[waiting()]).await.expect("insert")[0].duplicate);
    conn.execute(
        "UPDATE remuda.jobs SET state = 'completed', finished_at = now() WHERE id = $1",
        &[&first],
    )
    .await
    .expect("complete");
    let second = client.insert_each(&[waiting()]).await.expect("insert")[0];
    assert!(
        !second.duplicate,
        "the completed one no longer holds the key"
    );
    // a failed job never blocks (default scope)
    conn.execute(
        "UPDATE remuda.jobs SET state = 'failed', finished_at = now() WHERE id = $1",
        &[&second.id],
    )
    .await
    .expect("fail");
    // a period: one per hour
    let hourly = || keyed("hourly").unique_period(Duration::from_secs(3600));
    let h1 = client.insert_each(&[hourly()]).await.expect("insert")[0];
    let h2 = client.insert_each(&[hourly()]).await.expect("insert")[0];
    assert!(!h1.duplicate && h2.duplicate);
    let stored = client
        .job(h1.id)
        .await
        .expect("get")
        .expect("exists")
        .unique_key;
    assert!(stored.is_some_and(|k| k.starts_with("hourly@")));
    // a manual retry of a job whose key is free again works; one whose key another job holds
    // now is refused with a clear error, not duplicated
    let err = client.retry(second.id).await;
    assert!(err.is_ok(), "the key of 'live' is free: {err:?}");
    let taken = client.insert(keyed("taken")).await.expect("insert");
    conn.execute(
        "UPDATE remuda.jobs SET state = 'failed', finished_at = now() WHERE id = $1",
        &[&taken],
    )
    .await
    .expect("fail");
    let holder = client.insert_each(&[keyed("taken")]).await.expect("insert")[0];
    assert!(!holder.duplicate, "a failed job does not hold its key");
    let err = client.retry(taken).await.expect_err("its key is held");
    assert!(err.to_string().contains("holds its unique key"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_by_args_compares_json_values() {
    let (_db, client) = setup().await;
    let by_args = |args: serde_json::Value| {
        NewJob::from_json("sync", remuda::Jsonb(args.to_string())).unique_by_args()
    };
    let a = client
        .insert_each(&[by_args(serde_json::json!({"user": 1, "full": true}))])
        .await
        .expect("insert")[0];
    let same = client
        .insert_each(&[remuda::NewJob::from_json(
            "sync",
            remuda::Jsonb(r#"{ "full" : true,"user":1 }"#.into()),
        )
        .unique_by_args()])
        .await
        .expect("insert")[0];
    let other = client
        .insert_each(&[by_args(serde_json::json!({"user": 2, "full": true}))])
        .await
        .expect("insert")[0];
    let other_kind = client
        .insert_each(&[NewJob::from_json(
            "export",
            remuda::Jsonb(r#"{"user": 1, "full": true}"#.into()),
        )
        .unique_by_args()])
        .await
        .expect("insert")[0];
    assert!(!a.duplicate);
    assert_eq!(
        (same.id, same.duplicate),
        (a.id, true),
        "key order and spaces do not matter"
    );
    assert!(!other.duplicate);
    assert!(!other_kind.duplicate, "the kind is part of the key");
    let err = client
        .insert(NewJob::new("x", &1).expect("job").unique_key(""))
        .await
        .expect_err("empty key");
    assert!(err.to_string().contains("non-empty key"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_in_two_kinds_of_one_batch_is_told_apart() {
    let (_db, client) = common::setup().await;
    let held = client
        .insert(remuda::NewJob::new("x", &1).expect("job").unique_key("k"))
        .await
        .expect("first x");
    let batch = [
        remuda::NewJob::new("x", &2).expect("job").unique_key("k"),
        remuda::NewJob::new("y", &3).expect("job").unique_key("k"),
    ];
    let inserted = client.insert_each(&batch).await.expect("batch");
    assert!(inserted[0].duplicate, "{inserted:?}");
    assert_eq!(inserted[0].id, held, "the x job holding the key");
    assert!(!inserted[1].duplicate, "{inserted:?}");
    assert_ne!(inserted[1].id, held);
    let y = client
        .job(inserted[1].id)
        .await
        .expect("lookup")
        .expect("exists");
    assert_eq!(y.kind, "y");
}

/// Ends job `id` in final `state` on `conn` as a worker's completion does (the move to the
/// finished part, remuda.finish_jobs), in whatever transaction `conn` is in; returns how many
/// jobs moved.
async fn finish_on(conn: &impl tokio_postgres::GenericClient, id: i64, state: &str) -> i64 {
    conn.query_one(
        "SELECT count(*) FROM remuda.finish_jobs(ARRAY[$1::bigint], ARRAY[$2::text::remuda.job_state],
             ARRAY['{\"ok\": 1}'::jsonb], '{NULL}', '{NULL}', '{NULL}', '{NULL}')",
        &[&id, &state],
    )
    .await
    .expect("the move")
    .get(0)
}

/// The backend pids that block session `pid` include `blocker`, polled until they do.
async fn waits_for(client: &remuda::Client, blocker: i32, waiting: usize) {
    let conn = client.database().conn().await.expect("conn");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = conn
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))",
                &[&blocker],
            )
            .await
            .expect("blocked sessions")
            .get(0);
        if n as usize >= waiting {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{n} sessions wait for {blocker}, not {waiting}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A unique job that ends in one of its unique states keeps its key in the finished part.
/// Enqueues of the key that come while the move is under way wait for the move (the live
/// index entry they meet is being deleted), and once it commits they find the key held by the
/// finished job, not free: the client's insert and `remuda.enqueue` alike. The interleaving
/// is forced: the move is held open until both wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enqueues_waiting_for_a_completion_find_the_key_still_held() {
    let (_db, client) = setup().await;
    let id = client.insert(keyed("race")).await.expect("insert");
    let mut conn = client.database().conn().await.expect("conn");
    let mover = conn.transaction().await.expect("begin");
    let mover_pid: i32 = mover
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    assert_eq!(
        finish_on(&**mover, id, "completed").await,
        1,
        "the move, not committed"
    );
    let by_client = {
        let client = client.clone();
        tokio::spawn(async move { client.insert_each(&[keyed("race")]).await })
    };
    let by_sql = {
        let client = client.clone();
        tokio::spawn(async move {
            let conn = client.database().conn().await.expect("conn");
            conn.query_one(
                "SELECT remuda.enqueue('report', '{\"for\": \"race\"}'::jsonb, unique_key => 'race')",
                &[],
            )
            .await
            .map(|row| row.get::<_, i64>(0))
        })
    };
    // the client waits for the move; remuda.enqueue finds the job live before it inserts
    waits_for(&client, mover_pid, 1).await;
    mover.commit().await.expect("commit the move");
    let from_client = by_client.await.expect("join").expect("insert")[0];
    assert_eq!(
        (from_client.id, from_client.duplicate),
        (id, true),
        "the completed job holds its key"
    );
    let from_sql = by_sql.await.expect("join").expect("enqueue");
    assert_eq!(from_sql, id, "remuda.enqueue returns the holder");
    let job = client.job(id).await.expect("get").expect("exists");
    assert_eq!(job.state, JobState::Completed);
    let live: i64 = client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT count(*) FROM remuda.jobs WHERE kind = 'report'",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(live, 1, "no second job of the key");
}

/// The other order: an enqueue of the key while a revive moves the finished unique job back
/// to the live part, forced by holding the revive open. The enqueue does not wait: the key is
/// held in the finished part until the revive commits, so it is a duplicate of that job; once
/// the revive commits the live job holds the key, once it rolls back the finished one still
/// does, and a later enqueue is a duplicate too. The key is held by one job only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_enqueue_racing_a_revive_of_the_key_holder_is_a_duplicate() {
    let (_db, client) = setup().await;
    for commit in [true, false] {
        let key = if commit { "revived" } else { "kept" };
        let id = client.insert(keyed(key)).await.expect("insert");
        let setup_conn = client.database().conn().await.expect("conn");
        finish_on(&***setup_conn, id, "completed").await;
        let mut conn = client.database().conn().await.expect("conn");
        let reviver = conn.transaction().await.expect("begin");
        let revived: bool = reviver
            .query_one(
                "SELECT revived FROM remuda.revive_jobs(ARRAY[$1::bigint], NULL, '{completed}', false, NULL, false)",
                &[&id],
            )
            .await
            .expect("the revive, not committed")
            .get(0);
        assert!(revived);
        let during =
            tokio::time::timeout(Duration::from_secs(10), client.insert_each(&[keyed(key)]))
                .await
                .expect("the enqueue does not wait for the revive")
                .expect("insert")[0];
        assert_eq!((during.id, during.duplicate), (id, true), "{key}");
        if commit {
            reviver.commit().await.expect("commit the revive");
        } else {
            reviver.rollback().await.expect("roll the revive back");
        }
        let after = client.insert_each(&[keyed(key)]).await.expect("insert")[0];
        assert_eq!((after.id, after.duplicate), (id, true), "{key}");
        let state = client.job(id).await.expect("get").expect("exists").state;
        assert_eq!(
            state,
            if commit {
                JobState::Available
            } else {
                JobState::Completed
            }
        );
        let holders: i64 = setup_conn
            .query_one(
                "SELECT count(*) FROM remuda.jobs WHERE unique_key = $1",
                &[&key],
            )
            .await
            .expect("count")
            .get(0);
        assert_eq!(holders, 1, "{key}: one job of the key");
    }
}

/// A unique job that ended in one of its unique states holds its key for a debounced or a
/// throttled enqueue of the key too: the job is a duplicate, as for a plain enqueue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_holder_of_a_key_makes_a_formed_enqueue_its_duplicate() {
    let (_db, client) = setup().await;
    let id = client.insert(keyed("formed")).await.expect("insert");
    let conn = client.database().conn().await.expect("conn");
    finish_on(&***conn, id, "completed").await;
    for job in [
        keyed("formed").debounce(Duration::from_secs(60)),
        keyed("formed").throttle(Duration::from_secs(60), false),
    ] {
        let got = client.insert_each(&[job]).await.expect("insert")[0];
        assert_eq!((got.id, got.duplicate), (id, true));
    }
}

/// A retry moves a finished job back to the live part with an insert, which is not an
/// enqueue: a queue at its max_depth takes it back all the same, as it did when a retry was
/// an update in place, while a new enqueue is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_into_a_queue_at_its_max_depth_is_not_refused() {
    let (_db, client) = setup().await;
    let failed = client
        .insert(keyed("deep").queue("full"))
        .await
        .expect("insert");
    let conn = client.database().conn().await.expect("conn");
    finish_on(&***conn, failed, "failed").await;
    client
        .change_queue(
            "full",
            &remuda::QueueChange {
                max_depth: Some(Some(1)),
                ..Default::default()
            },
        )
        .await
        .expect("depth");
    client
        .insert(NewJob::new("other", &()).expect("job").queue("full"))
        .await
        .expect("fills the queue");
    let err = client
        .insert(NewJob::new("other", &()).expect("job").queue("full"))
        .await
        .expect_err("the queue is full");
    assert!(matches!(err, remuda::Error::QueueFull(_)), "{err:?}");
    client.retry(failed).await.expect("the retry is taken");
    let state = client
        .job(failed)
        .await
        .expect("get")
        .expect("exists")
        .state;
    assert_eq!(state, JobState::Available);
}
