//! Helpers for driving the real `remuda` binary against a test database.
#![allow(dead_code, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

pub use remuda::testing::TestDatabase;

pub const BIN: &str = env!("CARGO_BIN_EXE_remuda");

/// Runs `remuda --database-url <db> args…` to completion.
pub async fn remuda(db: &TestDatabase, args: &[&str]) -> Output {
    tokio::process::Command::new(BIN)
        .arg("--database-url")
        .arg(db.conninfo())
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("run remuda")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Parses stdout as JSON, failing with both streams shown.
pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\nstdout: {}\nstderr: {}",
            stdout(output),
            stderr(output)
        )
    })
}

pub fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

/// Sends SIGTERM to `child` and waits (at most `limit`) for it to exit cleanly.
pub async fn terminate(child: &mut tokio::process::Child, limit: std::time::Duration) {
    let pid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let status = tokio::time::timeout(limit, child.wait())
        .await
        .expect("it stops")
        .expect("status");
    assert!(status.success(), "{status:?}");
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "remuda-test-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write file");
        path
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `remuda worker` child process.
pub struct WorkerProcess {
    pub child: tokio::process::Child,
}

impl WorkerProcess {
    pub fn start(db: &TestDatabase, config: &Path) -> WorkerProcess {
        WorkerProcess::start_at(db.conninfo(), config, None)
    }

    /// A worker on any database, its stderr appended to `log` when given.
    pub fn start_at(conninfo: &str, config: &Path, log: Option<&Path>) -> WorkerProcess {
        let mut command = tokio::process::Command::new(BIN);
        command
            .arg("--database-url")
            .arg(conninfo)
            .arg("worker")
            .arg("--config")
            .arg(config)
            .env_remove("DATABASE_URL")
            .env("REMUDA_TEST_TOKEN", "tok3n")
            .kill_on_drop(true);
        if let Some(log) = log {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .expect("worker log");
            command.stderr(file);
        }
        WorkerProcess {
            child: command.spawn().expect("start worker"),
        }
    }

    /// `remuda worker --config config [args]` run by `command` (the binary itself, or a
    /// wrapper such as `ip netns exec … remuda`, with any environment of its own) on
    /// `database_url`, its stderr appended to `log`.
    pub fn spawn(
        mut command: tokio::process::Command,
        config: &Path,
        args: &[&str],
        database_url: &str,
        log: &Path,
    ) -> WorkerProcess {
        command
            .arg("worker")
            .arg("--config")
            .arg(config)
            .args(args)
            .env("DATABASE_URL", database_url)
            .kill_on_drop(true)
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .expect("worker log"),
            );
        WorkerProcess {
            child: command.spawn().expect("start worker"),
        }
    }

    /// SIGKILL, and wait until the process is gone.
    pub async fn kill(mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait().await;
    }

    pub fn pid(&self) -> i32 {
        self.child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .expect("worker pid")
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal)
            .expect("signal worker");
    }

    /// SIGTERM and wait for a clean exit.
    pub async fn stop(self) -> std::process::ExitStatus {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        self.stop_after_signal().await
    }

    /// Waits for the exit of a worker already signalled.
    pub async fn stop_after_signal(mut self) -> std::process::ExitStatus {
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("worker stops within 30 s")
            .expect("wait for worker")
    }
}

/// Polls `remuda job ID --json` until the job is in one of `states`.
pub async fn wait_for_state(
    db: &TestDatabase,
    id: i64,
    states: &[&str],
    limit: Duration,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let job = json(&remuda(db, &["job", &id.to_string(), "--json"]).await);
        if states.iter().any(|s| job["state"] == *s) {
            return job;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {id} never reached {states:?}: {job}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Enqueues with the CLI and returns the id.
pub async fn enqueue(db: &TestDatabase, args: &[&str]) -> i64 {
    let mut all = vec!["enqueue"];
    all.extend_from_slice(args);
    all.push("--json");
    let output = remuda(db, &all).await;
    assert_eq!(code(&output), 0, "enqueue failed: {}", stderr(&output));
    json(&output)["id"].as_i64().expect("id")
}

/// `remuda worker --once --config CONFIG`: runs what is due, then exits.
pub async fn worker_once(db: &TestDatabase, config: &Path) -> Output {
    let config = config.to_str().expect("a UTF-8 path");
    remuda(db, &["worker", "--once", "--config", config]).await
}

/// A migrated test database.
pub async fn migrated() -> TestDatabase {
    TestDatabase::new().await.expect("test database")
}

/// Polls `check` every 50 ms until it holds, failing after `limit` with `what`.
pub async fn until(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A worker config whose tasks append "job_id attempt" to `executions` and sleep `sleep`
/// seconds: `record` in queue `default`, `record_capped` in queue `capped`; `concurrency`
/// slots, polling every `poll`, declared dead after `rescue_after`.
pub fn recording_config(
    dir: &TempDir,
    executions: &Path,
    sleep: &str,
    concurrency: u32,
    poll: &str,
    rescue_after: &str,
) -> PathBuf {
    let log = executions.to_str().expect("path");
    let task = format!(
        "command = [\"sh\", \"-c\", \"cat >/dev/null; echo $REMUDA_JOB_ID $REMUDA_JOB_ATTEMPT >> {log}; sleep {sleep}\"]\nmax_attempts = 20"
    );
    dir.write(
        "remuda.toml",
        &format!(
            r#"
[worker]
concurrency = {concurrency}
poll_interval = "{poll}"
heartbeat_interval = "250ms"
rescue_after = "{rescue_after}"
maintenance_interval = "250ms"
promote_interval = "100ms"
shutdown_timeout = "5s"
crash_loop_limit = 1000

[tasks.record]
{task}

[tasks.record_capped]
queue = "capped"
{task}
"#
        ),
    )
}

/// Executions per job id, from a log written by [`recording_config`]'s tasks.
pub fn executions_per_job(log: &Path) -> std::collections::HashMap<i64, usize> {
    let mut per_job = std::collections::HashMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if let Some(id) = line.split_whitespace().next().and_then(|i| i.parse().ok()) {
            *per_job.entry(id).or_default() += 1;
        }
    }
    per_job
}

/// The count a query returns.
pub async fn count(client: &remuda::Client, sql: &str) -> i64 {
    client
        .database()
        .conn()
        .await
        .expect("conn")
        .query_one(sql, &[])
        .await
        .expect("count")
        .get(0)
}
