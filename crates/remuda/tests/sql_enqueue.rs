//! Enqueue from SQL: `remuda.enqueue` writes the rows the Rust client writes, shares its
//! unique keys, refuses what the client refuses (saying what and how), and works inside the
//! caller's transaction and from a trigger.

mod common;

use common::setup;
use remuda::notify::{NotifyTarget, Outcome};
use remuda::{Client, JobState, NewJob};
use serde_json::{json, Value};
use std::time::Duration;

/// One job described twice: for the client and as the function's named arguments.
struct Pair {
    job: NewJob,
    sql: &'static str,
}

fn pairs(later: &str, deadline: &str) -> Vec<Pair> {
    let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().expect("time");
    let args = json!({"to": "a@example.com", "n": [1, 2.5, {"b": null}], "é": "ü"});
    let job = |kind: &str| NewJob::new(kind, &args).expect("job");
    vec![
        Pair { job: job("plain"), sql: "" },
        Pair {
            job: job("tuned")
                .queue("mail")
                .priority(-3)
                .max_attempts(7)
                .timeout(Duration::from_millis(1500)),
            sql: "queue => 'mail', priority => -3, max_attempts => 7, timeout => '1.5 seconds'",
        },
        Pair {
            job: job("later").run_at(at(later)).expires_at(at(deadline)),
            sql: "run_at => $2, deadline => $3",
        },
        Pair {
            job: job("keyed")
                .unique_key("nightly")
                .unique_period(Duration::from_secs(86_400))
                .unique_per_queue()
                .unique_states([
                    JobState::Scheduled,
                    JobState::Available,
                    JobState::Running,
                    JobState::Failed,
                ]),
            sql: "unique_key => 'nightly', unique_period => '1 day', unique_per_queue => true, unique_states => '{scheduled,available,running,failed}'",
        },
        Pair {
            job: job("by_args").unique_by_args(),
            sql: "unique_by_args => true",
        },
        Pair {
            job: job("by_args_and_key").unique_by_args().unique_key("k"),
            sql: "unique_by_args => true, unique_key => 'k'",
        },
        Pair {
            job: job("routed")
                .concurrency_key("customer:42")
                .target_worker("gpu-1")
                .requires(["gpu", "a\"b,c"]),
            sql: "concurrency_key => 'customer:42', target_worker => 'gpu-1', requires => ARRAY['gpu', 'a\"b,c']",
        },
        Pair {
            job: job("notified").notify(
                NotifyTarget::webhook("https://hooks.example.com/remuda")
                    .and_email("ops@example.com")
                    .on([Outcome::Expired, Outcome::Failed]),
            ),
            sql: r#"notify => '{"webhook": "https://hooks.example.com/remuda", "email": "ops@example.com", "on": ["failed", "expired", "failed"]}'"#,
        },
    ]
}

/// Every column of every job but its id and creation time, by kind; `run_at` only where
/// the caller chose it (else it is the insert's own now()).
async fn rows(client: &Client) -> Vec<Value> {
    let conn = client.database().conn().await.expect("conn");
    conn.query(
        "SELECT to_jsonb(j) - 'id' - 'created_at'
                - CASE WHEN j.kind = 'later' THEN '' ELSE 'run_at' END AS row
         FROM remuda.jobs j ORDER BY j.kind",
        &[],
    )
    .await
    .expect("rows")
    .iter()
    .map(|r| r.get("row"))
    .collect()
}

async fn sql_enqueue(client: &Client, pair: &Pair, later: &str, deadline: &str) -> i64 {
    let conn = client.database().conn().await.expect("conn");
    let extra = if pair.sql.is_empty() {
        String::new()
    } else {
        format!(", {}", pair.sql)
    };
    let statement = format!(
        "SELECT remuda.enqueue($1, '{}'::jsonb{extra})",
        pair.job.args.0.replace('\'', "''")
    );
    // the statement names its later and deadline parameters only where it uses them
    let later: chrono::DateTime<chrono::Utc> = later.parse().expect("time");
    let deadline: chrono::DateTime<chrono::Utc> = deadline.parse().expect("time");
    let row = if pair.sql.contains("$2") {
        conn.query_one(&statement, &[&pair.job.kind, &later, &deadline])
            .await
    } else {
        conn.query_one(&statement, &[&pair.job.kind]).await
    };
    row.expect(&statement).get(0)
}

