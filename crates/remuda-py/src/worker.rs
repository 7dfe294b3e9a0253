//! `remuda._native.Worker`: the Rust worker runtime with task bodies in Python. Claims,
//! heartbeats, fencing, timeouts, retries and batched completions stay in Rust; each claimed
//! job becomes a message that the package's dispatcher thread takes in batches (one GIL
//! acquisition per batch, not per job), runs on its pool, and answers through [`Done`].

use crate::client::Client;
use crate::convert::{block_on, error, parse, text};
use crate::options::TaskSpec;
use futures_util::future::BoxFuture;
use pyo3::prelude::*;
use remuda::{DynTask, JobContext, Jsonb, StopReason, TaskError};
use remuda_cli::config::Config;
use remuda_cli::worker_setup::{self, Overrides};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// What the dispatcher is handed: a job to run, or word that a running one must stop.
enum Message {
    Run {
        /// This run's own number: a job released and claimed again keeps its attempt.
        token: u64,
        kind: String,
        args: String,
        info: String,
        done: Done,
        steps: Steps,
    },
    /// The run with this token must stop, and why (`cancel`, `shutdown`, `timeout`, `fenced`).
    Cancel(u64, &'static str),
}

/// The answer of one job: `("ok", output JSON)`, `("err", {"code", "message", "data",
/// "retryable"})` or `("snooze", seconds)`.
type Outcome = (String, String);

/// Called once by Python with a job's outcome.
#[pyclass(frozen, module = "remuda._native")]
pub struct Done {
    tx: Mutex<Option<oneshot::Sender<Outcome>>>,
}

#[pymethods]
impl Done {
    /// Reports the outcome; later calls are ignored (a job ends once).
    fn __call__(&self, status: String, payload: String) {
        let sender = self.tx.lock().ok().and_then(|mut tx| tx.take());
        if let Some(tx) = sender {
            // the worker may have given up on the job (shutdown, fencing): nothing to tell
            let _ = tx.send((status, payload));
        }
    }
}

/// The durable steps of one run, for its Python body (`remuda.step`): read and recorded on
/// the shared runtime with the GIL released; `serve` opens the run's step socket for a body
/// that runs in a process of the pool.
#[pyclass(frozen, module = "remuda._native")]
pub struct Steps {
    steps: remuda::step::Steps,
    /// The run's step socket, once a process of the pool needs it.
    server: Mutex<Option<remuda::step::socket::StepServer>>,
}

#[pymethods]
impl Steps {
    /// The output recorded under `name` (JSON text), or `None`.
    fn recorded(&self, py: Python<'_>, name: String) -> PyResult<Option<String>> {
        let rt = crate::convert::runtime()?;
        py.allow_threads(|| rt.block_on(self.steps.recorded(&name)))
            .map_err(step_error)
    }

    /// Records `output` (JSON text) under `name`; returns what is recorded under it now.
    fn record(&self, py: Python<'_>, name: String, output: String) -> PyResult<String> {
        let rt = crate::convert::runtime()?;
        py.allow_threads(|| rt.block_on(self.steps.record(&name, output)))
            .map_err(step_error)
    }

    /// Takes the attempt's next durable sleep, until `until` (RFC 3339) at its first call:
    /// the seconds left of it, or `None` once it has passed.
    fn sleep(&self, py: Python<'_>, until: String) -> PyResult<Option<f64>> {
        let until = chrono::DateTime::parse_from_rfc3339(&until)
            .map_err(|e| error("BAD_INPUT", &format!("a sleep until {until:?}: {e}")))?
            .with_timezone(&chrono::Utc);
        let rt = crate::convert::runtime()?;
        let left = py
            .allow_threads(|| rt.block_on(self.steps.sleep_until(until)))
            .map_err(step_error)?;
        Ok(left.map(|d| d.as_secs_f64()))
    }

