//! The worker config file (`remuda.toml`): the worker's queues and limits, and one table per
//! task kind saying how to run it (a command, an HTTP endpoint, or a built-in) and its retry
//! policy and timeout. Unknown keys are errors, so a typo is reported, not ignored.

pub mod notifications;
pub mod schedules;

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
    /// `[schedules.<name>]`.
    #[serde(default)]
    pub schedules: BTreeMap<String, schedules::ScheduleSection>,
    /// `[retention]`: how long finished jobs are kept, per final state.
    #[serde(default)]
    pub retention: RetentionSection,
    /// `[notifications]`: how completion notifications are signed and sent.
    #[serde(default)]
    pub notifications: notifications::NotificationsSection,
    /// `[telemetry]`: where the spans of attempts are exported (OTLP over HTTP); without it
    /// the standard `OTEL_EXPORTER_OTLP_ENDPOINT` and other `OTEL_*` variables apply.
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// The directory of the config file: relative command paths and workdirs resolve
    /// against it, so a config works from whatever directory the worker is started in.
    #[serde(skip)]
    pub base_dir: std::path::PathBuf,
}

/// `[telemetry]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    /// The OTLP/HTTP collector's base URL (`http://collector:4318`).
    pub endpoint: Option<String>,
    /// `service.name` of the spans (default `OTEL_SERVICE_NAME`, else `remuda`).
    pub service_name: Option<String>,
    /// `child` (an attempt's span descends from its enqueue's) or `link` (a root of the job's
    /// own trace, linked to it).
    #[serde(default)]
    pub propagation: remuda::telemetry::Propagation,
}

impl TelemetrySection {
    /// The exporter's settings (unset ones fall back to the `OTEL_*` environment).
    pub fn config(&self) -> remuda::telemetry::TelemetryConfig {
        remuda::telemetry::TelemetryConfig {
            endpoint: self.endpoint.clone(),
            service_name: self.service_name.clone(),
            propagation: self.propagation,
        }
    }
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
    #[serde(default, deserialize_with = "bounded::concurrency")]
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
    #[serde(default, deserialize_with = "bounded::positive_u32")]
    pub crash_loop_limit: Option<u32>,
    /// How often the elected leader rescues, expires and prunes (its lease is 3 of these).
    #[serde(default, with = "opt_duration")]
    pub maintenance_interval: Option<Duration>,
    /// Longest the leader waits between promotions of due scheduled jobs.
    #[serde(default, with = "opt_duration")]
    pub promote_interval: Option<Duration>,
    /// How often the leader deletes finished jobs past their retention.
    #[serde(default, with = "opt_duration")]
    pub prune_interval: Option<Duration>,
    /// How often the leader looks for bloated job-table indexes to rebuild.
    #[serde(default, with = "opt_duration")]
    pub reindex_interval: Option<Duration>,
    /// Most jobs claimed by one statement.
    #[serde(default, deserialize_with = "bounded::concurrency")]
    pub claim_batch: Option<usize>,
    /// Size limit for args, results and errors, in bytes (default 1 MiB).
    #[serde(default, deserialize_with = "bounded::positive")]
    pub max_payload_bytes: Option<usize>,
}

/// `[retention]`: `completed = "1d"`, `failed = "30d"`, `cancelled = "7d"`,
/// `expired = "7d"` (the defaults); `"never"` keeps them. A queue's own retention
/// (`remuda queue set Q --retain-completed 1h`) wins.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSection {
    /// Completed jobs.
    #[serde(default, with = "opt_keep")]
    pub completed: Option<remuda::maintenance::Keep>,
    /// Failed jobs.
    #[serde(default, with = "opt_keep")]
    pub failed: Option<remuda::maintenance::Keep>,
    /// Cancelled jobs.
    #[serde(default, with = "opt_keep")]
    pub cancelled: Option<remuda::maintenance::Keep>,
    /// Expired jobs.
    #[serde(default, with = "opt_keep")]
    pub expired: Option<remuda::maintenance::Keep>,
    /// Delivered notifications (default 7 days).
    #[serde(default, with = "opt_keep")]
    pub notifications_sent: Option<remuda::maintenance::Keep>,
    /// Dead notifications (default 30 days).
    #[serde(default, with = "opt_keep")]
    pub notifications_dead: Option<remuda::maintenance::Keep>,
    /// The workers' minute-by-minute activity (default 7 days).
    #[serde(default, with = "opt_keep")]
    pub activity: Option<remuda::maintenance::Keep>,
    /// Audit entries of the dashboard (default 90 days).
    #[serde(default, with = "opt_keep")]
    pub audit: Option<remuda::maintenance::Keep>,
    /// Failures batched statements set aside, from their last occurrence (default 30 days).
    #[serde(default, with = "opt_keep")]
    pub failures: Option<remuda::maintenance::Keep>,
}

