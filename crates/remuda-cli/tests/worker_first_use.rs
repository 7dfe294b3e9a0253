//! What a new user meets when running `remuda worker`: command tasks die with their worker,
//! a killed leader is replaced quickly, configs that can never work are refused before the
//! worker starts, `--once` has a defined end and exit code, jobs nobody runs are pointed
//! out, and shutdown can be hurried.

mod common;

use common::*;
use std::time::{Duration, Instant};

const FAST: &str = r#"
[worker]
poll_interval = "200ms"
heartbeat_interval = "250ms"
rescue_after = "1500ms"
promote_interval = "100ms"
shutdown_timeout = "20s"
"#;

fn alive(pid: i32) -> bool {
    // a zombie nobody reaps yet is dead all the same
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn job_state(db: &TestDatabase, id: i64) -> serde_json::Value {
    json(&remuda(db, &["job", &id.to_string(), "--json"]).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_task_dies_with_its_sigkilled_worker() {
    let db = migrated().await;
    let dir = TempDir::new();
    let pids = dir.path().join("pids");
    let config = dir.write(
        "remuda.toml",
        &format!(
            "{FAST}\n[tasks.sleepy]\ncommand = [\"sh\", \"-c\", \"sleep 60 & echo $! >> {p}; echo $$ >> {p}; wait\"]\n",
            p = pids.display()
        ),
    );
    let id = enqueue(&db, &["sleepy"]).await;
    let worker = WorkerProcess::start(&db, &config);
    let read = || {
        std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .collect::<Vec<_>>()
    };
    until(
        "the command and its child to start",
        Duration::from_secs(20),
        async || read().len() == 2,
    )
    .await;
    let started = read();
    assert!(started.iter().all(|&p| alive(p)), "{started:?} running");
    worker.kill().await;
    until(
        "the command and its child to die with the worker",
        Duration::from_secs(5),
        async || started.iter().all(|&p| !alive(p)),
    )
    .await;
    assert_eq!(
        job_state(&db, id).await["state"],
        "running",
        "left for the rescuer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leaders_jobs_are_rescued_about_rescue_after_later_not_after_its_lease() {
    let db = migrated().await;
    let dir = TempDir::new();
    // default maintenance_interval (5 s): the leader lease is 15 s
    let config = |name: &str| {
        dir.write(
            &format!("{name}.toml"),
            &format!(
                "[worker]\nname = \"{name}\"\nheartbeat_interval = \"500ms\"\nrescue_after = \"2s\"\n[tasks.hold]\ncommand = [\"sleep\", \"60\"]\n"
            ),
        )
    };
    let first = WorkerProcess::start(&db, &config("first"));
    let pool = db.database().expect("pool");
    let leader = || async {
        let conn = pool.conn().await.expect("conn");
        conn.query_opt("SELECT leader_id FROM remuda.leader", &[])
            .await
            .expect("leader")
            .map(|r| r.get::<_, String>(0))
    };
    until(
        "the first worker to lead",
        Duration::from_secs(20),
        async || leader().await.is_some(),
    )
    .await;
    let second = WorkerProcess::start(&db, &config("second"));
    let id = enqueue(&db, &["hold", "--target-worker", "first"]).await;
    until(
        "the leader to run the job",
        Duration::from_secs(20),
        async || job_state(&db, id).await["state"] == "running",
    )
    .await;
    until(
        "the second worker to register",
        Duration::from_secs(20),
        async || {
            json(&remuda(&db, &["workers", "--json"]).await)
                .as_array()
                .is_some_and(|w| w.len() == 2)
        },
    )
    .await;
    let killed = Instant::now();
    first.kill().await;
    until(
        "the leader's job to be rescued",
        Duration::from_secs(30),
        async || job_state(&db, id).await["errors"][0]["code"] == "WORKER_LOST",
    )
    .await;
    let took = killed.elapsed();
    // rescue_after (2 s) + one maintenance round (5 s) + slack, well short of the 15 s lease
    assert!(took < Duration::from_secs(11), "rescued after {took:?}");
    assert!(
        leader().await.is_some_and(|l| l.starts_with("second")),
        "the second worker leads"
    );
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_no_live_worker_runs_are_counted_unroutable_and_enqueue_warns() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!("{FAST}\n[tasks.resize]\nbuiltin = \"noop\"\nqueue = \"media\"\n"),
    );
    let worker = WorkerProcess::start(&db, &config);
    until(
        "the worker to register",
        Duration::from_secs(20),
        async || {
            json(&remuda(&db, &["workers", "--json"]).await)
                .as_array()
                .is_some_and(|w| !w.is_empty())
        },
    )
    .await;
    let output = remuda(&db, &["enqueue", "resize"]).await;
    assert_eq!(code(&output), 0);
    assert!(
        stderr(&output).contains("no live worker runs kind \"resize\" in queue \"default\""),
        "{}",
        stderr(&output)
    );
    let queues = json(&remuda(&db, &["queues", "--json"]).await);
    let default = queues
        .as_array()
        .and_then(|q| q.iter().find(|q| q["queue"] == "default"))
        .expect("default listed");
    assert_eq!(default["unroutable"], 1, "{queues}");
    let output = remuda(
        &db,
        &[
            "enqueue",
            "resize",
            "--config",
            config.to_str().expect("path"),
        ],
    )
    .await;
    assert!(!stderr(&output).contains("warning"), "{}", stderr(&output));
    let workers = stdout(&remuda(&db, &["workers"]).await);
    assert!(
        workers.contains("resize") && workers.contains("NAME"),
        "{workers}"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_once_waits_for_a_due_retry_and_exits_1_when_a_job_failed() {
    let db = migrated().await;
    let dir = TempDir::new();
    let marker = dir.path().join("tried");
    let config = dir.write(
        "remuda.toml",
        &format!(
            "{FAST}
[tasks.flaky]
command = [\"sh\", \"-c\", \"cat >/dev/null; if [ -e {m} ]; then echo ok; else touch {m}; exit 3; fi\"]
backoff = {{ kind = \"fixed\", delay = \"1s\" }}
max_attempts = 2

[tasks.doomed]
command = [\"sh\", \"-c\", \"cat >/dev/null; exit 4\"]
max_attempts = 1
",
            m = marker.display()
        ),
    );
    let path = config.to_str().expect("path");
    let flaky = enqueue(&db, &["flaky", "--config", path]).await;
    let run = remuda(&db, &["worker", "--config", path, "--once"]).await;
    assert_eq!(code(&run), 0, "every job completed: {}", stderr(&run));
    assert_eq!(
        job_state(&db, flaky).await["state"],
        "completed",
        "the retry ran within the run"
    );
    // each failed attempt keeps when it started, for the timeline
    let job = job_state(&db, flaky).await;
    let parse = |v: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("a time ({e}): {job:#}"))
    };
    let first = &job["errors"][0];
    assert!(
        parse(&first["started_at"]) <= parse(&first["at"]),
        "{job:#}"
    );
    assert!(
        parse(&first["started_at"]) < parse(&job["started_at"]),
        "{job:#}"
    );
    let text = stdout(&remuda(&db, &["job", &flaky.to_string()]).await);
    assert!(text.contains("attempt 1 (started "), "{text}");

    let doomed = enqueue(&db, &["doomed", "--config", path]).await;
    enqueue(&db, &["flaky", "--config", path, "--delay", "1h"]).await;
    let run = remuda(&db, &["worker", "--config", path, "--once"]).await;
    assert_eq!(code(&run), 1, "a job failed: {}", stderr(&run));
    assert_eq!(job_state(&db, doomed).await["state"], "failed");
    assert!(
        stderr(&run).contains("1 job of these queues and kinds left scheduled"),
        "{}",
        stderr(&run)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_serving_named_queues_its_tasks_do_not_name_runs_their_jobs_with_a_warning() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!("{FAST}queues = [\"q1\", \"q2\"]\n\n[tasks.a]\nbuiltin = \"noop\"\n"),
    );
    let path = config.to_str().expect("path");
    let first = enqueue(&db, &["a", "--queue", "q1"]).await;
    let second = enqueue(&db, &["a", "--queue", "q2"]).await;
    let run = remuda(&db, &["worker", "--config", path, "--once"]).await;
    assert_eq!(code(&run), 0, "the worker ran: {}", stderr(&run));
    for id in [first, second] {
        assert_eq!(job_state(&db, id).await["state"], "completed", "job {id}");
    }
    let err = stderr(&run);
    assert!(
        err.contains(
            "warning: this worker serves queues q1, q2 but every task's default queue is default"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_that_could_never_work_are_refused_before_the_worker_starts() {
    let db = migrated().await;
    let dir = TempDir::new();
    let noop = "[tasks.a]\nbuiltin = \"noop\"\nqueue = \"media\"\n";
    let cases: &[(&str, &str, &str)] = &[
        ("[worker]\nqueues = []\n", noop, "queues is empty"),
        ("[worker]\nqueue_weights = { nope = 2 }\n", noop, "queue_weights names queue \"nope\""),
        ("[worker]\nqueue_order = \"strict\"\nqueue_weights = { media = 2 }\n", noop, "round_robin"),
        ("[worker]\nconcurrency = 99999999999999\n", noop, "out of range"),
        ("[worker]\nclaim_batch = 0\n", noop, "out of range"),
        ("[worker]\ncrash_loop_limit = 0\n", noop, "out of range"),
        ("[worker]\nmax_payload_bytes = 0\n", noop, "out of range"),
        ("[worker]\nheartbeat_interval = \"10s\"\nrescue_after = \"4s\"\n", noop, "at most half of rescue_after"),
        ("", "[tasks.a]\nbuiltin = \"noop\"\nmax_attempts = 0\n", "max_attempts is 0"),
        (
            "",
            "[tasks.a]\nurl = \"http://127.0.0.1:9/x\"\nheaders = { \"Bad Name\" = \"v\" }\n",
            "[tasks.a] headers Bad Name",
        ),
        ("", "[tasks.a]\nurl = \"http://127.0.0.1:9/x\"\nheaders = { X = \"a\\nb\" }\n", "header value"),
        (
            "",
            "[tasks.a]\nbuiltin = \"noop\"\nbackoff = { kind = \"exponential\", base = \"1m\", max = \"1s\" }\n",
            "base (1m) is more than its max (1s)",
        ),
    ];
    for (n, (worker, tasks, expected)) in cases.iter().enumerate() {
        let path = dir.write(&format!("bad{n}.toml"), &format!("{worker}\n{tasks}"));
        let output = remuda(&db, &["worker", "--config", path.to_str().expect("path")]).await;
        assert_eq!(code(&output), 2, "{worker}{tasks}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(
            err.contains(expected),
            "{worker}{tasks}: expected {expected:?} in {err}"
        );
        assert!(
            err.contains(&format!("bad{n}.toml: invalid worker config")),
            "{err}"
        );
        assert!(!err.contains("running"), "refused before the banner: {err}");
    }
    let good = dir.write("good.toml", noop);
    let output = remuda(
        &db,
        &[
            "worker",
            "--config",
            good.to_str().expect("path"),
            "--name=",
        ],
    )
    .await;
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("--name is empty"),
        "{}",
        stderr(&output)
    );
    let workers = json(&remuda(&db, &["workers", "--json"]).await);
    assert_eq!(workers, serde_json::json!([]), "no worker ever registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_expand_variables_resolve_against_their_config_and_name_a_missing_workdir() {
    let db = migrated().await;
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("bin")).expect("bin");
    let script = dir.write(
        "bin/greet.sh",
        "#!/bin/sh\ncat >/dev/null\necho \"\\\"$1 from $(pwd)\\\"\"\n",
    );
    nix::sys::stat::fchmodat(
        None,
        &script,
        nix::sys::stat::Mode::from_bits_truncate(0o755),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )
    .expect("chmod");
    std::fs::create_dir_all(dir.path().join("work")).expect("work");
    let config = dir.write(
        "remuda.toml",
        &format!(
            "{FAST}
[tasks.greet]
command = [\"bin/greet.sh\", \"${{REMUDA_TEST_TOKEN}}\"]
workdir = \"work\"

[tasks.lost]
command = [\"sh\", \"-c\", \"echo hi\"]
workdir = \"/surely/not/here\"

[tasks.termed]
command = [\"sh\", \"-c\", \"cat >/dev/null; kill -TERM $$\"]
max_attempts = 1

[tasks.piped]
command = [\"sh\", \"-c\", \"cat >/dev/null; kill -PIPE $$\"]
max_attempts = 1

[tasks.bignum]
command = [\"sh\", \"-c\", \"cat >/dev/null; echo '{{\\\"n\\\": 123456789012345678901234567890.10}}'\"]
"
        ),
    );
    let greet = enqueue(&db, &["greet"]).await;
    let lost = enqueue(&db, &["lost"]).await;
    let bignum = enqueue(&db, &["bignum"]).await;
    let termed = enqueue(&db, &["termed"]).await;
    let piped = enqueue(&db, &["piped"]).await;
    // started from another directory than the config's
    let worker = WorkerProcess::start(&db, &config);
    let greeted = wait_for_state(
        &db,
        greet,
        &["completed", "failed"],
        Duration::from_secs(20),
    )
    .await;
    let expected = format!("tok3n from {}", dir.path().join("work").display());
    assert_eq!(greeted["result"]["ok"], expected.as_str(), "{greeted}");
    wait_for_state(&db, bignum, &["completed"], Duration::from_secs(20)).await;
    let shown = stdout(&remuda(&db, &["job", &bignum.to_string(), "--json"]).await);
    assert!(
        shown.contains("123456789012345678901234567890.10"),
        "a command's output is kept exactly: {shown}"
    );
    // a command's death by a signal passes through its supervisor as it was
    for (id, code) in [(termed, "SIGNAL_15"), (piped, "SIGNAL_13")] {
        let job = wait_for_state(&db, id, &["failed"], Duration::from_secs(20)).await;
        assert_eq!(job["errors"][0]["code"], code, "{job}");
    }
    let lost = wait_for_state(&db, lost, &["scheduled", "failed"], Duration::from_secs(20)).await;
    let message = lost["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("/surely/not/here") && message.contains("working directory"),
        "{lost}"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_the_shutdown_at_once_and_releases_the_job() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!("{FAST}\n[tasks.stubborn]\ncommand = [\"sh\", \"-c\", \"trap '' TERM; cat >/dev/null; sleep 60\"]\n"),
    );
    let id = enqueue(&db, &["stubborn"]).await;
    let log = dir.path().join("worker.log");
    let mut worker = WorkerProcess::start_at(db.conninfo(), &config, Some(&log));
    until("the job to run", Duration::from_secs(20), async || {
        job_state(&db, id).await["state"] == "running"
    })
    .await;
    worker.signal(nix::sys::signal::Signal::SIGTERM);
    until(
        "the shutdown to say what it waits for",
        Duration::from_secs(10),
        async || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("waiting up to 20s for 1 running job")
        },
    )
    .await;
    let second = Instant::now();
    worker.signal(nix::sys::signal::Signal::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(10), worker.child.wait())
        .await
        .expect("stopped at once, not after the 20 s shutdown timeout")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(second.elapsed() < Duration::from_secs(10));
    let job = job_state(&db, id).await;
    assert_eq!(job["state"], "available", "released: {job}");
    assert_eq!(job["attempt"], 0, "the interrupted attempt is not counted");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !text.contains('\u{1b}'),
        "no colours in a log written to a file: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verbose_worker_logs_each_job_with_its_outcome_and_duration() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!("{FAST}\n[tasks.ping]\nbuiltin = \"noop\"\n"),
    );
    let id = enqueue(&db, &["ping"]).await;
    let output = tokio::process::Command::new(BIN)
        .args([
            "-v",
            "--database-url",
            db.conninfo(),
            "worker",
            "--once",
            "--config",
        ])
        .arg(&config)
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("run");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let log = stderr(&output);
    let ended = log
        .lines()
        .find(|l| l.contains("job ended") && l.contains(&format!("job={id}")))
        .unwrap_or_else(|| panic!("no line for job {id}: {log}"));
    assert!(
        ended.contains("outcome=completed") && ended.contains("ms="),
        "{ended}"
    );
    assert!(
        ended.contains("INFO"),
        "-v is info, as --help says: {ended}"
    );
    assert!(log.contains("job started"), "{log}");
    enqueue(&db, &["ping"]).await;
    let quiet = worker_once(&db, &config).await;
    assert!(
        !stderr(&quiet).contains("job started"),
        "{}",
        stderr(&quiet)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_job_as_fields_and_rust_log_filters_them() {
    let db = migrated().await;
    let dir = TempDir::new();
    let config = dir.write(
        "remuda.toml",
        &format!("{FAST}\n[tasks.ping]\nbuiltin = \"noop\"\n"),
    );
    let id = enqueue(&db, &["ping"]).await;
    let run = |env: Option<&'static str>, extra: &'static [&'static str]| {
        let mut command = tokio::process::Command::new(BIN);
        command
            .args([
                "--database-url",
                db.conninfo(),
                "worker",
                "--once",
                "--config",
            ])
            .arg(&config)
            .args(extra)
            .env_remove("DATABASE_URL")
            .env_remove("RUST_LOG");
        if let Some(filter) = env {
            command.env("RUST_LOG", filter);
        }
        command.output()
    };
    let output = run(Some("remuda=debug"), &["--log-format", "json"])
        .await
        .expect("run");
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let events: Vec<serde_json::Value> = stderr(&output)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let ended = events
        .iter()
        .find(|e| e["fields"]["message"] == "job ended")
        .unwrap_or_else(|| panic!("no job line in {events:?}"));
    assert_eq!(ended["fields"]["job"], id);
    assert_eq!(ended["fields"]["kind"], "ping");
    assert_eq!(ended["fields"]["attempt"], 1);
    assert!(
        ended["fields"]["worker"]
            .as_str()
            .is_some_and(|w| !w.is_empty()),
        "{ended}"
    );

    enqueue(&db, &["ping"]).await;
    let quiet = run(Some("error"), &["-vv"]).await.expect("run");
    assert_eq!(code(&quiet), 0);
    assert!(
        !stderr(&quiet).contains("job ended"),
        "RUST_LOG wins over -v: {}",
        stderr(&quiet)
    );
    let bad = run(Some("remuda=loud"), &[]).await.expect("run");
    assert_eq!(code(&bad), 2);
    assert!(stderr(&bad).contains("RUST_LOG"), "{}", stderr(&bad));
}
