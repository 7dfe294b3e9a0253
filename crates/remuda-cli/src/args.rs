//! Command-line syntax. Names here are a contract for scripts: keep them stable.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// remuda: a durable task queue for PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "remuda", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub db: DbArgs,
    /// More log output (-v info, -vv debug), on stderr. RUST_LOG (`warn`,
    /// `remuda=debug,info`), when set, chooses instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How log lines are written: text for people, or json (one object per line, with the
    /// job id, kind, attempt and worker as fields) for log collectors.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the database is.
#[derive(Debug, Args, Clone)]
pub struct DbArgs {
    /// PostgreSQL connection URL. Without it (or when empty): a local server, else a private
    /// cluster in ./.remuda; `-v` says which was chosen.
    #[arg(
        long,
        global = true,
        env = "DATABASE_URL",
        hide_env_values = true,
        value_name = "URL",
        required = false
    )]
    pub database_url: Option<String>,
    /// Behind a transaction-mode pooler (`pooler=transaction` in the URL): PostgreSQL's own
    /// address, for LISTEN (without it workers poll) and migrations.
    #[arg(
        long,
        global = true,
        env = "REMUDA_DIRECT_URL",
        hide_env_values = true,
        value_name = "URL",
        required = false
    )]
    pub direct_url: Option<String>,
    /// Use the private PostgreSQL cluster (in $REMUDA_HOME or ./.remuda) even if a server
    /// answers; REMUDA_EMBEDDED=1 does the same.
    #[arg(long, global = true)]
    pub embedded: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or upgrade the schema (safe to run from many processes at once).
    Migrate(JsonFlag),
    /// Enqueue one job and print its id (with --wait: its result).
    Enqueue(EnqueueArgs),
    /// Enqueue many jobs from a JSON-lines file (one args object per line).
    EnqueueBatch(EnqueueBatchArgs),
    /// Run a worker for the command, HTTP and built-in tasks of a config file.
    Worker(WorkerArgs),
    /// Show one job.
    Job(JobIdArgs),
    /// List jobs (each state in its own order), or delete many (`jobs delete`).
    Jobs(JobsArgs),
    /// Delete a job that is not running (cancel a running one first).
    Delete(JobIdArgs),
    /// Throughput and failure rate per queue over the last minutes.
    Stats(StatsArgs),
    /// Cancel a job that has not finished (a running one is stopped); a job already
    /// cancelled is left as it is (exit 0).
    Cancel(JobIdArgs),
    /// Wait for a job to finish and print its result (exit 0 ok, 1 task error, 3 timeout).
    Wait(WaitArgs),
    /// Run a finished or scheduled job again now, or (--state) every failed, cancelled or
    /// expired job of a queue or kind.
    Retry(RetryArgs),
    /// Count jobs per state in each queue.
    Queues(JsonFlag),
    /// Pause, resume, limit or show one queue (cluster-wide, effective within a second).
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Cluster-wide settings.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Add (or replace), pause, resume, trigger or delete a schedule.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// List the schedules, with their next and last runs.
    Schedules(JsonFlag),
    /// Start, show, list, pause, resume, cancel, retry or signal workflow runs.
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// List completion notifications (webhooks, emails), newest first; `retry ID` sends a
    /// dead one again.
    Notifications(NotificationsArgs),
    /// Delete finished jobs past their retention now (per state; a queue's own retention
    /// wins) and print how many.
    Prune(PruneArgs),
    /// Show who leads maintenance and each duty's last run.
    Maintenance(JsonFlag),
    /// Verification mode: record every job's state changes (`on`, `off`) and check the
    /// history against the state machine (`check`: exit 1 when something is found).
    #[command(subcommand)]
    History(HistoryCommand),
    /// List live workers.
    Workers(JsonFlag),
    /// Serve the web dashboard and the JSON API (`/api/v1`) until stopped.
    Dashboard(DashboardArgs),
    /// A live view of the queues, their throughput and the workers (q to quit).
    Top(TopArgs),
    /// Enqueue a realistic mix of jobs, run them with in-process workers, and report.
    Demo(DemoArgs),
    /// Measure enqueue and drain throughput and pickup latency in a scratch database.
    Bench(BenchArgs),
    /// Run this build under faults in private PostgreSQL clusters of its own (never the
    /// configured database) and check every transition it made: exit 0 when nothing was lost,
    /// stuck, illegal, accepted twice or decided unlike the workflow model, 1 otherwise.
    Verify(VerifyArgs),
    /// Print the connection string remuda resolves (setting up the private cluster if needed).
    DatabaseUrl,
    /// Inside a command task's job: run a command as a durable step, until it is recorded.
    /// Its stdout is recorded with the job and printed; a later attempt of the job prints the
    /// recorded stdout without running it again. At least once: a crash between the
    /// command's end and its record runs it again on the next attempt, so the command gets
    /// REMUDA_STEP_KEY (`<job id>:<name>`, the same on every attempt) to hand what it calls
    /// as an idempotency key. Exits with the command's code (a failed command is not
    /// recorded); 75 when the step ran but could not be recorded (the job is no longer this
    /// run's), 65 when the step can never be recorded (the command ran and its output is over
    /// a step's 8 MiB, or the job has its 1 000 steps and the command did not run), 69 when it
    /// did not run because the step could not be looked up (the job's worker or its database
    /// away), 2 outside a job or for a bad name.
    Step(StepArgs),
    /// Inside a command task's job: a durable sleep. Its first run records when it ends;
    /// while time is left it exits 85, which the task passes on (`remuda sleep 1h || exit
    /// $?`): the worker gives the job back without spending an attempt, and runs it again
    /// once the time has passed, when this exits 0 at once. Sleeps are told apart by their
    /// order in the attempt, so the task takes them in the same order each time. 69 when the
    /// sleep could not be looked up (the job's worker or its database away), 65 when the job
    /// has its 1 000 steps (sleeps included), 2 outside a job or for a bad duration.
    Sleep(SleepArgs),
}