    /// The path of the run's step socket, opened at the first call.
    fn serve(&self) -> PyResult<String> {
        let mut server = self
            .server
            .lock()
            .map_err(|_| error("STEP_STORE", "the step socket's lock is poisoned"))?;
        if server.is_none() {
            let _entered = crate::convert::runtime()?.enter();
            let started =
                remuda::step::socket::StepServer::start(self.steps.clone()).map_err(|e| {
                    error(
                        "STEP_STORE",
                        &format!("cannot open the job's step socket: {e}"),
                    )
                })?;
            *server = Some(started);
        }
        Ok(server
            .as_ref()
            .map(|s| s.path().display().to_string())
            .unwrap_or_default())
    }
}

/// A step's error as `remuda.StepError(code, message)`.
fn step_error(e: TaskError) -> PyErr {
    Python::with_gil(|py| {
        let class = py
            .import("remuda.steps")
            .and_then(|m| m.getattr("StepError"));
        match class.and_then(|c| c.call1((e.code.as_str(), e.message.as_str()))) {
            Ok(instance) => PyErr::from_value(instance),
            Err(e) => e,
        }
    })
}

/// A kind whose body runs in Python.
struct PythonTask {
    kind: String,
    queue: mpsc::Sender<Message>,
}

impl DynTask for PythonTask {
    fn run(
        self: Arc<Self>,
        ctx: JobContext,
        args: Jsonb,
    ) -> BoxFuture<'static, Result<Jsonb, TaskError>> {
        Box::pin(async move {
            let (tx, mut rx) = oneshot::channel();
            let token = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
            let message = Message::Run {
                token,
                kind: self.kind.clone(),
                args: args.0,
                info: job_info(&ctx),
                done: Done {
                    tx: Mutex::new(Some(tx)),
                },
                steps: Steps {
                    steps: ctx.steps.clone(),
                    server: Mutex::new(None),
                },
            };
            if self.queue.send(message).is_err() {
                return Err(TaskError::new(
                    "WORKER_STOPPING",
                    "the Python dispatcher has stopped",
                ));
            }
            // the worker drops this future on a timeout or a forced stop: Python hears of it
            let mut guard = StopOnDrop {
                queue: self.queue.clone(),
                token: Some(token),
                cancel: ctx.cancel.clone(),
                stop: ctx.stop.clone(),
            };
            let outcome = tokio::select! {
                outcome = &mut rx => outcome,
                _ = ctx.cancel.cancelled() => {
                    guard.stop();
                    rx.await
                }
            };
            guard.token = None;
            match outcome {
                // the body saw the stop and returned: the worker gives the job back
                Ok((status, _)) if status == "stopped" => {
                    ctx.stop.mark_seen();
                    Err(TaskError::new(
                        "STOPPED",
                        "the task saw the stop and returned early",
                    ))
                }
                Ok((status, payload)) => answer(&status, payload),
                Err(_) => Err(TaskError::new(
                    "WORKER_STOPPING",
                    "the Python dispatcher dropped the job",
                )),
            }
        })
    }
}

/// Tells the dispatcher to stop an attempt whose future ends without its outcome (dropped by
/// the worker on a timeout or a forced stop), or when asked.
struct StopOnDrop {
    queue: mpsc::Sender<Message>,
    /// The run still going in Python; `None` once it answered or was told.
    token: Option<u64>,
    /// The attempt's stop, and why (a drop without a stop asked is its timeout).
    cancel: tokio_util::sync::CancellationToken,
    stop: remuda::StopSignal,
}

impl StopOnDrop {
    fn stop(&mut self) {
        if let Some(token) = self.token.take() {
            let reason = if self.cancel.is_cancelled() {
                self.stop.reason().unwrap_or(StopReason::Shutdown)
            } else {
                StopReason::Timeout
            };
            // a stopped dispatcher has nothing left to stop
            let _ = self.queue.send(Message::Cancel(token, reason.as_str()));
        }
    }
}