impl RetentionSection {
    /// The retention the section describes, defaults for what it leaves out.
    pub fn retention(&self) -> remuda::maintenance::Retention {
        let d = remuda::maintenance::Retention::default();
        remuda::maintenance::Retention {
            completed: self.completed.unwrap_or(d.completed),
            failed: self.failed.unwrap_or(d.failed),
            cancelled: self.cancelled.unwrap_or(d.cancelled),
            expired: self.expired.unwrap_or(d.expired),
            notifications_sent: self.notifications_sent.unwrap_or(d.notifications_sent),
            notifications_dead: self.notifications_dead.unwrap_or(d.notifications_dead),
            activity: self.activity.unwrap_or(d.activity),
            audit: self.audit.unwrap_or(d.audit),
            failures: self.failures.unwrap_or(d.failures),
        }
    }
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
    /// Who hears of this kind's final states: `{ webhook = "…", email = "…", on = [...] }`.
    pub notify: Option<notifications::NotifySection>,
    /// A task that takes batches: `remuda enqueue --batch-key K` adds to a batch that runs
    /// when this many have joined …
    pub batch_size: Option<i32>,
    /// … or when this long has passed since the first.
    #[serde(default, with = "opt_duration")]
    pub batch_wait: Option<Duration>,
    /// A debounce for this kind's enqueues with a unique key that name no formation of their
    /// own (`remuda enqueue K --unique-key doc:7`): declared once, used by every enqueue.
    #[serde(default, with = "opt_duration")]
    pub debounce: Option<Duration>,
    /// … capped at this long from the first enqueue.
    #[serde(default, with = "opt_duration")]
    pub debounce_max: Option<Duration>,
    /// A throttle for them instead: one start per this long.
    #[serde(default, with = "opt_duration")]
    pub throttle: Option<Duration>,
    /// … the waiting job taking the latest enqueue's args.
    #[serde(default)]
    pub throttle_latest: bool,
}

/// How a kind runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Runner {
    /// A program.
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
        /// Variables added to its environment.
        env: Vec<(String, String)>,
        /// The directory it runs in.
        workdir: Option<String>,
    },
    /// An HTTP endpoint.
    Http {
        /// Where the job is POSTed.
        url: String,
        /// Headers sent with it.
        headers: Vec<(String, String)>,
    },
    /// A built-in task.
    Builtin(String),
}

/// The built-in tasks.
pub const BUILTINS: &[&str] = &["noop"];