/// `remuda sleep DURATION | --until TIME`.
#[derive(Debug, Args)]
pub struct SleepArgs {
    /// How long, from the sleep's first run (`30s`, `2h`, `1d`).
    #[arg(value_parser = parse_duration, required_unless_present = "until", conflicts_with = "until")]
    pub duration: Option<std::time::Duration>,
    /// Until this time instead (RFC 3339, as 2026-12-24T18:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub until: Option<chrono::DateTime<chrono::Utc>>,
}

/// `remuda step NAME -- CMD ARGS…`.
#[derive(Debug, Args)]
pub struct StepArgs {
    /// The step's name, unique within the job (1 to 200 bytes, no control characters, not
    /// starting with `sleep-`).
    pub name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `remuda notifications`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct NotificationsArgs {
    /// What to do instead of listing.
    #[command(subcommand)]
    pub action: Option<NotificationsAction>,
    /// Only notifications in this state: pending, sent or dead.
    #[arg(long, value_parser = parse_notification_state)]
    pub state: Option<remuda::notify::NotificationState>,
    /// Only the notifications of this job.
    #[arg(long, value_name = "ID")]
    pub job: Option<i64>,
    /// Only those of this workflow run (its own and its jobs').
    #[arg(long, value_name = "ID")]
    pub workflow: Option<i64>,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    pub limit: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda notifications retry`.
#[derive(Debug, Subcommand)]
pub enum NotificationsAction {
    /// Make a dead notification due now, with its attempts anew.
    Retry {
        /// The notification's id.
        id: i64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn parse_notification_state(text: &str) -> Result<remuda::notify::NotificationState, String> {
    text.parse().map_err(|e: remuda::Error| e.to_string())
}

/// Just `--json`.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options every enqueue shares.
#[derive(Debug, Args)]
pub struct JobOptions {
    /// Queue (default: the kind's queue in --config, else "default").
    #[arg(long, short)]
    pub queue: Option<String>,
    /// W3C trace context the job continues (00-<trace id>-<span id>-<flags>): its attempts run
    /// as children of it. Without it, TRACEPARENT (and TRACESTATE) from the environment, so a
    /// task that enqueues continues its own trace (one that is not valid there is ignored).
    #[arg(long)]
    pub traceparent: Option<String>,
    /// With --traceparent: its vendor entries, passed on unchanged.
    #[arg(long, requires = "traceparent")]
    pub tracestate: Option<String>,
    /// Priority; lower runs first (default 0).
    #[arg(long, short, allow_negative_numbers = true)]
    pub priority: Option<i32>,
    /// Start no earlier than this long from now (500ms, 10s, 5m, 1h).
    #[arg(long, value_parser = parse_duration, conflicts_with = "run_at", allow_hyphen_values = true)]
    pub delay: Option<std::time::Duration>,
    /// Start no earlier than this time (RFC 3339, e.g. 2026-12-01T09:00:00Z).
    #[arg(long, value_parser = parse_time)]
    pub run_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Attempts allowed (default: the kind's in the worker's config, else 25).
    #[arg(long, allow_negative_numbers = true)]
    pub max_attempts: Option<i32>,
    /// Timeout of each attempt (default: the kind's in the worker's config).
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Deadline to start: the job expires (state expired, error DEADLINE_EXCEEDED) unless it
    /// starts before this time (RFC 3339).
    #[arg(long, value_parser = parse_time, conflicts_with = "deadline_in")]
    pub deadline: Option<chrono::DateTime<chrono::Utc>>,
    /// Deadline to start, from now (10m, 1h).
    #[arg(long, value_parser = parse_duration, alias = "expires-in", allow_hyphen_values = true)]
    pub deadline_in: Option<std::time::Duration>,
    /// Only the worker with this name ([worker] name) may run the job.
    #[arg(long)]
    pub target_worker: Option<String>,
    /// Only workers with all these capabilities ([worker] capabilities) may run the job.
    #[arg(long, value_delimiter = ',')]
    pub requires: Option<Vec<String>>,
    /// Concurrency key (e.g. customer:42): a queue's --key-limit caps running jobs per key.
    #[arg(long)]
    pub concurrency_key: Option<String>,
    /// Group (a tenant, an account): a queue with --fairness group shares its starts between
    /// groups by their weights (remuda queue group). From REMUDA_JOB_GROUP when not given (a
    /// command task's job's group).
    #[arg(long)]
    pub group: Option<String>,
    /// Unique key: while a job of the same kind with this key is scheduled, available,
    /// running or completed, enqueueing another prints that job's id instead (exit 0; --json
    /// adds "duplicate": true).
    #[arg(long)]
    pub unique_key: Option<String>,
    /// With --unique-key: the key holds only within this period (aligned to the Unix epoch):
    /// 1h means at most one such job per clock hour.
    #[arg(long, value_parser = parse_duration, requires = "unique_key")]
    pub unique_period: Option<std::time::Duration>,
    /// With --unique-key: the states in which a job holds its key (comma-separated; must
    /// include scheduled, available and running; default adds completed).
    #[arg(long, value_delimiter = ',', requires = "unique_key")]
    pub unique_states: Option<Vec<remuda::JobState>>,
    /// With --unique-key: the key is unique per queue too (default: per kind, any queue).
    #[arg(long, requires = "unique_key")]
    pub unique_per_queue: bool,
    /// With --unique-key: debounce. While a job of this kind and key waits, this enqueue
    /// replaces its args and moves its start to this long from now, and prints its id
    /// (--json: "debounced": true): one run once the enqueues stop.
    #[arg(long, value_parser = parse_duration, requires = "unique_key", conflicts_with_all = ["throttle", "batch_key", "delay", "run_at", "unique_states", "unique_period"])]
    pub debounce: Option<std::time::Duration>,
    /// With --debounce: how long a stream of enqueues may postpone the job, from the first.
    #[arg(long, value_parser = parse_duration, requires = "debounce")]
    pub debounce_max: Option<std::time::Duration>,
    /// With --unique-key: at most one job of this kind and key starts per this long; an
    /// enqueue within the window joins the job waiting for its end, which keeps its args
    /// (--json: "throttled": true).
    #[arg(long, value_parser = parse_duration, requires = "unique_key", conflicts_with_all = ["batch_key", "delay", "run_at", "unique_states", "unique_period"])]
    pub throttle: Option<std::time::Duration>,
    /// With --throttle: the waiting job takes the latest enqueue's args.
    #[arg(long, requires = "throttle")]
    pub throttle_latest: bool,
    /// Add these args to the batch of this key: one job whose args are the list of its
    /// enqueues' args, run when the kind's batch_size have joined or its batch_wait has passed
    /// since the first (from --config, or --batch-size and --batch-wait); prints the batch's
    /// id (--json: "batched": true when it joined one).
    #[arg(long, conflicts_with_all = ["unique_key", "delay", "run_at"])]
    pub batch_key: Option<String>,
    /// With --batch-key: the batch runs when this many have joined (default: the kind's
    /// batch_size in --config).
    #[arg(long, requires = "batch_key")]
    pub batch_size: Option<i32>,
    /// With --batch-key: or when this long has passed since the first (default: the kind's
    /// batch_wait in --config).
    #[arg(long, value_parser = parse_duration, requires = "batch_key")]
    pub batch_wait: Option<std::time::Duration>,
    /// Largest args accepted, in bytes (default 1 MiB; workers have their own
    /// [worker] max_payload_bytes for results).
    #[arg(long)]
    pub max_payload_bytes: Option<usize>,
    /// A worker config file to take the kind's defaults (queue, attempts, timeout) from.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// POST a signed webhook to this http(s) URL when the job ends (instead of the kind's
    /// notify defaults).
    #[arg(long, value_name = "URL")]
    pub notify_webhook: Option<String>,
    /// Email this address when the job ends.
    #[arg(long, value_name = "ADDR")]
    pub notify_email: Option<String>,
    /// The outcomes that notify: comma-separated completed, failed, cancelled, expired, or
    /// final for all four (the default).
    #[arg(long, value_name = "LIST")]
    pub notify_on: Option<String>,
}

/// `remuda enqueue`.
#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// Task kind.
    pub kind: String,
    /// Arguments as JSON (default {}); @FILE reads them from a file, - from stdin.
    #[arg(long, short, allow_hyphen_values = true)]
    pub args: Option<String>,
    #[command(flatten)]
    pub options: JobOptions,
    /// Wait for the result: exit 0 on ok, 1 on a task error, 3 on timeout.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, value_parser = parse_duration, default_value = "30s", requires = "wait")]
    pub wait_timeout: std::time::Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda enqueue-batch`.
#[derive(Debug, Args)]
pub struct EnqueueBatchArgs {
    /// Task kind of every job.
    pub kind: String,
    /// JSON-lines file with one args value per line ("-" for stdin).
    #[arg(long, short)]
    pub file: PathBuf,
    #[command(flatten)]
    pub options: JobOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The worker config file (TOML).
    #[arg(long, short, default_value = "remuda.toml")]
    pub config: PathBuf,
    /// Override [worker].concurrency.
    #[arg(long, allow_negative_numbers = true)]
    pub concurrency: Option<usize>,
    /// Name shown in `remuda workers` (default: [worker].name, else the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Run until the queues have no runnable job left, then exit (for batch runs): retries
    /// due within --once-wait are waited for; exit 1 if any job failed for good.
    #[arg(long)]
    pub once: bool,
    /// With --once: how far ahead a scheduled retry is still waited for.
    #[arg(long, value_parser = parse_duration, default_value = "60s", requires = "once")]
    pub once_wait: std::time::Duration,
    /// Override [worker].heartbeat_interval.
    #[arg(long, value_parser = parse_duration)]
    pub heartbeat_interval: Option<std::time::Duration>,
    /// Override [worker].rescue_after.
    #[arg(long, value_parser = parse_duration)]
    pub rescue_after: Option<std::time::Duration>,
    /// Override [worker].crash_loop_limit.
    #[arg(long, allow_negative_numbers = true)]
    pub crash_loop_limit: Option<u32>,
    /// Override [worker].cancel_grace.
    #[arg(long, value_parser = parse_duration)]
    pub cancel_grace: Option<std::time::Duration>,
    /// Serve Prometheus metrics (counters, histograms and gauges of this worker) at
    /// http://ADDR/metrics, as 127.0.0.1:9187.
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind: Option<std::net::SocketAddr>,
}

/// `remuda wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The job's id.
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
    /// How long to wait.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: std::time::Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A job id.
#[derive(Debug, Args)]
pub struct JobIdArgs {
    /// The job's id.
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda queue …`.
/// `remuda history …`
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Record every state change of every job of this database in remuda.history.
    On,
    /// Stop recording (what was recorded stays).
    Off,
    /// Check the recorded history and the tables: illegal transitions, outcomes accepted
    /// twice, lost jobs, stuck jobs.
    Check(HistoryCheckArgs),
}

/// `remuda history check`
#[derive(Debug, Args)]
pub struct HistoryCheckArgs {
    /// How long past its own rescue_after a silent worker's running job may wait for its
    /// rescue before it counts as stuck.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub slack: std::time::Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Stop claiming from a queue cluster-wide (it keeps accepting jobs; running jobs finish).
    Pause(QueueName),
    /// Claim from a paused queue again.
    Resume(QueueName),
    /// Set a queue's limits (`none` clears one).
    Set(QueueSetArgs),
    /// Show a queue's settings and job counts.
    Show(QueueName),
    /// Set a group's weight in a queue with fair share on (--fairness group).
    Group(QueueGroupArgs),
    /// List a queue's groups: weight, running and waiting jobs, share of the starts over the
    /// last minute.
    Groups(QueueName),
}

/// `remuda schedule ...`.
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule, or replace the one of that name (an unchanged pattern keeps its
    /// next run).
    Add(Box<ScheduleAddArgs>),
    /// Stop firing a schedule until it is resumed.
    Pause(ScheduleName),
    /// Fire a paused schedule again, from its next time (missed times are not caught up).
    Resume(ScheduleName),
    /// Fire a schedule now, once, outside its pattern (its next run stays).
    Trigger(ScheduleName),
    /// Delete a schedule (the jobs it fired stay).
    Delete(ScheduleName),
}

/// `remuda workflow ...`.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Start a run of a spec file (TOML or JSON) and print its id (with --wait: its output;
    /// exit 1 if the run failed, 3 on wait timeout).
    Start(WorkflowStartArgs),
    /// Check a spec file and print its compiled definition (JSON): what
    /// `SELECT remuda.start_workflow(definition, args, key)` starts from any language.
    Compile(WorkflowCompileArgs),
    /// Show a run and its nodes.
    Status(WorkflowId),
    /// List runs, newest first, with their nodes' counts per state.
    List(WorkflowListArgs),
    /// Pause a run (and its sub-workflows): no node starts; running ones finish.
    Pause(WorkflowId),
    /// Resume a paused run; a failure that paused it (on_error = "pause") runs again.
    Resume(WorkflowId),
    /// Cancel a run: its running jobs are stopped, its pending nodes cancelled.
    Cancel(WorkflowId),
    /// Run a failed or cancelled run again: only what did not complete runs again.
    Retry(WorkflowId),
    /// Send a run a signal: its signal nodes of that name complete with the data.
    Signal(WorkflowSignalArgs),
}

/// `remuda workflow compile`.
#[derive(Debug, Args)]
pub struct WorkflowCompileArgs {
    /// The spec file (.toml or .json).
    pub spec: PathBuf,
}

/// `remuda workflow start`.
#[derive(Debug, Args)]
pub struct WorkflowStartArgs {
    /// The spec file (.toml or .json).
    pub spec: PathBuf,
    /// The run's input, as JSON: what `args_from = { x = "$input" }` passes.
    #[arg(long)]
    pub args: Option<String>,
    /// Idempotency key: a second start with the same key and definition returns the first
    /// run; with another definition it is refused (exit 2).
    #[arg(long)]
    pub key: Option<String>,
    /// W3C trace context the run continues (its node jobs take it); from TRACEPARENT when
    /// not given (ignored there when not valid).
    #[arg(long)]
    pub traceparent: Option<String>,
    /// With --traceparent: its vendor entries.
    #[arg(long, requires = "traceparent")]
    pub tracestate: Option<String>,
    /// Group (a tenant, an account) the run works for: its node jobs take it, so a queue with
    /// --fairness group shares its starts by it; from REMUDA_JOB_GROUP when not given (a
    /// command task's job's group).
    #[arg(long)]
    pub group: Option<String>,
    /// Wait for the run to end and print its output.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: how long (default 5m).
    #[arg(long, value_parser = parse_duration, default_value = "5m", requires = "wait")]
    pub wait_timeout: std::time::Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A workflow run's id.
#[derive(Debug, Args)]
pub struct WorkflowId {
    /// The run's id.
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda workflow list`.
#[derive(Debug, Args)]
pub struct WorkflowListArgs {
    /// Only runs in this state (running, paused, completed, failed, cancelled).
    #[arg(long)]
    pub state: Option<String>,
    /// Only runs of this definition.
    #[arg(long)]
    pub name: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    pub limit: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda workflow signal`.
#[derive(Debug, Args)]
pub struct WorkflowSignalArgs {
    /// The run's id.
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
    /// The signal's name.
    pub name: String,
    /// Its payload, as JSON (the signal node's result).
    #[arg(long)]
    pub data: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A schedule name.
#[derive(Debug, Args)]
pub struct ScheduleName {
    /// The schedule.
    pub name: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda schedule add`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["cron", "every", "daily", "pattern"])))]