/// Numbers the runs handed to Python.
static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a Python task can know of its job, as JSON.
fn job_info(ctx: &JobContext) -> String {
    serde_json::json!({
        "id": ctx.id,
        "kind": ctx.kind,
        "queue": ctx.queue,
        "attempt": ctx.attempt,
        "max_attempts": ctx.max_attempts,
        "worker_id": &*ctx.worker_id,
        "timeout": ctx.timeout.map(|t| t.as_secs_f64()),
        "workflow": ctx.workflow,
        "traceparent": ctx.trace.as_ref().map(|t| &t.traceparent),
        "tracestate": ctx.trace.as_ref().and_then(|t| t.tracestate.as_ref()),
        "group": ctx.group,
    })
    .to_string()
}

/// The error a Python task reported.
#[derive(Deserialize)]
struct ErrorReport {
    code: String,
    message: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
    #[serde(default)]
    retryable: Option<bool>,
}

/// A Python outcome as the worker's result.
fn answer(status: &str, payload: String) -> Result<Jsonb, TaskError> {
    match status {
        "ok" => Ok(Jsonb(payload)),
        "snooze" => {
            let secs: f64 = payload.trim().parse().unwrap_or(0.0);
            Err(TaskError::snooze(
                Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO),
            ))
        }
        _ => match serde_json::from_str::<ErrorReport>(&payload) {
            Ok(report) => {
                let mut e = TaskError::new(report.code, report.message);
                e.data = report.data;
                e.retryable = report.retryable;
                Err(e)
            }
            Err(e) => Err(TaskError::new(
                "BAD_OUTCOME",
                format!("the Python task reported an error that is not JSON ({e})"),
            )),
        },
    }
}

/// The worker's settings as the package passes them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// The config file's text (`remuda.toml`: every `[worker]`, `[retention]`,
    /// `[notifications]`, `[schedules]` and `[tasks]` key of the binary), if any.
    config: Option<String>,
    /// Where it was read from (its errors name it; relative paths resolve against it).
    config_path: Option<PathBuf>,
    queues: Option<Vec<String>>,
    concurrency: Option<usize>,
    name: Option<String>,
    /// Exit once the queues have no runnable job left (batch runs, benchmarks).
    #[serde(default)]
    once: bool,
    /// With `once`: how far ahead a scheduled retry is still waited for (`30s`; `0s`: only
    /// what is due now); a minute when not given, as the binary's `--once-wait`.
    once_wait: Option<String>,
    /// Processes plain functions run in (0: threads): the concurrency when nothing else
    /// sets one, so that claimed jobs do not wait in the pool with their timeouts running.
    #[serde(default)]
    processes: usize,
    /// The binary's other overrides of `[worker]`: durations as text (`200ms`).
    heartbeat_interval: Option<String>,
    rescue_after: Option<String>,
    cancel_grace: Option<String>,
    crash_loop_limit: Option<u32>,
    /// Python tasks: kind and options.
    tasks: Vec<(String, TaskSpec)>,
    /// Schedules declared in code (`@app.schedule`): name and `[schedules.NAME]` table.
    #[serde(default)]
    schedules: Vec<(String, serde_json::Value)>,
}

/// A worker, built and not yet run. Frozen (shared, never borrowed mutably): `take` is
/// called from the dispatcher thread while `run` blocks the main one.
#[pyclass(frozen, module = "remuda._native")]
pub struct Worker {
    worker: Mutex<Option<remuda::Worker>>,
    jobs: Mutex<mpsc::Receiver<Message>>,
    stop: Arc<Notify>,
    /// Jobs run at once, as the flags and the config file settled it.
    #[pyo3(get)]
    concurrency: usize,
}