impl Config {
    /// Reads and checks a config file. Every error names the file, and the table and key
    /// at fault.
    pub fn load(path: &Path) -> CliResult<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::Usage(format!(
                "cannot read worker config {}: {e}. Pass --config with the path of your remuda.toml",
                path.display()
            ))
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        Config::parse_in(&text, &base).map_err(|e| Config::error(path, &e))
    }

    /// A config error in the one form every one takes: the file, then what is wrong where.
    pub fn error(path: &Path, message: &str) -> CliError {
        CliError::Usage(format!(
            "{}: invalid worker config: {message}",
            path.display()
        ))
    }

    /// Parses and checks config text, paths resolving against the current directory.
    #[cfg(test)]
    pub fn parse(text: &str) -> Result<Config, String> {
        Config::parse_in(text, Path::new("."))
    }

    /// Parses and checks config text; relative paths resolve against `base`.
    pub fn parse_in(text: &str, base: &Path) -> Result<Config, String> {
        let mut config: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        config.base_dir = base.to_path_buf();
        for (kind, task) in &config.tasks {
            remuda::client::check_name("kind", kind).map_err(|e| format!("[tasks.{kind}] {e}"))?;
            task.runner(kind, base)?;
            task.options()
                .validate(kind)
                .map_err(|e| format!("[tasks.{kind}] {e}"))?;
            task.notify_target()
                .map_err(|e| format!("[tasks.{kind}] {e}"))?;
        }
        config.notifications.config()?;
        config.check_queues()?;
        config.schedules()?;
        Ok(config)
    }

    /// The schedules the file declares, checked.
    pub fn schedules(&self) -> Result<Vec<remuda::schedule::Schedule>, String> {
        self.schedules
            .iter()
            .map(|(name, section)| {
                let queue = self.tasks.get(&section.kind).map(TaskSection::queue);
                section.schedule(name, queue)
            })
            .collect()
    }

    /// The checks across keys: queues the worker can serve, weights that can apply.
    fn check_queues(&self) -> Result<(), String> {
        let queues = self.queues();
        if queues.is_empty() {
            return Err(
                "[worker] queues is empty: list the queues to claim from, or leave it out to serve every queue the tasks name".into(),
            );
        }
        for queue in &queues {
            remuda::client::check_name("queue", queue)
                .map_err(|e| format!("[worker] queues: {e}"))?;
        }
        for queue in self.worker.queue_weights.iter().flatten().map(|(q, _)| q) {
            if !queues.contains(queue) {
                return Err(format!(
                    "[worker] queue_weights names queue {queue:?}, which this worker does not serve (its queues: {})",
                    queues.join(", ")
                ));
            }
        }
        if self.worker.queue_order == Some(QueueOrderName::Strict)
            && self
                .worker
                .queue_weights
                .as_ref()
                .is_some_and(|w| !w.is_empty())
        {
            return Err(
                "[worker] queue_weights apply to queue_order = \"round_robin\" only: with \"strict\" the first queue always goes first; remove the weights or the strict order".into(),
            );
        }
        if let Some(name) = &self.worker.name {
            remuda::client::check_name("worker", name)
                .map_err(|e| format!("[worker] name: {e}"))?;
        }
        Ok(())
    }

    /// What is allowed but likely a mistake, said when a worker starts: named queues that
    /// none of the tasks' default queues is in. Jobs are often enqueued with `--queue` into
    /// queues a task does not name, so such a worker may well be meant.
    pub fn warnings(&self, queues: &[String]) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.tasks.is_empty()
            && !self
                .tasks
                .values()
                .any(|t| queues.iter().any(|q| q == t.queue()))
        {
            let task_queues: std::collections::BTreeSet<&str> =
                self.tasks.values().map(TaskSection::queue).collect();
            warnings.push(format!(
                "this worker serves queues {} but every task's default queue is {}: it runs only jobs enqueued into its queues with --queue (or queue =); add the tasks' queues to [worker] queues to run their default ones too",
                queues.join(", "),
                task_queues.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        warnings
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

    /// How this kind runs, with `${VAR}`s expanded and relative paths (a command that names a
    /// path, such as `./resize.sh` or `bin/resize`, and `workdir`) resolved against `base`, the
    /// config file's directory. A bare program name (`python3`) is looked up on `PATH`.
    pub fn runner(&self, kind: &str, base: &Path) -> Result<Runner, String> {
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
            let mut argv = argv
                .iter()
                .enumerate()
                .map(|(i, arg)| {
                    expand_env(arg).map_err(|e| format!("[tasks.{kind}] command argument {i}: {e}"))
                })
                .collect::<Result<Vec<String>, String>>()?;
            if argv[0].contains('/') && !argv[0].starts_with('/') {
                argv[0] = base.join(&argv[0]).to_string_lossy().into_owned();
            }
            let workdir = self
                .workdir
                .as_ref()
                .map(|dir| {
                    let dir =
                        expand_env(dir).map_err(|e| format!("[tasks.{kind}] workdir: {e}"))?;
                    Ok::<_, String>(base.join(dir).to_string_lossy().into_owned())
                })
                .transpose()?;
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
            return Ok(Runner::Command { argv, env, workdir });
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
                    let value =
                        expand_env(v).map_err(|e| format!("[tasks.{kind}] headers {k}: {e}"))?;
                    check_header(k, &value)
                        .map_err(|e| format!("[tasks.{kind}] headers {k}: {e}"))?;
                    Ok((k.clone(), value))
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

    /// This kind's notification defaults (`notify = { … }`), checked.
    pub fn notify_target(&self) -> Result<Option<remuda::notify::NotifyTarget>, String> {
        self.notify.as_ref().map(|n| n.target()).transpose()
    }

    /// The library's view of this kind's defaults and retry policy.
    pub fn options(&self) -> TaskOptions {
        let defaults = TaskOptions::default();
        TaskOptions {
            notify: self.notify_target().ok().flatten(),
            queue: self.queue().to_string(),
            priority: self.priority.unwrap_or(defaults.priority),
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            backoff: self.backoff.clone().unwrap_or(defaults.backoff),
            retry_on: self.retry_on.clone(),
            timeout: self.timeout,
            batch_size: self.batch_size,
            batch_wait: self.batch_wait,
            debounce: self.debounce,
            debounce_max: self.debounce_max,
            throttle: self.throttle,
            throttle_latest: self.throttle_latest,
        }
    }
}

/// Checks that an HTTP header name and value can be sent (else every job of the kind would
/// fail with an opaque "builder error").
fn check_header(name: &str, value: &str) -> Result<(), String> {
    reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        format!(
            "{name:?} is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
        )
    })?;
    reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        "the value is not a valid HTTP header value (no control characters or newlines)".to_string()
    })?;
    Ok(())
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

/// Whole numbers with bounds, checked while parsing so that the error points at the line.
mod bounded {
    use serde::{Deserialize, Deserializer};

