//! `remuda._native.Client`: enqueue, wait and workflows through the Rust client. Every call
//! releases the GIL while it waits on the database.

use crate::convert::{block_on, error, from_remuda, parse, text};
use crate::options::{seconds, SendOptions};
use pyo3::prelude::*;
use remuda::workflow::WorkflowSpec;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What [`Client::jobs`] filters on.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsFilter {
    state: Option<String>,
    queue: Option<String>,
    kind: Option<String>,
    args: Option<Value>,
    limit: Option<i64>,
    after: Option<String>,
}

/// A connection pool and the client over it: cheap to share between threads.
#[pyclass(frozen, module = "remuda._native")]
pub struct Client {
    inner: remuda::Client,
}

#[pymethods]
impl Client {
    /// Connects to `database_url` (with `$REMUDA_DIRECT_URL` for LISTEN and migrations when
    /// the URL is a pooler's) and checks the schema; with `migrate`, brings the schema up to
    /// date first (safe with many processes at once).
    #[new]
    #[pyo3(signature = (database_url, migrate = true))]
    fn new(py: Python<'_>, database_url: &str, migrate: bool) -> PyResult<Self> {
        let inner = block_on(py, async {
            let mut db = remuda::Database::new(database_url, remuda::db::DEFAULT_POOL_SIZE)?;
            // behind a pooler in transaction mode, LISTEN and migrations need PostgreSQL itself
            if let Some(direct) = std::env::var("REMUDA_DIRECT_URL")
                .ok()
                .filter(|u| !u.is_empty())
            {
                db = db.with_direct(&direct)?;
            }
            if migrate {
                remuda::migrate::run(&db).await?;
            }
            let client = remuda::Client::new(db);
            client.check().await?;
            Ok(client)
        })?;
        Ok(Client { inner })
    }

    /// Enqueues one job: `(id, duplicate, joined)` (joined: folded into a debounced,
    /// throttled or batched job that was waiting).
    fn send(
        &self,
        py: Python<'_>,
        kind: &str,
        args: String,
        options: &str,
    ) -> PyResult<(i64, bool, bool)> {
        let job = parse::<SendOptions>("send options", options)?.job(kind, args)?;
        let inserted = block_on(py, self.inner.insert_each(std::slice::from_ref(&job)))?;
        let first = inserted
            .first()
            .ok_or_else(|| error("DATABASE", "the insert returned no row"))?;
        Ok((first.id, first.duplicate, first.joined))
    }

    /// Enqueues many jobs of one kind in one transaction, the fastest way (COPY): how many
    /// were inserted.
    fn send_bulk(
        &self,
        py: Python<'_>,
        kind: &str,
        args: Vec<String>,
        options: &str,
    ) -> PyResult<u64> {
        // the options are the same for every job: parsed once, the job cloned with its args
        let template = parse::<SendOptions>("send options", options)?.job(kind, String::new())?;
        let jobs: Vec<_> = args
            .into_iter()
            .map(|a| {
                let mut job = template.clone();
                job.args = remuda::Jsonb(a);
                job
            })
            .collect();
        block_on(py, self.inner.insert_bulk(&jobs))
    }