#[pymethods]
impl Worker {
    /// Builds a worker on `client` from settings (JSON; see the package's `run_worker`).
    #[new]
    fn new(py: Python<'_>, client: &Client, settings: &str) -> PyResult<Self> {
        let settings: Settings = parse("worker settings", settings)?;
        // command tasks of the config file run under a supervisor: this interpreter, isolated
        // (the task's PYTHONPATH and working directory cannot shadow the package), importing
        // remuda from where this process found it, as `… __remuda-supervise …`
        let python: PathBuf = py.import("sys")?.getattr("executable")?.extract()?;
        let package: PathBuf = py.import("remuda")?.getattr("__file__")?.extract()?;
        let root = package
            .parent()
            .and_then(|p| p.parent())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let code = format!(
            "import sys; sys.path.insert(0, {root:?}); from remuda.__main__ import main; main()"
        );
        remuda_cli::supervise::set_program(python, vec!["-I".into(), "-c".into(), code]);
        let path = settings
            .config_path
            .clone()
            .unwrap_or_else(|| PathBuf::from("remuda.toml"));
        let config = match &settings.config {
            Some(text) => {
                let base = path.parent().map(PathBuf::from).unwrap_or_default();
                Config::parse_in(text, &base).map_err(|e| {
                    error(
                        "BAD_INPUT",
                        &format!("{}: invalid worker config: {e}", path.display()),
                    )
                })?
            }
            None => Config::parse_in("", std::path::Path::new("."))
                .map_err(|e| error("BAD_INPUT", &e))?,
        };
        let overrides = Overrides {
            name: settings.name.clone(),
            concurrency: settings.concurrency.or((settings.processes > 0
                && config.worker.concurrency.is_none())
            .then_some(settings.processes)),
            heartbeat_interval: duration("heartbeat_interval", &settings.heartbeat_interval)?,
            rescue_after: duration("rescue_after", &settings.rescue_after)?,
            cancel_grace: duration("cancel_grace", &settings.cancel_grace)?,
            crash_loop_limit: settings.crash_loop_limit,
            once: settings.once,
            once_wait: duration("once_wait", &settings.once_wait)?
                .unwrap_or(Duration::from_secs(60)),
        };
        let read_from = settings.config.is_some().then_some(path.as_path());
        let mut config_settings = worker_setup::settings(&config, read_from, &overrides)
            .map_err(|e| error("BAD_INPUT", &e.to_string()))?;
        let concurrency = config_settings.concurrency;
        let (tx, rx) = mpsc::channel();
        let mut queues = Vec::new();
        let mut python = Vec::new();
        for (kind, spec) in settings.tasks {
            let options = spec.options()?;
            queues.push(options.queue.clone());
            python.push((kind, options));
        }
        config_settings.queues = match (settings.queues, &config.worker.queues) {
            (Some(q), _) => q,
            (None, Some(q)) => q.clone(),
            (None, None) => {
                queues.extend(config.tasks.values().map(|t| t.queue().to_string()));
                queues.sort();
                queues.dedup();
                queues
            }
        };
        let mut worker = worker_setup::build(client.inner().clone(), &config, config_settings)
            .map_err(|e| error("BAD_INPUT", &e.to_string()))?;
        for (name, table) in settings.schedules {
            if config.schedules.contains_key(&name) {
                return Err(error(
                    "BAD_INPUT",
                    &format!("schedule {name} is declared both in code and in the config file's [schedules.{name}]: declare it once"),
                ));
            }
            let kind = table
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or_default();
            let queue = python
                .iter()
                .find(|(k, _)| k == kind)
                .map(|(_, options)| options.queue.clone());
            let schedule = crate::schedules::from_table(&name, table, queue.as_deref())
                .map_err(|e| error("BAD_INPUT", &e))?;
            worker = worker.schedule(schedule);
        }
        for (kind, options) in python {
            let task = Arc::new(PythonTask {
                kind: kind.clone(),
                queue: tx.clone(),
            });
            worker = worker.register_dyn(kind, options, task);
        }
        Ok(Worker {
            worker: Mutex::new(Some(worker)),
            jobs: Mutex::new(rx),
            stop: Arc::new(Notify::new()),
            concurrency,
        })
    }