fn times() -> (String, String) {
    let now = chrono::Utc::now();
    let later = (now + chrono::Duration::hours(1)).to_rfc3339();
    let deadline = (now + chrono::Duration::hours(2)).to_rfc3339();
    (later, deadline)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_function_writes_the_rows_the_client_writes() {
    let (_a, by_client) = setup().await;
    let (_b, by_sql) = setup().await;
    let (later, deadline) = times();
    for pair in pairs(&later, &deadline) {
        by_client.insert(pair.job.clone()).await.expect("client");
        sql_enqueue(&by_sql, &pair, &later, &deadline).await;
    }
    let (client_rows, sql_rows) = (rows(&by_client).await, rows(&by_sql).await);
    assert_eq!(client_rows.len(), 8);
    assert_eq!(sql_rows.len(), 8);
    for (c, s) in client_rows.iter().zip(&sql_rows) {
        assert_eq!(c, s, "the client's row, then the function's");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_function_and_the_client_share_unique_keys() {
    let (_db, client) = setup().await;
    let (later, deadline) = times();
    for pair in pairs(&later, &deadline)
        .into_iter()
        .filter(|p| p.job.unique.is_some())
    {
        let first = sql_enqueue(&client, &pair, &later, &deadline).await;
        let again = sql_enqueue(&client, &pair, &later, &deadline).await;
        assert_eq!(
            first, again,
            "{}: a second call returns the holder",
            pair.job.kind
        );
        let inserted = client
            .insert_each(std::slice::from_ref(&pair.job))
            .await
            .expect("client")[0];
        assert!(
            inserted.duplicate,
            "{}: the client sees the key",
            pair.job.kind
        );
        assert_eq!(inserted.id, first);
    }
    // a key held by args in another order is the same key
    let conn = client.database().conn().await.expect("conn");
    let a: i64 = conn
        .query_one(
            "SELECT remuda.enqueue('dedupe', '{\"a\": 1, \"b\": 2}', unique_by_args => true)",
            &[],
        )
        .await
        .expect("a")
        .get(0);
    let b: i64 = conn
        .query_one(
            "SELECT remuda.enqueue('dedupe', '{\"b\":2,\"a\":1}', unique_by_args => true)",
            &[],
        )
        .await
        .expect("b")
        .get(0);
    assert_eq!(a, b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_saying_what_and_nothing_is_written() {
    let (_db, client) = setup().await;
    let conn = client.database().conn().await.expect("conn");
    let refused = [
        ("remuda.enqueue('')", "the kind name is empty"),
        ("remuda.enqueue('k', queue => E'a\\tb')", "contains a control character"),
        ("remuda.enqueue(repeat('k', 201))", "over the limit of 200"),
        ("remuda.enqueue('k', max_attempts => 0)", "max_attempts must be at least 1"),
        ("remuda.enqueue('k', timeout => '0 s')", "timeout must be more than zero"),
        ("remuda.enqueue('k', deadline => now() - interval '1 s')", "has passed"),
        (
            "remuda.enqueue('k', delay => '2 h', deadline => now() + interval '1 h')",
            "would expire without running",
        ),
        ("remuda.enqueue('k', run_at => now(), delay => '1 s')", "both run_at and delay"),
        ("remuda.enqueue('k', unique_key => '')", "non-empty key"),
        ("remuda.enqueue('k', unique_period => '1 h')", "non-empty key"),
        ("remuda.enqueue('k', unique_per_queue => true)", "non-empty key"),
        (
            "remuda.enqueue('k', unique_key => 'u', unique_states => '{available,running}')",
            "must include scheduled, available and running",
        ),
        (
            "remuda.enqueue('k', unique_key => 'u', unique_states => '{scheduled,available,running,done}')",
            "unknown state",
        ),
        ("remuda.enqueue('k', concurrency_key => '')", "concurrency key must be 1 to 1000"),
        ("remuda.enqueue('k', requires => ARRAY[' '])", "required capability is empty"),
        ("remuda.enqueue('k', requires => ARRAY[E'\\t'])", "required capability is empty"),
        ("remuda.enqueue('k', notify => '{\"webhook\": \"http://:80\"}')", "not an http:// or https://"),
        ("remuda.enqueue('k', notify => '{\"webhook\": \"http://x:99999/\"}')", "not an http:// or https://"),
        ("remuda.enqueue('k', notify => '{\"webhook\": \"http://x:123456789012/\"}')", "not an http:// or https://"),
        ("remuda.enqueue('k', notify => '{\"email\": \"a@b.c\", \"on\": [\"Failed\"]}')", "unknown outcome"),
        ("remuda.enqueue('k', notify => '{}')", "needs a webhook URL or an email"),
        ("remuda.enqueue('k', notify => '{\"webhook\": \"ftp://x\"}')", "not an http:// or https://"),
        ("remuda.enqueue('k', notify => '{\"email\": \"nobody\"}')", "is not an email address"),
        ("remuda.enqueue('k', notify => '{\"email\": \"a@b.c\", \"on\": [\"retried\"]}')", "unknown outcome"),
        ("remuda.enqueue('k', notify => '{\"email\": \"a@b.c\", \"to\": 1}')", "unknown field"),
    ];
    for (call, expected) in refused {
        let err = conn
            .query_one(&format!("SELECT {call}"), &[])
            .await
            .expect_err(call);
        let db = err.as_db_error().expect("a database error");
        assert_eq!(db.code().code(), "22023", "{call}: {db:?}");
        assert!(db.message().contains(expected), "{call}: {}", db.message());
    }
    conn.batch_execute("SET remuda.max_payload = 10")
        .await
        .expect("set");
    let err = conn
        .query_one(
            "SELECT remuda.enqueue('k', '{\"big\": \"0123456789\"}')",
            &[],
        )
        .await
        .expect_err("over the payload limit");
    let message = err.as_db_error().expect("db").message().to_string();
    assert!(message.contains("over the limit of 10 bytes"), "{message}");
    let jobs: i64 = conn
        .query_one("SELECT count(*) FROM remuda.jobs", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(jobs, 0, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_enqueues_in_the_writers_transaction_within_queue_limits() {
    let (_db, client) = setup().await;
    let mut conn = client.database().conn().await.expect("conn");
    conn.batch_execute(
        "CREATE TABLE signups (email text NOT NULL);
         CREATE FUNCTION welcome() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             PERFORM remuda.enqueue('welcome', jsonb_build_object('email', NEW.email), queue => 'mail');
             RETURN NEW;
         END $$;
         CREATE TRIGGER welcome AFTER INSERT ON signups FOR EACH ROW EXECUTE FUNCTION welcome();",
    )
    .await
    .expect("trigger");
    let tx = conn.transaction().await.expect("begin");
    tx.execute("INSERT INTO signups VALUES ('gone@example.com')", &[])
        .await
        .expect("insert");
    tx.rollback().await.expect("rollback");
    conn.execute("INSERT INTO signups VALUES ('kept@example.com')", &[])
        .await
        .expect("insert");
    let jobs = client.jobs(&Default::default()).await.expect("list");
    assert_eq!(jobs.len(), 1, "the rolled-back signup left no job");
    assert_eq!(jobs[0].args, json!({"email": "kept@example.com"}));
    assert_eq!(jobs[0].queue, "mail");
    // the queue's depth limit applies to the function's inserts as to the client's
    conn.batch_execute("INSERT INTO remuda.queues (name, max_depth) VALUES ('mail', 1)")
        .await
        .expect("limit");
    let err = conn
        .execute("INSERT INTO signups VALUES ('third@example.com')", &[])
        .await
        .expect_err("full");
    let message = err.as_db_error().expect("db").message().to_string();
    assert!(message.contains("queue mail is full"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compiled_workflow_starts_from_sql_once_per_key() {
    let (_db, client) = setup().await;
    let spec: remuda::workflow::WorkflowSpec = serde_json::from_value(json!({
        "name": "sums",
        "output": "total",
        "nodes": {
            "first": {"kind": "add", "args_from": {"a": "$input"}, "args": {"b": 1}},
            "total": {"kind": "add", "args": {"a": 1, "b": 10}, "waits_for": ["first"]}
        }
    }))
    .expect("spec");
    let compiled = remuda::workflow::compile(&spec).expect("compiles");
    let conn = client.database().conn().await.expect("conn");
    let start = "SELECT remuda.start_workflow($1, $2, 'order-7')";
    let id: i64 = conn
        .query_one(start, &[&compiled, &json!(5)])
        .await
        .expect("start")
        .get(0);
    let again: i64 = conn
        .query_one(start, &[&compiled, &json!(5)])
        .await
        .expect("start again")
        .get(0);
    assert_eq!(id, again, "one run per key");
    let running = common::start_with(&client, common::Add);
    let run = client
        .wait_workflow(id, Duration::from_secs(30))
        .await
        .expect("ends");
    running.shutdown().await;
    assert_eq!(run.output, Some(json!(11)), "{run:?}");
    let first = &run.nodes["first"];
    assert_eq!(
        first.result,
        Some(json!({"ok": 6})),
        "the input reached the first node"
    );
    let mut other = compiled.clone();
    other["nodes"][1]["args"]["b"] = json!(20);
    let err = conn
        .query_one(start, &[&other, &json!(5)])
        .await
        .expect_err("another definition under the key");
    let db = err.as_db_error().expect("db");
    assert_eq!(db.code().code(), "23505");
    assert!(
        db.message().contains("another definition"),
        "{}",
        db.message()
    );
    let uncompiled = serde_json::to_value(&spec).expect("spec as JSON");
    let err = conn
        .query_one(start, &[&uncompiled, &json!(5)])
        .await
        .expect_err("a spec that was not compiled");
    let db = err.as_db_error().expect("db");
    assert!(db.message().contains("is not compiled"), "{}", db.message());
    assert!(db.hint().unwrap_or("").contains("remuda workflow compile"));
}