pub struct ScheduleAddArgs {
    /// The schedule's name (an existing one is replaced).
    pub name: String,
    /// Kind of the jobs it fires.
    #[arg(long, short)]
    pub kind: String,
    /// Their args, as JSON (default {}).
    #[arg(long, short)]
    pub args: Option<String>,
    /// Their queue (default "default").
    #[arg(long, short)]
    pub queue: Option<String>,
    /// Their priority; lower runs first (default 0).
    #[arg(long, short, allow_negative_numbers = true)]
    pub priority: Option<i32>,
    /// Their attempts (default: the worker's for the kind).
    #[arg(long, allow_negative_numbers = true)]
    pub max_attempts: Option<i32>,
    /// Their group (a tenant, an account): a queue with --fairness group shares its starts by
    /// it.
    #[arg(long)]
    pub group: Option<String>,
    /// A 5-field cron expression (*/5 * * * *, 0 9 * * MON-FRI) or an alias (@daily).
    #[arg(long)]
    pub cron: Option<String>,
    /// An interval of elapsed time: 30s, 5m, 2h, 1d (at its multiples since the epoch).
    #[arg(long)]
    pub every: Option<String>,
    /// A time of day, HH:MM.
    #[arg(long)]
    pub daily: Option<String>,
    /// Any pattern in its text form: "hourly :15", "weekly mon,fri 09:30",
    /// "monthly 1 06:00" (and the forms above: "every 30s", "daily 03:00", cron).
    #[arg(long)]
    pub pattern: Option<String>,
    /// IANA time zone of the clock (default UTC): Europe/Berlin, America/New_York.
    #[arg(long)]
    pub tz: Option<String>,
    /// Missed times after downtime: skip (fire the latest once), all, or none.
    #[arg(long, value_parser = ["skip", "all", "none"])]
    pub catch_up: Option<String>,
    /// With --catch-up all: most missed times fired at once (default 100).
    #[arg(long)]
    pub catch_up_limit: Option<u32>,
    /// While the last job fired is waiting or running: allow another, or skip the fire.
    #[arg(long, value_parser = ["allow", "skip"])]
    pub overlap: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A queue name.
#[derive(Debug, Args)]
pub struct QueueName {
    /// The queue.
    pub queue: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda queue group`.
#[derive(Debug, Args)]
pub struct QueueGroupArgs {
    /// The queue.
    pub queue: String,
    /// The group (as given to enqueue --group).
    pub group: String,
    /// Its weight: relative to the others' (default 1); a group of weight 3 starts three
    /// jobs for each one of a group of weight 1 while both have jobs waiting.
    // a negative number is read as one, so that its range is what is refused
    #[arg(long, allow_negative_numbers = true)]
    pub weight: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda queue set`.
#[derive(Debug, Args)]
pub struct QueueSetArgs {
    /// The queue.
    pub queue: String,
    /// Most of its jobs running at once, cluster-wide (`none`: no limit).
    #[arg(long, value_parser = parse_limit, allow_hyphen_values = true)]
    pub max_running: Option<Limit>,
    /// Most running jobs per concurrency key, cluster-wide.
    #[arg(long, value_parser = parse_limit, allow_hyphen_values = true)]
    pub key_limit: Option<Limit>,
    /// Most starts per period, shared by all workers: N/PERIOD, e.g. 100/1s.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Option<Rate>,
    /// What --rate counts: starts of the whole queue (default), of each kind, or of each
    /// concurrency key.
    #[arg(long, requires = "rate")]
    pub rate_per: Option<remuda::RatePer>,
    /// Most starts at once under --rate (the bucket's size; default: its N): 1 spreads the
    /// starts evenly over the period, as Inngest's throttle does.
    #[arg(long, requires = "rate", value_parser = clap::value_parser!(i32).range(1..))]
    pub rate_burst: Option<i32>,
    /// Most jobs waiting; an enqueue beyond it is refused (exit 2).
    #[arg(long, value_parser = parse_limit, allow_hyphen_values = true)]
    pub max_depth: Option<Limit>,
    /// How starts are shared: `group` shares them between the jobs' groups (--group) by
    /// weight, whatever their number of jobs or keys; `none` (default) takes jobs in priority
    /// order.
    #[arg(long)]
    pub fairness: Option<remuda::Fairness>,
    /// Keep its completed jobs this long after they finish (1h, 7d), `never` to keep them,
    /// or `default` for the workers' [retention].
    #[arg(long, value_parser = parse_retain, allow_hyphen_values = true)]
    pub retain_completed: Option<Retain>,
    /// The same for failed jobs.
    #[arg(long, value_parser = parse_retain, allow_hyphen_values = true)]
    pub retain_failed: Option<Retain>,
    /// The same for cancelled jobs.
    #[arg(long, value_parser = parse_retain, allow_hyphen_values = true)]
    pub retain_cancelled: Option<Retain>,
    /// The same for expired jobs.
    #[arg(long, value_parser = parse_retain, allow_hyphen_values = true)]
    pub retain_expired: Option<Retain>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A queue's retention for one state: its own, or (`None`) the workers'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retain(pub Option<remuda::maintenance::Keep>);

fn parse_retain(text: &str) -> Result<Retain, String> {
    if text == "default" {
        return Ok(Retain(None));
    }
    text.parse()
        .map(|keep| Retain(Some(keep)))
        .map_err(|e: remuda::Error| format!("{e}, or default for the workers' [retention]"))
}

/// `remuda prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Delete completed jobs finished longer ago than this (default 1d; `never` keeps them).
    #[arg(long, value_parser = parse_keep)]
    pub completed: Option<remuda::maintenance::Keep>,
    /// Failed jobs (default 30d).
    #[arg(long, value_parser = parse_keep)]
    pub failed: Option<remuda::maintenance::Keep>,
    /// Cancelled jobs (default 7d).
    #[arg(long, value_parser = parse_keep)]
    pub cancelled: Option<remuda::maintenance::Keep>,
    /// Expired jobs (default 7d).
    #[arg(long, value_parser = parse_keep)]
    pub expired: Option<remuda::maintenance::Keep>,
    /// Count what would be deleted, and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_keep(text: &str) -> Result<remuda::maintenance::Keep, String> {
    text.parse().map_err(|e: remuda::Error| e.to_string())
}

/// `remuda cluster …`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Set the cap on jobs running at once across every queue.
    Set(ClusterSetArgs),
    /// Show the cluster-wide settings.
    Show(JsonFlag),
}

/// `remuda cluster set`.
#[derive(Debug, Args)]
pub struct ClusterSetArgs {
    /// Most jobs running at once across every queue (`none`: no cap).
    #[arg(long, value_parser = parse_limit, allow_hyphen_values = true)]
    pub max_running: Limit,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A limit, or `none` to clear it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<i32>);

/// A rate (N per period), or `none` to clear it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate(pub Option<(i32, std::time::Duration)>);

fn parse_limit(text: &str) -> Result<Limit, String> {
    if text == "none" {
        return Ok(Limit(None));
    }
    match text.parse::<i32>() {
        Ok(n) if n >= 0 => Ok(Limit(Some(n))),
        _ => Err(format!(
            "{text:?} is not a limit: give a whole number from 0 to {}, or none",
            i32::MAX
        )),
    }
}

fn parse_rate(text: &str) -> Result<Rate, String> {
    if text == "none" {
        return Ok(Rate(None));
    }
    let bad = || format!("{text:?} is not a rate: write N/PERIOD, e.g. 100/1s or 5/1m, or none");
    let (n, period) = text.split_once('/').ok_or_else(bad)?;
    let n: i32 = n.trim().parse().map_err(|_| bad())?;
    let period = remuda::duration::parse(period.trim()).map_err(|e| format!("{}: {e}", bad()))?;
    if n < 1 || period.is_zero() {
        return Err(bad());
    }
    Ok(Rate(Some((n, period))))
}

/// `remuda retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The job's id.
    #[arg(
        required_unless_present = "state",
        conflicts_with = "state",
        allow_negative_numbers = true
    )]
    pub id: Option<i64>,
    /// Re-run every job in this state instead (failed, cancelled or expired): a redrive.
    #[arg(long)]
    pub state: Option<String>,
    /// With --state: only jobs of this queue.
    #[arg(long, requires = "state")]
    pub queue: Option<String>,
    /// With --state: only jobs of this kind.
    #[arg(long, requires = "state")]
    pub kind: Option<String>,
    /// Run a completed job again too (its result is dropped).
    #[arg(long, conflicts_with = "state")]
    pub force: bool,
    /// Drop the steps the job recorded: it runs again from its first step (by default a
    /// retried job resumes after its last recorded step).
    #[arg(long, conflicts_with = "state")]
    pub fresh: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda jobs`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct JobsArgs {
    /// What to do instead of listing.
    #[command(subcommand)]
    pub action: Option<JobsAction>,
    /// Only jobs in this state (scheduled, available, running, completed, failed, cancelled, expired).
    #[arg(long, short)]
    pub state: Option<remuda::JobState>,
    /// Only jobs in this queue.
    #[arg(long, short)]
    pub queue: Option<String>,
    /// Only jobs of this kind.
    #[arg(long, short)]
    pub kind: Option<String>,
    /// Only jobs run (or running) by this worker id (as `remuda workers` lists them).
    #[arg(long, short)]
    pub worker: Option<String>,
    /// Only jobs whose args contain this JSON, as '{"user": 42}'.
    #[arg(long)]
    pub args: Option<String>,
    /// At most this many (1 to 1000).
    #[arg(long, short, default_value_t = 20)]
    pub limit: i64,
    /// Only the jobs of this workflow run (as `remuda workflow list` shows it).
    #[arg(long, value_name = "ID")]
    pub workflow: Option<i64>,
    /// Only the jobs of --kind that hold this key: waiting under it as their unique,
    /// debounce, throttle or batch key, or a unique job running or finished in one of its
    /// unique states (newest first, one list: no --after).
    #[arg(long, value_name = "KEY", requires = "kind", conflicts_with_all = ["after", "workflow", "worker", "args"])]
    pub key: Option<String>,
    /// The page after this cursor: the one printed under a full page, or the `cursor` of a
    /// job of `--json` (for the same filters).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
    /// Print JSON instead of text: an array of jobs, each with the `cursor` that continues
    /// the list after it.
    #[arg(long)]
    pub json: bool,
}

/// `remuda top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// How often to redraw.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: std::time::Duration,
    /// Print one frame and exit.
    #[arg(long)]
    pub once: bool,
}

