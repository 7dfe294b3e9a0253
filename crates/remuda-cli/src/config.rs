//! The worker config file (`remuda.toml`): the worker's queues and limits, and one table per
//! task kind saying how to run it (a command, an HTTP endpoint, or a built-in) and its retry
//! policy and timeout. Unknown keys are errors, so a typo is reported, not ignored.

use crate::error::{CliError, CliResult};
use remuda::{Backoff, TaskOptions};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[worker]`.
    #[serde(default)]
    pub worker: WorkerSection,
    /// `[tasks.<kind>]`.
    #[serde(default)]
    pub tasks: BTreeMap<String, TaskSection>,
}

/// `queue_order` as written in the config file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum QueueOrderName {
    /// Queues take turns.
    RoundRobin,
    /// Queues in the order listed.
    Strict,
}

impl From<QueueOrderName> for remuda::QueueOrder {
    fn from(name: QueueOrderName) -> Self {
        match name {
            QueueOrderName::RoundRobin => remuda::QueueOrder::RoundRobin,
            QueueOrderName::Strict => remuda::QueueOrder::Strict,
        }
    }
}

/// `[worker]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    /// Name shown in `remuda workers`.
    pub name: Option<String>,
    /// Queues to claim from (default: every queue the tasks name).
    pub queues: Option<Vec<String>>,
    /// What this worker can do (jobs enqueued with --requires need all of theirs).
    pub capabilities: Option<Vec<String>>,
    /// How the queues share free slots: "round_robin" (default) or "strict" (in order).
    pub queue_order: Option<QueueOrderName>,
    /// Round-robin weights per queue (default 1): `{ high = 3 }`.
    pub queue_weights: Option<BTreeMap<String, u32>>,
    /// Jobs run at once.
    pub concurrency: Option<usize>,
    /// Time running jobs get at shutdown.
    #[serde(default, with = "opt_duration")]
    pub shutdown_timeout: Option<Duration>,
    /// Poll interval when no notification comes.
    #[serde(default, with = "opt_duration")]
    pub poll_interval: Option<Duration>,
    /// Heartbeat interval.
    #[serde(default, with = "opt_duration")]
    pub heartbeat_interval: Option<Duration>,
    /// Silence after which a worker's jobs are rescued.
    #[serde(default, with = "opt_duration")]
    pub rescue_after: Option<Duration>,
    /// Time a stopped job gets to return before it is aborted.
    #[serde(default, with = "opt_duration")]
    pub cancel_grace: Option<Duration>,
    /// Attempts in a row that may end with their worker lost before the job fails with CRASH_LOOP.
    pub crash_loop_limit: Option<u32>,
    /// How often the elected leader rescues, expires and prunes (its lease is 3 of these).
    #[serde(default, with = "opt_duration")]
    pub maintenance_interval: Option<Duration>,
    /// Longest the leader waits between promotions of due scheduled jobs.
    #[serde(default, with = "opt_duration")]
    pub promote_interval: Option<Duration>,
    /// Most jobs claimed by one statement.
    pub claim_batch: Option<usize>,
    /// Size limit for args, results and errors, in bytes (default 1 MiB).
    pub max_payload_bytes: Option<usize>,
}

/// `[tasks.<kind>]`: exactly one of `command`, `url`, `builtin`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSection {
    /// Program and arguments; the job arrives as JSON on stdin.
    pub command: Option<Vec<String>>,
    /// Extra environment for the command (`${VAR}` expands).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the command.
    pub workdir: Option<String>,
    /// Endpoint the job is POSTed to as JSON.
    pub url: Option<String>,
    /// Headers for the HTTP request (`${VAR}` expands from the environment).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A task built into remuda: `noop` returns its args.
    pub builtin: Option<String>,
    /// Queue of jobs enqueued with this config.
    pub queue: Option<String>,
    /// Priority of jobs enqueued with this config.
    pub priority: Option<i32>,
    /// Timeout of each attempt.
    #[serde(default, with = "opt_duration")]
    pub timeout: Option<Duration>,
    /// Attempts allowed.
    pub max_attempts: Option<i32>,
    /// Wait between attempts.
    pub backoff: Option<Backoff>,
    /// Error codes that are retried (omitted: every error).
    pub retry_on: Option<Vec<String>>,
}

/// How a kind runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Runner {
    /// A program.
    Command {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        workdir: Option<String>,
    },
    /// An HTTP endpoint.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// A built-in task.
    Builtin(String),
}

/// The built-in tasks.
pub const BUILTINS: &[&str] = &["noop"];

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> CliResult<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::Usage(format!(
                "cannot read worker config {}: {e}. Pass --config with the path of your remuda.toml",
                path.display()
            ))
        })?;
        Config::parse(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))
    }

    /// Parses and checks config text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config =
            toml::from_str(text).map_err(|e| format!("invalid worker config: {e}"))?;
        for (kind, task) in &config.tasks {
            task.runner(kind)?;
            if matches!(task.max_attempts, Some(n) if n < 1) {
                return Err(format!("[tasks.{kind}] max_attempts must be at least 1"));
            }
            if matches!(task.timeout, Some(t) if t.is_zero()) {
                return Err(format!("[tasks.{kind}] timeout must be more than zero"));
            }
        }
        if matches!(config.worker.concurrency, Some(0)) {
            return Err("[worker] concurrency must be at least 1".into());
        }
        Ok(config)
    }

    /// Queues the worker claims from: `[worker].queues`, else every queue a task names,
    /// else `default`.
    pub fn queues(&self) -> Vec<String> {
        if let Some(queues) = &self.worker.queues {
            return queues.clone();
        }
        let mut queues: Vec<String> = self.tasks.values().map(|t| t.queue().to_string()).collect();
        queues.sort();
        queues.dedup();
        if queues.is_empty() {
            queues.push("default".into());
        }
        queues
    }
}