    /// Runs until SIGINT or SIGTERM or [`Worker::stop`], then shuts down gracefully (a
    /// second signal stops the running jobs at once): the report as JSON. Blocks, with the
    /// GIL released.
    fn run(&self, py: Python<'_>) -> PyResult<String> {
        let worker = self
            .worker
            .lock()
            .ok()
            .and_then(|mut w| w.take())
            .ok_or_else(|| error("BAD_INPUT", "this worker has already run"))?;
        let stop = self.stop.clone();
        let first = Arc::new(Notify::new());
        let shutdown = {
            let first = first.clone();
            async move {
                tokio::select! {
                    _ = remuda::worker::shutdown_signal() => {}
                    _ = stop.notified() => {}
                }
                first.notify_one();
            }
        };
        let force = async move {
            first.notified().await;
            remuda::worker::shutdown_signal().await;
        };
        let report = block_on(py, worker.run_with(shutdown, force))?;
        // the signal that stopped the worker also reached Python's handler (tokio chains to
        // it): run it here and drop its KeyboardInterrupt, so the report is returned
        if let Err(e) = py.check_signals() {
            if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                return Err(e);
            }
        }
        text(&serde_json::json!({
            "worker_id": report.worker_id,
            "completed": report.completed,
            "retried": report.retried,
            "failed": report.failed,
            "released": report.released,
            "rejected": report.rejected,
        }))
    }

    /// Asks a running worker to shut down gracefully.
    fn stop(&self) {
        self.stop.notify_one();
    }

    /// Up to `max` messages, waiting at most `timeout` seconds for the first (with the GIL
    /// released): `("run", token, kind, args, info, done, steps)` or `("cancel", token)`. `None` once the
    /// worker has stopped and every message was taken.
    fn take(&self, py: Python<'_>, max: usize, timeout: f64) -> PyResult<Option<Vec<PyObject>>> {
        let wait = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::ZERO);
        let mut guard = self
            .jobs
            .lock()
            .map_err(|_| error("DATABASE", "the job channel is poisoned"))?;
        let first = {
            let jobs: &mut mpsc::Receiver<Message> = &mut guard;
            py.allow_threads(move || jobs.recv_timeout(wait))
        };
        let jobs = &mut *guard;
        let mut taken = match first {
            Ok(m) => vec![m],
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok(Some(Vec::new())),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(None),
        };
        while taken.len() < max.max(1) {
            match jobs.try_recv() {
                Ok(m) => taken.push(m),
                Err(_) => break,
            }
        }
        taken
            .into_iter()
            .map(|m| match m {
                Message::Run {
                    token,
                    kind,
                    args,
                    info,
                    done,
                    steps,
                } => Ok((
                    "run",
                    token,
                    kind,
                    args,
                    info,
                    Py::new(py, done)?,
                    Py::new(py, steps)?,
                )
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()),
                Message::Cancel(token, reason) => Ok(("cancel", token, reason)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()),
            })
            .collect::<PyResult<Vec<_>>>()
            .map(Some)
    }
}

/// A duration flag (`200ms`, `5s`), or an error naming it.
fn duration(what: &str, text: &Option<String>) -> PyResult<Option<Duration>> {
    text.as_deref()
        .map(|t| {
            remuda::duration::parse(t).map_err(|e| error("BAD_INPUT", &format!("{what}: {e}")))
        })
        .transpose()
}

/// Runs the supervisor of a command task (`python -m remuda __remuda-supervise …`) and ends
/// the process as the command ended (its exit code, or its signal). `args` are what follows
/// `__remuda-supervise`.
#[pyfunction]
pub fn supervise(py: Python<'_>, args: Vec<String>) {
    let code = py.allow_threads(|| remuda_cli::supervise::supervise(&args));
    std::process::exit(i32::from(code))
}

/// Logs what the worker does to stderr (leadership, shutdown, what a stop waits for), as
/// `remuda worker` does; `verbose` 1 adds a line per job start and end, 2 debug lines.
#[pyfunction]
pub fn log_worker(verbose: u8) -> PyResult<()> {
    remuda_cli::log_worker_to_stderr(verbose).map_err(|e| crate::convert::error("BAD_INPUT", &e))
}