/// `remuda dashboard`.
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Address to listen on. Anything but a loopback address needs a token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: std::net::SocketAddr,
    /// The token that opens the dashboard and the API (at least 16 characters); without one,
    /// a random token is made up and printed (on a loopback address only).
    #[arg(long, env = "REMUDA_DASHBOARD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The name the audit log records for changes made with --token.
    #[arg(long, default_value = "admin")]
    pub token_name: String,
    /// Let everybody who can reach the address in, without a token: for local use only
    /// (refused on anything but a loopback address).
    #[arg(long, conflicts_with = "token")]
    pub no_auth: bool,
    /// Refuse every change (retry, cancel, delete, enqueue, pause, …) on the server.
    #[arg(long)]
    pub read_only: bool,
    /// A host name the dashboard answers to, besides IP addresses and loopback names (the
    /// name people type, behind a proxy); `.example.com` allows every name under it.
    /// Requests for other names are refused, so that a page whose name was rebound to this
    /// address cannot read it. Repeatable.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
}

/// `remuda jobs delete`.
#[derive(Debug, Subcommand)]
pub enum JobsAction {
    /// Delete every job in a state (not running) of a queue, finished (or, when not
    /// finished, enqueued) longer ago than --older-than.
    Delete(JobsDeleteArgs),
}