impl TaskSection {
    /// The queue of this kind's jobs.
    pub fn queue(&self) -> &str {
        self.queue.as_deref().unwrap_or("default")
    }

    /// How this kind runs, with `${VAR}`s expanded.
    pub fn runner(&self, kind: &str) -> Result<Runner, String> {
        let set = [
            self.command.is_some(),
            self.url.is_some(),
            self.builtin.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err(format!(
                "[tasks.{kind}] needs exactly one of command = [...], url = \"...\" or builtin = \"noop\""
            ));
        }
        if let Some(argv) = &self.command {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(format!(
                    "[tasks.{kind}] command is empty: give the program and its arguments"
                ));
            }
            let env = self
                .env
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        expand_env(v).map_err(|e| format!("[tasks.{kind}] env {k}: {e}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?;
            return Ok(Runner::Command {
                argv: argv.clone(),
                env,
                workdir: self.workdir.clone(),
            });
        }
        if let Some(url) = &self.url {
            let url = expand_env(url).map_err(|e| format!("[tasks.{kind}] url: {e}"))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "[tasks.{kind}] url {url:?} must start with http:// or https://"
                ));
            }
            let headers = self
                .headers
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        expand_env(v).map_err(|e| format!("[tasks.{kind}] header {k}: {e}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?;
            return Ok(Runner::Http { url, headers });
        }
        let name = self.builtin.clone().unwrap_or_default();
        if !BUILTINS.contains(&name.as_str()) {
            return Err(format!(
                "[tasks.{kind}] unknown builtin {name:?}: the built-in tasks are {}",
                BUILTINS.join(", ")
            ));
        }
        Ok(Runner::Builtin(name))
    }

    /// The library's view of this kind's defaults and retry policy.
    pub fn options(&self) -> TaskOptions {
        let defaults = TaskOptions::default();
        TaskOptions {
            queue: self.queue().to_string(),
            priority: self.priority.unwrap_or(defaults.priority),
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            backoff: self.backoff.clone().unwrap_or(defaults.backoff),
            retry_on: self.retry_on.clone(),
            timeout: self.timeout,
        }
    }
}

/// Expands `${VAR}` from the environment; a variable that is not set is an error.
pub fn expand_env(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unclosed ${{ in {text:?}"))?;
        let name = &after[..end];
        let value = std::env::var(name)
            .map_err(|_| format!("environment variable {name} is not set (used as ${{{name}}})"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

mod opt_duration {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| remuda::duration::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[worker]
queues = ["default", "media"]
concurrency = 32
shutdown_timeout = "30s"

[tasks.resize]
command = ["python3", "resize.py"]
queue = "media"
timeout = "2m"
max_attempts = 5
backoff = { kind = "exponential", base = "1s", max = "10m", jitter = true }
retry_on = ["TIMEOUT", "EXIT_75"]

[tasks.agent_run]
url = "http://127.0.0.1:9001/run"
headers = { Authorization = "Bearer ${REMUDA_TEST_TOKEN}" }
timeout = "10m"
"#;

    #[test]
    fn the_documented_example_parses() {
        std::env::set_var("REMUDA_TEST_TOKEN", "s3cret");
        let config = Config::parse(EXAMPLE).expect("example parses");
        assert_eq!(config.queues(), vec!["default", "media"]);
        assert_eq!(config.worker.concurrency, Some(32));
        assert_eq!(
            config.worker.shutdown_timeout,
            Some(Duration::from_secs(30))
        );
        let resize = &config.tasks["resize"];
        let options = resize.options();
        assert_eq!(options.queue, "media");
        assert_eq!(options.max_attempts, 5);
        assert_eq!(options.timeout, Some(Duration::from_secs(120)));
        assert_eq!(
            options.retry_on,
            Some(vec!["TIMEOUT".to_string(), "EXIT_75".to_string()])
        );
        assert_eq!(
            options.backoff,
            Backoff::Exponential {
                base: Duration::from_secs(1),
                max: Duration::from_secs(600),
                jitter: true
            }
        );
        match config.tasks["agent_run"].runner("agent_run") {
            Ok(Runner::Http { url, headers }) => {
                assert_eq!(url, "http://127.0.0.1:9001/run");
                assert_eq!(
                    headers,
                    vec![("Authorization".to_string(), "Bearer s3cret".to_string())]
                );
            }
            other => panic!("expected an HTTP runner, got {other:?}"),
        }
    }

    #[test]
    fn mistakes_are_reported_clearly() {
        let cases = [
            ("[worker]\nconcurency = 3", "unknown field `concurency`"),
            ("[tasks.a]\nqueue = \"x\"", "needs exactly one of"),
            ("[tasks.a]\ncommand = []", "command is empty"),
            ("[tasks.a]\nbuiltin = \"nope\"", "unknown builtin"),
            (
                "[tasks.a]\nbuiltin = \"noop\"\ntimeout = \"soon\"",
                "invalid duration",
            ),
            (
                "[tasks.a]\nurl = \"http://x/${REMUDA_SURELY_UNSET_VAR}\"",
                "REMUDA_SURELY_UNSET_VAR is not set",
            ),
            ("[tasks.a]\nurl = \"ftp://x\"", "must start with http"),
        ];
        for (text, expected) in cases {
            let err = Config::parse(text).expect_err(text);
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
