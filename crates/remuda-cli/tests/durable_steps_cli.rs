//! `remuda step NAME -- CMD` in a command task: the command runs once per job, across a
//! SIGKILL of the worker and across retries; its stdout is recorded as it was (bytes that are
//! not UTF-8 too) and printed again by a later attempt; a failed command is not recorded and
//! its exit code passes through; `remuda job --json` lists the steps and `retry --fresh`
//! drops them.

mod common;

use common::{code, enqueue, json, migrated, remuda, stderr, until, TempDir, WorkerProcess, BIN};
use std::time::Duration;

const WORKER: &str = r#"
[worker]
concurrency = 2
shutdown_timeout = "1s"
poll_interval = "200ms"
heartbeat_interval = "300ms"
rescue_after = "1500ms"
maintenance_interval = "300ms"
promote_interval = "100ms"
"#;

/// A config with one command task `kind` running `script` under `sh -c`.
fn config(dir: &TempDir, kind: &str, script: &str) -> std::path::PathBuf {
    let task = format!(
        "\n[tasks.{kind}]\ncommand = [\"sh\", \"-c\", {}]\nmax_attempts = 3\nbackoff = {{ kind = \"fixed\", delay = \"100ms\" }}\n",
        toml_string(script)
    );
    dir.write("remuda.toml", &format!("{WORKER}{task}"))
}

fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

async fn job(db: &common::TestDatabase, id: i64) -> serde_json::Value {
    json(&remuda(db, &["job", &id.to_string(), "--json"]).await)
}

