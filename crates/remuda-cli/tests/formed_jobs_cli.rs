//! `remuda enqueue --debounce | --throttle | --batch-key` as scripts use them: the JSON they
//! print, how `remuda job` shows the job they formed, the batch's size and wait from the
//! config file, and clear refusals (exit 2) of what does not fit.

mod common;

use common::{code, json, migrated, remuda, stderr, stdout, TempDir};

async fn enqueue_json(db: &common::TestDatabase, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["enqueue"];
    all.extend_from_slice(args);
    all.push("--json");
    let output = remuda(db, &all).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    json(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounced_enqueue_joins_the_waiting_job_and_says_so() {
    let db = migrated().await;
    let flags = ["reindex", "--unique-key", "doc:7", "--debounce", "1h"];
    let first = enqueue_json(&db, &[&flags[..], &["--args", r#"{"v": 1}"#]].concat()).await;
    assert_eq!(first["debounced"], false);
    let second = enqueue_json(&db, &[&flags[..], &["--args", r#"{"v": 2}"#]].concat()).await;
    assert_eq!(second["id"], first["id"]);
    assert_eq!(
        (second["debounced"].clone(), second["duplicate"].clone()),
        (true.into(), false.into())
    );

    let id = first["id"].to_string();
    let job = json(&remuda(&db, &["job", &id, "--json"]).await);
    assert_eq!(job["formed"], serde_json::json!({"debounced": 2}));
    assert_eq!(job["args"], serde_json::json!({"v": 2}));
    assert_eq!(job["state"], "scheduled");
    let text = stdout(&remuda(&db, &["job", &id]).await);
    assert!(
        text.contains("formed        debounced (2 enqueues)"),
        "{text}"
    );

    // found by its key
    let by_key = json(
        &remuda(
            &db,
            &["jobs", "--kind", "reindex", "--key", "doc:7", "--json"],
        )
        .await,
    );
    assert_eq!(by_key.as_array().map(Vec::len), Some(1), "{by_key}");
    assert_eq!(by_key[0]["id"], first["id"]);
    let none = json(
        &remuda(
            &db,
            &[
                "jobs", "--kind", "reindex", "--key", "doc:7", "--state", "running", "--json",
            ],
        )
        .await,
    );
    assert_eq!(none, serde_json::json!([]));
    let text = stdout(&remuda(&db, &["jobs", "--kind", "reindex", "--key", "doc:7"]).await);
    assert!(text.contains(&id), "{text}");
    let out = remuda(&db, &["jobs", "--key", "doc:7"]).await;
    assert_eq!(code(&out), 2, "--key needs --kind: {}", stderr(&out));
    assert!(stderr(&out).contains("--kind"), "{}", stderr(&out));
}

/// A key's scope is part of it: a debounced or throttled enqueue of a key that a job formed
/// the same way holds in the same queue under the other scope (with and without
/// `--unique-per-queue`) is refused, saying why, rather than making a second waiting job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_formed_key_enqueued_again_under_the_other_scope_is_refused_saying_why() {
    let db = migrated().await;
    for (formation, period) in [("--debounce", "1h"), ("--throttle", "1h")] {
        let key = format!("doc{formation}");
        let across = ["reindex", "--unique-key", &key, formation, period];
        let first = enqueue_json(&db, &across).await;
        let per_queue = [&across[..], &["--unique-per-queue"]].concat();
        let out = remuda(&db, &[&["enqueue"][..], &per_queue].concat()).await;
        assert_eq!(code(&out), 2, "{formation}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains(&format!("job {} of this kind and key waits", first["id"]))
                && said.contains("scope is part of the key"),
            "{said}"
        );
        // the same scope joins as before
        assert_eq!(enqueue_json(&db, &across).await["id"], first["id"]);

        // and the other way round: held per queue, enqueued across queues
        let key = format!("page{formation}");
        let per_queue = [
            "reindex",
            "--unique-key",
            &key,
            formation,
            period,
            "--unique-per-queue",
        ];
        let first = enqueue_json(&db, &per_queue).await;
        let out = remuda(&db, &[&["enqueue"][..], &per_queue[..5]].concat()).await;
        assert_eq!(code(&out), 2, "{formation}: {}", stderr(&out));
        assert!(stderr(&out).contains("held per queue"), "{}", stderr(&out));
        // a key held per queue in another queue is no conflict
        let elsewhere = [&per_queue[..5], &["--queue", "other"]].concat();
        assert_ne!(enqueue_json(&db, &elsewhere).await["id"], first["id"]);
    }
    let waiting = json(&remuda(&db, &["jobs", "--kind", "reindex", "--json"]).await);
    assert_eq!(
        waiting.as_array().map(Vec::len),
        Some(6),
        "three jobs per formation, no second one in a key's queue: {waiting}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_enqueues_take_their_size_and_wait_from_the_config() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        "[tasks.digest]\ncommand = [\"cat\"]\nbatch_size = 3\nbatch_wait = \"1h\"\n",
    );
    let config = config.to_str().expect("path");
    let mut ids = Vec::new();
    for i in 0..4 {
        let args = format!("{{\"i\": {i}}}");
        let out = enqueue_json(
            &db,
            &[
                "digest",
                "--config",
                config,
                "--batch-key",
                "k",
                "--args",
                &args,
            ],
        )
        .await;
        ids.push((out["id"].as_i64().expect("id"), out["batched"].as_bool()));
    }
    assert_eq!(ids[1], (ids[0].0, Some(true)));
    assert_eq!(ids[2], (ids[0].0, Some(true)));
    assert_ne!(ids[3].0, ids[0].0, "a full batch takes no more");
    let full = json(&remuda(&db, &["job", &ids[0].0.to_string(), "--json"]).await);
    assert_eq!(full["state"], "available");
    assert_eq!(
        full["args"],
        serde_json::json!([{"i": 0}, {"i": 1}, {"i": 2}])
    );
    assert_eq!(full["formed"]["batched"], 3);
    assert_eq!(
        full["formed"]["enqueued_at"].as_array().map(Vec::len),
        Some(3)
    );
    let next = json(&remuda(&db, &["job", &ids[3].0.to_string(), "--json"]).await);
    assert_eq!(next["state"], "scheduled");
}

/// A debounce or throttle declared once on the task (`[tasks.X] debounce`, `throttle`) forms
/// every enqueue of the kind that gives a unique key and no formation of its own; one
/// without a key is a plain job, and a task that declares both is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounce_or_throttle_declared_on_the_task_forms_every_keyed_enqueue() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        "[tasks.reindex]\ncommand = [\"cat\"]\ndebounce = \"1h\"\ndebounce_max = \"2h\"\n\n\
         [tasks.sync]\ncommand = [\"cat\"]\nthrottle = \"1h\"\nthrottle_latest = true\n",
    );
    let config = config.to_str().expect("path");
    let keyed = |kind: &'static str, v: i64| {
        let args = format!("{{\"v\": {v}}}");
        let db = &db;
        async move {
            enqueue_json(
                db,
                &[
                    kind,
                    "--config",
                    config,
                    "--unique-key",
                    "d",
                    "--args",
                    &args,
                ],
            )
            .await
        }
    };
    let first = keyed("reindex", 1).await;
    let second = keyed("reindex", 2).await;
    assert_eq!(
        (second["id"].clone(), second["debounced"].clone()),
        (first["id"].clone(), true.into())
    );
    let job = json(&remuda(&db, &["job", &first["id"].to_string(), "--json"]).await);
    assert_eq!(job["formed"], serde_json::json!({"debounced": 2}));
    assert_eq!(job["args"], serde_json::json!({"v": 2}));
    let plain = enqueue_json(&db, &["reindex", "--config", config]).await;
    assert_ne!(plain["id"], first["id"], "no key: a plain job");

    let first = keyed("sync", 1).await;
    let second = keyed("sync", 2).await;
    assert_eq!(
        (second["id"].clone(), second["throttled"].clone()),
        (first["id"].clone(), true.into())
    );
    let job = json(&remuda(&db, &["job", &first["id"].to_string(), "--json"]).await);
    assert_eq!(
        job["args"],
        serde_json::json!({"v": 2}),
        "throttle_latest from the task"
    );

    // a task that declares both is refused with its config
    let both = dir.write(
        "both.toml",
        "[tasks.both]\ncommand = [\"cat\"]\ndebounce = \"1h\"\nthrottle = \"1h\"\n",
    );
    let out = remuda(
        &db,
        &["enqueue", "both", "--config", both.to_str().expect("path")],
    )
    .await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("[tasks.both]") && said.contains("give one of them"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formations_that_do_not_fit_exit_2_saying_what_to_give() {
    let db = migrated().await;
    let cases: [(&[&str], &str); 8] = [
        (&["reindex", "--debounce", "1m"], "--unique-key"),
        // flags that each go with another formation: refused, never dropped
        (
            &[
                "reindex",
                "--unique-key",
                "a",
                "--debounce",
                "1m",
                "--throttle-latest",
            ],
            "throttle_latest is for a throttle",
        ),
        (
            &[
                "digest",
                "--batch-key",
                "k",
                "--batch-size",
                "2",
                "--batch-wait",
                "1s",
                "--throttle-latest",
            ],
            "throttle_latest is for a throttle",
        ),
        (
            &[
                "digest",
                "--batch-key",
                "k",
                "--batch-size",
                "2",
                "--batch-wait",
                "1s",
                "--debounce-max",
                "5s",
            ],
            "debounce_max caps a debounce",
        ),
        (
            &[
                "reindex",
                "--unique-key",
                "a",
                "--debounce",
                "10s",
                "--debounce-max",
                "5s",
            ],
            "shorter than the debounce",
        ),
        (
            &[
                "reindex",
                "--unique-key",
                "a",
                "--debounce",
                "1m",
                "--throttle",
                "1m",
            ],
            "cannot be used with",
        ),
        (&["digest", "--batch-key", "k"], "batch_size and batch_wait"),
        (
            &["reindex", "--unique-key", "a", "--throttle-latest"],
            "--throttle",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["enqueue"];
        all.extend_from_slice(args);
        let output = remuda(&db, &all).await;
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(says),
            "{args:?} should say {says:?}: {}",
            stderr(&output)
        );
    }
    let listed = json(&remuda(&db, &["jobs", "--json"]).await);
    assert_eq!(listed, serde_json::json!([]), "nothing enqueued");
}

/// `enqueue-batch` of lines that form one job says so: one job made, the other lines joined
/// it (their line numbers, and the id of the job they joined), in JSON and in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_batch_says_how_many_jobs_it_made_and_how_many_lines_joined_one() {
    let db = migrated().await;
    let dir = TempDir::new();
    let file = dir.write("lines.jsonl", "{\"v\":1}\n{\"v\":2}\n{\"v\":3}\n");
    let path = file.to_str().expect("path");
    let ways: [&[&str]; 2] = [
        &["reindex", "--unique-key", "doc", "--debounce", "1h"],
        &[
            "digest",
            "--batch-key",
            "k",
            "--batch-size",
            "10",
            "--batch-wait",
            "1h",
        ],
    ];
    for way in ways {
        let mut all = vec!["enqueue-batch", "--file", path, "--json"];
        all.extend_from_slice(way);
        let output = remuda(&db, &all).await;
        assert_eq!(code(&output), 0, "{way:?}: {}", stderr(&output));
        let out = json(&output);
        assert_eq!(
            (
                &out["count"],
                &out["inserted"],
                &out["joined"],
                &out["duplicates"]
            ),
            (&1.into(), &1.into(), &2.into(), &0.into()),
            "{way:?}: {out}"
        );
        assert_eq!(out["joined_lines"], serde_json::json!([2, 3]), "{out}");
        let ids = out["ids"].as_array().expect("ids");
        assert!(
            ids.len() == 3 && ids.iter().all(|id| *id == ids[0]),
            "{out}"
        );
    }
    let output = remuda(
        &db,
        &[
            "enqueue-batch",
            "--file",
            path,
            "reindex",
            "--unique-key",
            "text",
            "--debounce",
            "1h",
        ],
    )
    .await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).contains("enqueued 1 job ")
            && stdout(&output).contains("2 lines joined waiting jobs"),
        "{}",
        stdout(&output)
    );
}