/// `remuda jobs delete`.
#[derive(Debug, Args)]
pub struct JobsDeleteArgs {
    /// The state of the jobs to delete (scheduled, available, completed, failed, cancelled,
    /// expired).
    #[arg(long, short)]
    pub state: remuda::JobState,
    /// Only jobs of this queue.
    #[arg(long, short)]
    pub queue: Option<String>,
    /// Only jobs of this kind.
    #[arg(long, short)]
    pub kind: Option<String>,
    /// Only jobs finished (or enqueued, when not finished) longer ago than this (`7d`, `12h`).
    #[arg(long, value_parser = parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// Count what would be deleted, and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The window: jobs finished within this long before now (`5m`, `1h`).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub window: std::time::Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `remuda demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of quick jobs.
    #[arg(long, default_value_t = 20_000)]
    pub jobs: usize,
    /// Workers to run in this process (each with its own connection pool).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Concurrency of each worker.
    #[arg(long, default_value_t = 1000)]
    pub concurrency: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `remuda verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// How long jobs are fed and faults injected (then the work drains and is checked).
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub duration: std::time::Duration,
    /// Worker processes.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// Run a primary with a synchronous standby and fail over to it during the run (the
    /// workers follow through a multi-host URL with target_session_attrs=read-write).
    #[arg(long)]
    pub failover: bool,
    /// The seed of the random choices (default: a new one, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Keep the clusters' directory (data, server and worker logs) at the end.
    #[arg(long)]
    pub keep: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `remuda bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Jobs to enqueue in bulk and then drain.
    #[arg(long, short = 'n', default_value_t = 100_000)]
    pub jobs: usize,
    /// Workers to run in this process, each with its own connection pool.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Concurrency of each worker.
    #[arg(long, default_value_t = 2000)]
    pub concurrency: usize,
    /// Most jobs claimed by one statement.
    #[arg(long, default_value_t = 2000)]
    pub claim_batch: usize,
    /// Bytes of padding added to each job's args (besides {"i": n}).
    #[arg(long, default_value_t = 0)]
    pub payload_bytes: usize,
    /// Number of queues the jobs are spread over.
    #[arg(long, default_value_t = 1)]
    pub queues: usize,
    /// First load this many scheduled-far-in-the-future and as many completed jobs.
    #[arg(long, default_value_t = 0)]
    pub backlog: usize,
    /// Jobs sent one at a time, 20 ms apart, to idle workers for the pickup latency phase.
    #[arg(long, default_value_t = 200)]
    pub pickup: usize,
    /// Instead: a steady mix of enqueues and drains for this long (30m), with retention
    /// shortened to --retain; prints the table's rows and sizes at each tenth of the run.
    #[arg(long, value_parser = parse_duration, conflicts_with = "schedules")]
    pub churn: Option<std::time::Duration>,
    /// With --churn: how long finished jobs are kept.
    #[arg(long, value_parser = parse_duration, default_value = "1m", requires = "churn")]
    pub retain: std::time::Duration,
    /// With --churn: jobs enqueued per second (N, or N/PERIOD); with --limit rate: the
    /// queue's rate limit, N starts per PERIOD (5000/1s).
    #[arg(long, value_parser = parse_bench_rate, default_value = "5000/1s")]
    pub rate: (i32, std::time::Duration),
    /// Instead: this many schedules firing every minute for --duration; prints the fires'
    /// lateness, duplicates and missing fires.
    #[arg(long)]
    pub schedules: Option<usize>,
    /// With --schedules: how long to run (5m); with --limit rate: how long to measure the
    /// achieved rate (30s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Instead: one workflow run of this shape (wide: fan-out then fan-in; chain: a line;
    /// map: one map node) beside a plain drain of as many jobs.
    #[arg(long, value_enum, conflicts_with_all = ["churn", "schedules"])]
    pub workflow: Option<crate::commands::WorkflowShape>,
    /// With --workflow: how many nodes (map: elements).
    #[arg(long, default_value_t = 1000, requires = "workflow")]
    pub nodes: usize,
    /// Instead: this many no-op jobs each with a webhook to a receiver the bench starts,
    /// beside a plain drain of as many jobs: deliveries/s and final state → delivery latency.
    #[arg(long, value_name = "N", conflicts_with_all = ["churn", "schedules", "workflow"])]
    pub notify: Option<usize>,
    /// Instead: load 10 × N finished and N waiting jobs, then time every dashboard page and
    /// API list 50 times (p50, p95) while a worker drains beside it.
    #[arg(long, conflicts_with_all = ["churn", "schedules", "workflow", "notify"])]
    pub dashboard: bool,
    /// Instead: a flow-controlled queue (key: a limit per concurrency key; global: a cap on
    /// the queue's running jobs; rate: a rate limit; fair: fair share between --groups
    /// groups weighted 1, 2, 3 in turn) drained beside a plain queue.
    #[arg(long, value_enum, conflicts_with_all = ["churn", "schedules", "workflow", "notify", "dashboard"])]
    pub limit: Option<crate::commands::Limit>,
    /// With --limit key: how many concurrency keys the jobs are spread over.
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// With --limit key: running jobs allowed per key.
    #[arg(long, default_value_t = 2)]
    pub key_limit: i32,
    /// With --limit fair: how many groups the jobs are spread over (in proportion to their
    /// weights, so all of them have jobs waiting until the end).
    #[arg(long, default_value_t = 1000)]
    pub groups: usize,
    /// With --limit global: the cap on the queue's running jobs.
    #[arg(long, default_value_t = 500)]
    pub max_running: i32,
    /// Instead: N jobs of a kind no worker runs at the head of the queue, and a drain of the
    /// others behind them beside a plain drain.
    #[arg(long, value_name = "N", conflicts_with_all = ["churn", "schedules", "workflow", "notify", "dashboard", "limit"])]
    pub unhandled: Option<usize>,
    /// With --workers: run each worker as a process of its own (`remuda worker`) and compare
    /// with one such process on the same queue.
    #[arg(long, conflicts_with_all = ["churn", "schedules", "workflow", "notify", "dashboard", "limit", "unhandled"])]
    pub processes: bool,
    /// Jobs (--jobs) that each record this many durable steps, beside a plain drain of as
    /// many jobs in the same run: steps/s and the ratio to the plain drain.
    #[arg(long, value_name = "K", conflicts_with_all = ["churn", "schedules", "workflow", "notify", "dashboard", "limit", "unhandled", "processes"])]
    pub steps: Option<usize>,
    /// Keep the scratch database (<database>_bench) afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `N` (per second) or `N/PERIOD`.
fn parse_bench_rate(text: &str) -> Result<(i32, std::time::Duration), String> {
    if !text.contains('/') {
        return match text.trim().parse::<i32>() {
            Ok(n) if n >= 1 => Ok((n, std::time::Duration::from_secs(1))),
            _ => Err(format!(
                "{text:?} is not a rate: write N or N/PERIOD, e.g. 5000 or 5000/1s"
            )),
        };
    }
    match parse_rate(text)? {
        Rate(Some(rate)) => Ok(rate),
        Rate(None) => Err("the bench needs a rate, not none".into()),
    }
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    remuda::duration::parse(text)
}

fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
        .map(|t| t.and_utc())
        .map_err(|_| format!("invalid time {text:?}: use RFC 3339, like 2026-12-01T09:00:00Z"))
}