async fn until_state(db: &common::TestDatabase, id: i64, state: &str) -> serde_json::Value {
    common::wait_for_state(db, id, &[state], Duration::from_secs(30)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_step_runs_once_across_a_sigkill_of_its_worker() {
    let db = migrated().await;
    let dir = TempDir::new();
    let (log, ready) = (dir.path().join("charges.log"), dir.path().join("ready"));
    let script = format!(
        r#"cat >/dev/null
out=$({BIN} step charge -- sh -c 'echo charged >> {log}; echo "ch_$REMUDA_JOB_ATTEMPT"') || exit $?
if [ "$REMUDA_JOB_ATTEMPT" = 1 ]; then touch {ready}; sleep 60; fi
echo "{{\"charge\": \"$out\"}}""#,
        log = log.display(),
        ready = ready.display()
    );
    let config = config(&dir, "charge", &script);
    let id = enqueue(&db, &["charge", "--args", "{}"]).await;

    let doomed = WorkerProcess::start(&db, &config);
    until(
        "the step to have run",
        Duration::from_secs(30),
        async || ready.exists(),
    )
    .await;
    let killed = doomed.pid();
    doomed.kill().await;
    let rescuer = WorkerProcess::start(&db, &config);
    let done = until_state(&db, id, "completed").await;
    rescuer.stop().await;
    // the killed worker's step socket directory, swept by the next worker's first step
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("temp dir")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("remuda-steps-{killed}-"))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");

    let charges = std::fs::read_to_string(&log).expect("log");
    assert_eq!(charges.lines().count(), 1, "charged once: {charges:?}");
    assert_eq!(done["attempt"], 2);
    assert_eq!(done["result"]["ok"], serde_json::json!({"charge": "ch_1"}));
    let steps = done["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{done}");
    assert_eq!(steps[0]["name"], "charge");
    assert_eq!(steps[0]["output"], "ch_1\n", "stdout as it was");
    assert_eq!(steps[0]["attempt"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_command_step_is_not_recorded_and_its_exit_code_is_the_jobs_and_each_run_has_one_key(
) {
    let db = migrated().await;
    let dir = TempDir::new();
    let runs = dir.path().join("runs");
    let script = format!(
        r#"cat >/dev/null
{BIN} step send -- sh -c 'echo "run $REMUDA_STEP_KEY" >> {runs}; [ "$REMUDA_JOB_ATTEMPT" != 1 ] || exit 3; echo sent' || exit $?"#,
        runs = runs.display()
    );
    let config = config(&dir, "send", &script);
    let id = enqueue(&db, &["send", "--args", "{}"]).await;
    let worker = WorkerProcess::start(&db, &config);
    let done = until_state(&db, id, "completed").await;
    worker.stop().await;

    assert_eq!(done["errors"][0]["code"], "EXIT_3", "{done}");
    let ran = std::fs::read_to_string(&runs).expect("runs");
    let key = format!("run {id}:send");
    assert_eq!(
        ran.lines().collect::<Vec<_>>(),
        [key.as_str(), key.as_str()],
        "run again after its failure, with the same idempotency key"
    );
    assert_eq!(done["steps"][0]["attempt"], 2, "{done}");
    assert_eq!(done["steps"][0]["output"], "sent\n");
    assert_eq!(done["result"]["ok"], "sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_stdout_is_not_utf8_is_printed_again_byte_for_byte() {
    let db = migrated().await;
    let dir = TempDir::new();
    let seen = dir.path().join("seen");
    let script = format!(
        r#"cat >/dev/null
{BIN} step bytes -- printf '\377\376\n' > {seen}.$REMUDA_JOB_ATTEMPT || exit $?
[ "$REMUDA_JOB_ATTEMPT" != 1 ] || exit 1"#,
        seen = seen.display()
    );
    let config = config(&dir, "bytes", &script);
    let id = enqueue(&db, &["bytes", "--args", "{}"]).await;
    let worker = WorkerProcess::start(&db, &config);
    let done = until_state(&db, id, "completed").await;
    worker.stop().await;

    let first = std::fs::read(format!("{}.1", seen.display())).expect("first");
    let second = std::fs::read(format!("{}.2", seen.display())).expect("second");
    assert_eq!(first, b"\xff\xfe\n");
    assert_eq!(second, first, "replayed as it was");
    assert_eq!(
        done["steps"][0]["output"],
        serde_json::json!({"base64": "//4K"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_fresh_drops_the_steps_and_the_job_runs_its_steps_again() {
    let db = migrated().await;
    let dir = TempDir::new();
    let runs = dir.path().join("runs");
    let script = format!(
        r#"cat >/dev/null
{BIN} step once -- sh -c 'echo run >> {runs}; echo ok'"#,
        runs = runs.display()
    );
    let config = config(&dir, "once", &script);
    let id = enqueue(&db, &["once", "--args", "{}"]).await;
    let worker = WorkerProcess::start(&db, &config);
    until_state(&db, id, "completed").await;

    // a plain rerun resumes after the step; a fresh one runs it again
    let rerun = remuda(&db, &["retry", &id.to_string(), "--force", "--json"]).await;
    assert_eq!(code(&rerun), 0, "{}", stderr(&rerun));
    assert_eq!(json(&rerun)["fresh"], false);
    until("the rerun", Duration::from_secs(30), async || {
        job(&db, id).await["state"] == "completed"
    })
    .await;
    let count = || std::fs::read_to_string(&runs).map(|t| t.lines().count());
    assert_eq!(count().expect("runs"), 1);

    let fresh = remuda(
        &db,
        &["retry", &id.to_string(), "--force", "--fresh", "--json"],
    )
    .await;
    assert_eq!(code(&fresh), 0, "{}", stderr(&fresh));
    assert_eq!(json(&fresh)["fresh"], true);
    until("the fresh run", Duration::from_secs(30), async || {
        let job = job(&db, id).await;
        job["state"] == "completed" && job["steps"].as_array().is_some_and(|s| s.len() == 1)
    })
    .await;
    worker.stop().await;
    assert_eq!(count().expect("runs"), 2);

    let text = remuda(&db, &["job", &id.to_string()]).await;
    assert!(
        common::stdout(&text).contains("step          once (attempt"),
        "{}",
        common::stdout(&text)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remuda_step_outside_a_job_says_so_and_runs_nothing() {
    let dir = TempDir::new();
    let marker = dir.path().join("ran");
    let output = tokio::process::Command::new(BIN)
        .args(["step", "x", "--", "touch"])
        .arg(&marker)
        .env_remove("REMUDA_STEP_SOCKET")
        .output()
        .await
        .expect("run");
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("REMUDA_STEP_SOCKET"),
        "{}",
        stderr(&output)
    );
    assert!(!marker.exists(), "nothing ran");

    let missing = tokio::process::Command::new(BIN)
        .args(["step", "x"])
        .output()
        .await
        .expect("run");
    assert_eq!(code(&missing), 2, "the command is required");
}

/// A step the worker could not be asked about never ran its command, and says so with a
/// code of its own (69), apart from a step that ran and could not be recorded (75): a
/// script may run the first again, not the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_worker_is_gone_did_not_run_and_exits_69() {
    let dir = TempDir::new();
    let marker = dir.path().join("ran");
    let output = tokio::process::Command::new(BIN)
        .args(["step", "charge", "--", "touch"])
        .arg(&marker)
        .env("REMUDA_STEP_SOCKET", dir.path().join("gone.sock"))
        .output()
        .await
        .expect("run");
    assert_eq!(code(&output), 69, "{}", stderr(&output));
    assert!(stderr(&output).contains("charge"), "{}", stderr(&output));
    assert!(!marker.exists(), "the command did not run");
}

/// Names with a tab, a newline or the durable sleeps' prefix are refused inside a real job
/// (exit 2) and their commands never run; a good name beside them runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_names_with_control_characters_or_the_sleep_prefix_are_refused() {
    let db = migrated().await;
    let dir = TempDir::new();
    let ran = dir.path().join("ran");
    let script = format!(
        r#"cat >/dev/null
{BIN} step "$(printf 'a\tb')" -- sh -c 'echo tab >> {ran}'; tab=$?
{BIN} step "$(printf 'a\nb')" -- sh -c 'echo newline >> {ran}'; newline=$?
{BIN} step sleep-1 -- sh -c 'echo sleep >> {ran}'; sleep=$?
{BIN} step fine -- sh -c 'echo fine >> {ran}' >/dev/null; fine=$?
echo "[$tab, $newline, $sleep, $fine]""#,
        ran = ran.display()
    );
    let config = config(&dir, "names", &script);
    let id = enqueue(&db, &["names", "--args", "{}"]).await;
    let worker = WorkerProcess::start(&db, &config);
    let done = until_state(&db, id, "completed").await;
    worker.stop().await;

    assert_eq!(
        done["result"]["ok"],
        serde_json::json!([2, 2, 2, 0]),
        "{done}"
    );
    let ran = std::fs::read_to_string(&ran).expect("ran");
    assert_eq!(ran, "fine\n", "only the good name's command ran");
    let steps: Vec<&str> = done["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(steps, ["fine"], "{done}");
}

/// `remuda sleep DUR` in a command task: its first run records the sleep's end and exits 85,
/// which the task passes on; the job waits (scheduled, no attempt spent) and runs again
/// once the time has passed, when the sleep returns at once and the task goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_sleeps_durably_and_goes_on_after_the_sleep_without_an_attempt() {
    let db = migrated().await;
    let dir = TempDir::new();
    let runs = dir.path().join("runs");
    let script = format!(
        r#"cat >/dev/null
echo "run $REMUDA_JOB_ATTEMPT" >> {runs}
{BIN} sleep 1500ms || exit $?
echo '"woke"'"#,
        runs = runs.display()
    );
    let nap_config = config(&dir, "nap", &script);
    let id = enqueue(&db, &["nap", "--args", "{}"]).await;
    let started = std::time::Instant::now();
    let worker = WorkerProcess::start(&db, &nap_config);
    until("the job sleeps", Duration::from_secs(30), async || {
        std::fs::read_to_string(&runs).is_ok_and(|r| r.lines().count() == 1)
            && job(&db, id).await["state"] == "scheduled"
    })
    .await;
    let done = until_state(&db, id, "completed").await;
    worker.stop().await;
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert_eq!(done["result"]["ok"], "woke", "{done}");
    assert_eq!(done["errors"], serde_json::json!([]), "a sleep is no error");
    assert_eq!(done["steps"][0]["name"], "sleep-1", "{done}");
    let ran = std::fs::read_to_string(&runs).expect("runs");
    assert_eq!(
        ran.lines().count(),
        2,
        "run again once, after the sleep: {ran}"
    );

    // exit 85 without a sleep that said time was left is the command's own error
    let odd_dir = TempDir::new();
    let odd_config = config(&odd_dir, "odd", "cat >/dev/null; exit 85");
    let odd = enqueue(&db, &["odd", "--args", "{}"]).await;
    let worker = WorkerProcess::start(&db, &odd_config);
    let failed = until_state(&db, odd, "failed").await;
    worker.stop().await;
    assert_eq!(failed["errors"][0]["code"], "EXIT_85", "{failed}");

    let outside = tokio::process::Command::new(BIN)
        .args(["sleep", "1s"])
        .env_remove("REMUDA_STEP_SOCKET")
        .output()
        .await
        .expect("run");
    assert_eq!(code(&outside), 2, "{}", stderr(&outside));
    assert!(stderr(&outside).contains("REMUDA_STEP_SOCKET"));
}

/// A step whose stdout is over a step's 8 MiB ran but can never be recorded: `remuda step`
/// exits 65, saying which limit, and the job fails with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_over_its_size_can_never_be_recorded_and_exits_65() {
    let db = migrated().await;
    let dir = TempDir::new();
    let script = format!(
        r#"cat >/dev/null
{BIN} step big -- sh -c "head -c 9000000 /dev/zero | tr '\\0' a" >/dev/null"#
    );
    let config = config(&dir, "big", &script);
    let id = enqueue(&db, &["big", "--args", "{}", "--max-attempts", "1"]).await;
    let worker = WorkerProcess::start(&db, &config);
    let failed = until_state(&db, id, "failed").await;
    worker.stop().await;
    assert_eq!(failed["errors"][0]["code"], "EXIT_65", "{failed}");
    let message = failed["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("STEP_TOO_LARGE"), "{message}");
    assert_eq!(failed["steps"], serde_json::json!([]), "nothing recorded");
}