    /// Waits for a job to reach a final state: the job as JSON, or `None` on timeout.
    fn wait(&self, py: Python<'_>, id: i64, timeout: f64) -> PyResult<Option<String>> {
        let timeout = seconds("timeout", timeout)?;
        let job = interruptible(py, timeout, |slice| async move {
            match self.inner.wait(id, slice).await {
                Ok(job) => Ok(Some(job)),
                Err(remuda::Error::WaitTimeout { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        job.map(|j| text(&j)).transpose()
    }

    /// Waits for a job as `wait` does, on the shared runtime without holding a thread:
    /// `callback(job_json | None, error | None)` is called (from a runtime thread) when it
    /// ends. The returned handle stops the wait early.
    fn wait_callback(&self, id: i64, timeout: f64, callback: PyObject) -> PyResult<Waiting> {
        let timeout = seconds("timeout", timeout)?;
        let client = self.inner.clone();
        spawn_wait(callback, async move {
            match client.wait(id, timeout).await {
                Ok(job) => Ok(Some(serde_json::to_string(&job)?)),
                Err(remuda::Error::WaitTimeout { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    /// Waits for a run as `wait_workflow` does, without holding a thread (see
    /// `wait_callback`).
    fn wait_workflow_callback(
        &self,
        id: i64,
        timeout: f64,
        callback: PyObject,
    ) -> PyResult<Waiting> {
        let timeout = seconds("timeout", timeout)?;
        let client = self.inner.clone();
        spawn_wait(callback, async move {
            match client.wait_workflow(id, timeout).await {
                Ok(run) => Ok(Some(serde_json::to_string(&run)?)),
                Err(remuda::Error::WorkflowWaitTimeout { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    /// Whether a live worker serves `queue` and runs `kind`, and whether any worker lives:
    /// `(served, any_worker)`.
    fn kind_served(&self, py: Python<'_>, kind: &str, queue: &str) -> PyResult<(bool, bool)> {
        block_on(py, self.inner.kind_served(kind, queue))
    }

    /// The job as JSON, or `None`.
    fn job(&self, py: Python<'_>, id: i64) -> PyResult<Option<String>> {
        block_on(py, self.inner.job(id))?
            .map(|j| text(&j))
            .transpose()
    }

    /// A page of the jobs matching `filter` (JSON: `state`, `queue`, `kind`, `args` (jobs
    /// whose args contain it), `limit`, `after` (the previous page's `next`)), each as
    /// [`Client::job`] gives it, in the state's listing order: `{"jobs": […], "next": …}`.
    fn jobs(&self, py: Python<'_>, filter: &str) -> PyResult<String> {
        let given: JobsFilter = parse("job filter", filter)?;
        let state = given
            .state
            .map(|s| s.parse::<remuda::JobState>())
            .transpose()
            .map_err(|e| error("BAD_INPUT", &format!("job filter: state: {e}")))?;
        let filter = remuda::client::JobFilter {
            state,
            queue: given.queue,
            kind: given.kind,
            args: given.args,
            limit: given.limit,
            after: given.after,
            ..Default::default()
        };
        text(&block_on(py, self.inner.job_page(&filter))?)
    }

    /// The ids of the jobs of `kind` that hold `key`, newest first (see
    /// `remuda::Client::find_by_key`).
    fn find_by_key(&self, py: Python<'_>, kind: &str, key: &str) -> PyResult<Vec<i64>> {
        Ok(block_on(py, self.inner.find_by_key(kind, key))?
            .iter()
            .map(|j| j.id)
            .collect())
    }

    /// Cancels a job: the state it had.
    fn cancel(&self, py: Python<'_>, id: i64) -> PyResult<String> {
        Ok(block_on(py, self.inner.cancel(id))?.as_str().to_string())
    }

    /// Sets the limits a task declares on its queue (JSON: `max_running`, `key_limit`,
    /// `rate` as `[n, seconds]`, `rate_burst`, `rate_per`; those absent are left as they
    /// are, but a rate set without `rate_per` counts the whole queue), as
    /// `remuda queue set` does: the queue's settings after it, as JSON.
    fn limit_queue(&self, py: Python<'_>, queue: &str, limits: &str) -> PyResult<String> {
        let limits: QueueLimits = parse("queue limits", limits)?;
        let change = remuda::QueueChange {
            max_running: limits.max_running.map(Some),
            key_limit: limits.key_limit.map(Some),
            rate: limits
                .rate
                .map(|(n, period)| Ok::<_, PyErr>(Some((n, seconds("rate", period)?))))
                .transpose()?,
            rate_burst: limits.rate_burst,
            rate_per: limits
                .rate_per
                .map(|per| per.parse().map_err(|e: String| error("BAD_INPUT", &e)))
                .transpose()?,
            ..remuda::QueueChange::default()
        };
        text(&block_on(py, self.inner.change_queue(queue, &change))?)
    }

    /// Checks and compiles a workflow spec (JSON): the compiled definition.
    #[staticmethod]
    fn compile_workflow(spec: &str) -> PyResult<String> {
        let spec: WorkflowSpec = parse("workflow spec", spec)?;
        let compiled = remuda::workflow::compile(&spec)
            .map_err(|e| from_remuda(remuda::Error::InvalidWorkflow(e.problems)))?;
        text(&compiled)
    }

    /// Starts a run of a spec (JSON) with input (JSON) and an idempotency key:
    /// `(id, existed, warning)`, the warning saying when the key's run was started with
    /// another input (the input given now was not used). The run continues the trace
    /// context `traceparent`, `tracestate` when given, in the fair-share group `group`.
    #[pyo3(signature = (spec, input, key = None, traceparent = None, tracestate = None, group = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each
    fn start_workflow(
        &self,
        py: Python<'_>,
        spec: &str,
        input: &str,
        key: Option<&str>,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
        group: Option<String>,
    ) -> PyResult<(i64, bool, Option<String>)> {
        let spec: WorkflowSpec = parse("workflow spec", spec)?;
        let input: Value = parse("workflow input", input)?;
        let trace = traceparent
            .map(|tp| remuda::TraceContext::parse(tp, tracestate))
            .transpose()
            .map_err(from_remuda)?;
        let started = block_on(
            py,
            remuda::trace::scope(
                trace,
                remuda::group::scope(group, self.inner.start_workflow_spec(&spec, &input, key)),
            ),
        )?;
        Ok((started.id, started.existed, started.warning(key)))
    }

    /// A run with its nodes as JSON, or `None`.
    fn workflow(&self, py: Python<'_>, id: i64) -> PyResult<Option<String>> {
        block_on(py, self.inner.workflow(id))?
            .map(|w| text(&w))
            .transpose()
    }

    /// Waits for a run to end: the run as JSON, or `None` on timeout.
    fn wait_workflow(&self, py: Python<'_>, id: i64, timeout: f64) -> PyResult<Option<String>> {
        let timeout = seconds("timeout", timeout)?;
        let run = interruptible(py, timeout, |slice| async move {
            match self.inner.wait_workflow(id, slice).await {
                Ok(run) => Ok(Some(run)),
                Err(remuda::Error::WorkflowWaitTimeout { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        run.map(|r| text(&r)).transpose()
    }

    /// Pauses, resumes, cancels or retries a run (`action`): the state it had.
    fn control_workflow(&self, py: Python<'_>, id: i64, action: &str) -> PyResult<String> {
        let client = &self.inner;
        let was = match action {
            "pause" => block_on(py, client.pause_workflow(id))?,
            "resume" => block_on(py, client.resume_workflow(id))?,
            "cancel" => block_on(py, client.cancel_workflow(id))?,
            "retry" => block_on(py, client.retry_workflow(id))?,
            other => {
                return Err(error(
                    "BAD_INPUT",
                    &format!("unknown workflow action {other:?}: pause, resume, cancel or retry"),
                ))
            }
        };
        Ok(was.to_string())
    }

    /// Sends a run a signal with data (JSON): how many signal nodes it completed.
    fn signal_workflow(&self, py: Python<'_>, id: i64, name: &str, data: &str) -> PyResult<usize> {
        let data: Value = parse("signal data", data)?;
        block_on(py, self.inner.signal_workflow(id, name, &data))
    }
}

/// Waits with `wait(slice)` in slices of at most a second until it gives a value or
/// `timeout` has passed (`None`), checking between slices for Python's signals: Ctrl-C
/// interrupts a long `get()`.
fn interruptible<T, F, Fut>(py: Python<'_>, timeout: Duration, mut wait: F) -> PyResult<Option<T>>
where
    T: Send,
    F: FnMut(Duration) -> Fut,
    Fut: std::future::Future<Output = remuda::Result<Option<T>>> + Send,
{
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let left = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
        let slice = left.min(SLICE);
        if let Some(value) = block_on(py, wait(slice))? {
            return Ok(Some(value));
        }
        if deadline.is_some() && left <= SLICE {
            return Ok(None);
        }
        py.check_signals()?;
    }
}

/// A wait running on the shared runtime (`Client.wait_callback`).
#[pyclass(frozen, module = "remuda._native")]
pub struct Waiting {
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Waiting {
    /// Stops the wait (its callback is then never called).
    fn cancel(&self) {
        self.task.abort();
    }
}

/// Runs `wait` on the shared runtime and gives its outcome to `callback(text, error)`.
fn spawn_wait<F>(callback: PyObject, wait: F) -> PyResult<Waiting>
where
    F: std::future::Future<Output = remuda::Result<Option<String>>> + Send + 'static,
{
    let handle = crate::convert::runtime()?.spawn(async move {
        let outcome = wait.await;
        // the GIL is taken on a blocking thread, never on one of the runtime's, which also
        // drive the workers' claims and completions in this process
        let _ = tokio::task::spawn_blocking(move || {
            // counted before the look at `EXITING`, so that `finish_waits` either waits for
            // this call or this call sees the interpreter going and stays out of it
            CALLING.fetch_add(1, Ordering::SeqCst);
            if !EXITING.load(Ordering::SeqCst) {
                Python::with_gil(|py| {
                    let (value, failure) = match outcome {
                        Ok(text) => (text, None),
                        Err(e) => (None, Some(from_remuda(e).into_value(py))),
                    };
                    if let Err(e) = callback.call1(py, (value, failure)) {
                        // the callback only schedules the result on its event loop: a failure
                        // there is a bug of the package, said where Python says unraisable errors
                        e.write_unraisable(py, None);
                    }
                    drop(callback);
                });
            }
            CALLING.fetch_sub(1, Ordering::SeqCst);
        })
        .await;
    });
    Ok(Waiting {
        task: handle.abort_handle(),
    })
}

/// Wait callbacks under way on the runtime's threads (see [`finish_waits`]).
static CALLING: AtomicUsize = AtomicUsize::new(0);
/// Set once the interpreter exits: no wait callback enters Python after it.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Called when the interpreter exits (`atexit`, before it starts tearing down): no wait's
/// callback enters Python from now on, and those already calling are let finish (for 5 s at
/// most). A callback resolving an awaited `get_async` wakes the program, which may end while
/// the callback's thread is still leaving Python; an interpreter torn down under it aborted
/// the process.
#[pyfunction]
pub fn finish_waits(py: Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    py.allow_threads(|| {
        let until = Instant::now() + Duration::from_secs(5);
        while CALLING.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Longest a wait holds on without looking at Python's signals.
const SLICE: Duration = Duration::from_secs(1);

impl Client {
    /// The Rust client, for the worker.
    pub fn inner(&self) -> &remuda::Client {
        &self.inner
    }
}

/// The database to use when none is given, found as the `remuda` binary finds it:
/// `$DATABASE_URL`; a local server that lets us in (its database `remuda`, created if
/// missing); else a private cluster started from the local PostgreSQL binaries.
#[pyfunction]
pub fn database_url(py: Python<'_>) -> PyResult<String> {
    let config = block_on(py, remuda::db::setup::Resolve::from_env().resolve())?;
    Ok(remuda::db::conninfo(&config, None))
}

/// The limits a task declares on its queue (`@app.task(max_running=…, key_limit=…, rate=…)`).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct QueueLimits {
    max_running: Option<i32>,
    key_limit: Option<i32>,
    rate: Option<(i32, f64)>,
    rate_burst: Option<i32>,
    rate_per: Option<String>,
}