    fn within<'de, D: Deserializer<'de>>(
        d: D,
        low: i64,
        high: i64,
    ) -> Result<Option<i64>, D::Error> {
        let n = Option::<i64>::deserialize(d)?;
        match n {
            Some(n) if n < low || n > high => Err(serde::de::Error::custom(format!(
                "{n} is out of range: give a whole number from {low} to {high}"
            ))),
            n => Ok(n),
        }
    }

    /// `concurrency`, `claim_batch`: 1 to the library's maximum.
    pub fn concurrency<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        let high = i64::try_from(remuda::worker::MAX_CONCURRENCY).unwrap_or(i64::MAX);
        Ok(within(d, 1, high)?.and_then(|n| usize::try_from(n).ok()))
    }

    /// `max_payload_bytes`: at least 1.
    pub fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        Ok(within(d, 1, i64::MAX)?.and_then(|n| usize::try_from(n).ok()))
    }

    /// `crash_loop_limit`: at least 1.
    pub fn positive_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        Ok(within(d, 1, i64::from(u32::MAX))?.and_then(|n| u32::try_from(n).ok()))
    }
}

mod opt_keep {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<remuda::maintenance::Keep>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
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
        match config.tasks["agent_run"].runner("agent_run", Path::new(".")) {
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
    fn the_documented_schedules_parse() {
        let text = r#"
[tasks.report]
builtin = "noop"
queue = "reports"

[schedules.nightly_report]
kind = "report"
args = { scope = "all" }
cron = "0 3 * * *"
tz = "Europe/Berlin"
catch_up = "skip"
overlap = "allow"

[schedules.tick]
kind = "other"
every = "30s"

[schedules.quarter]
kind = "report"
hourly = { minute = 15 }

[schedules.standup]
kind = "report"
weekly = { days = ["mon", "fri"], at = "09:30" }

[schedules.payroll]
kind = "report"
monthly = { day = 31, at = "06:00" }
catch_up = "all"
overlap = "skip"
"#;
        let config = Config::parse(text).expect("parses");
        let schedules = config.schedules().expect("schedules");
        let text_of = |name: &str| {
            let s = schedules.iter().find(|s| s.name == name).expect(name);
            (s.pattern.to_string(), s.queue.clone(), s.zone.to_string())
        };
        assert_eq!(
            text_of("nightly_report"),
            ("0 3 * * *".into(), "reports".into(), "Europe/Berlin".into()),
            "the kind's queue by default"
        );
        assert_eq!(
            text_of("tick"),
            ("every 30s".into(), "default".into(), "UTC".into())
        );
        assert_eq!(text_of("quarter").0, "hourly :15");
        assert_eq!(text_of("standup").0, "weekly mon,fri 09:30");
        assert_eq!(text_of("payroll").0, "monthly 31 06:00");
        let nightly = schedules
            .iter()
            .find(|s| s.name == "nightly_report")
            .expect("nightly");
        assert_eq!(nightly.args, serde_json::json!({"scope": "all"}));
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
            ("[retention]\ncompleted = \"soon\"", "or never to keep them for ever"),
            ("[retention]\nfinished = \"1d\"", "unknown field `finished`"),
            (
                "[schedules.n]\nkind = \"a\"\ncron = \"61 * * * *\"",
                "[schedules.n] cron: invalid cron minute field \"61\"",
            ),
            (
                "[schedules.n]\nkind = \"a\"\nevery = \"0s\"",
                "[schedules.n] every: every = \"0s\" is not allowed",
            ),
            (
                "[schedules.n]\nkind = \"a\"\ndaily = \"03:00\"\ntz = \"Mars/Olympus\"",
                "[schedules.n] tz: unknown time zone \"Mars/Olympus\"",
            ),
            (
                "[schedules.n]\nkind = \"a\"\nmonthly = { day = 32, at = \"06:00\" }",
                "[schedules.n] monthly: day 32 does not exist",
            ),
            (
                "[schedules.n]\nkind = \"a\"\ndaily = \"03:00\"\ncatchup = \"all\"",
                "unknown field `catchup`",
            ),
            (
                "[schedules.n]\nkind = \"a\"\ndaily = \"03:00\"\nevery = \"1m\"",
                "needs exactly one of cron",
            ),
            (
                "[schedules.n]\nkind = \"a\"\ndaily = \"03:00\"\ncatch_up = \"some\"",
                "[schedules.n] catch_up: catch_up \"some\" is not one of: skip all none",
            ),
            (
                "[schedules.n]\nkind = \"a\"\nweekly = { days = [\"mon\", \"funday\"], at = \"09:30\" }",
                "[schedules.n] weekly: unknown day \"funday\"",
            ),
        ];
        for (text, expected) in cases {
            let err = Config::parse(text).expect_err(text);
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
