//! Runs in `remuda.workflows` through the [`Client`]: start (idempotent by key), status,
//! list, pause, resume, cancel, retry, signal, and waiting for the end.

use super::builder::Workflow;
use super::compile::compile;
use super::spec::WorkflowSpec;
use super::status::{NodeState, NodeStatus, WorkflowState, WorkflowStatus, WorkflowSummary};
use crate::client::Client;
use crate::{sql, Error, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// How often a waiter re-reads the run in case a notification was missed.
const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// How many times a control operation is tried when it deadlocks with a completion that
/// locks the same runs the other way (a sub-workflow's end reaching its parent while the
/// parent is paused or cancelled): PostgreSQL ends one of the two, and it is tried again.
const DEADLOCK_TRIES: u32 = 5;

/// A started run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Started {
    /// The run's id.
    pub id: i64,
    /// True when the idempotency key found a run started before (with the same definition).
    pub existed: bool,
    /// True when that run was started with another input: the input given now was not
    /// used (a key names one run, whatever it is asked with later).
    pub input_ignored: bool,
}

impl Started {
    /// What to tell whoever started it, when the input given was not used.
    pub fn warning(&self, key: Option<&str>) -> Option<String> {
        self.input_ignored.then(|| {
            format!(
                "workflow run {} was started before with idempotency key {:?} and another input: the input given now was ignored (use a new key to start a run with it)",
                self.id,
                key.unwrap_or_default()
            )
        })
    }
}

/// Which runs [`Client::workflows`] lists.
#[derive(Clone, Debug, Default)]
pub struct WorkflowFilter {
    /// Only runs in this state.
    pub state: Option<WorkflowState>,
    /// Only runs of this definition.
    pub name: Option<String>,
    /// At most this many (default 100).
    pub limit: Option<i64>,
}

/// A run started from a typed [`Workflow`]: its id, and its output read as `O`.
pub struct WorkflowHandle<O> {
    client: Client,
    /// The run's id.
    pub id: i64,
    /// True when the idempotency key found a run started before.
    pub existed: bool,
    _output: PhantomData<fn() -> O>,
}

impl<O: DeserializeOwned> WorkflowHandle<O> {
    /// The run as it is now.
    pub async fn status(&self) -> Result<WorkflowStatus> {
        self.client
            .workflow(self.id)
            .await?
            .ok_or(Error::WorkflowNotFound(self.id))
    }

    /// Waits for the run to end and returns its output; [`Error::WorkflowFailed`] when it
    /// failed or was cancelled, [`Error::WorkflowWaitTimeout`] after `timeout`.
    pub async fn wait(&self, timeout: Duration) -> Result<O> {
        let run = self.client.wait_workflow(self.id, timeout).await?;
        if run.state != WorkflowState::Completed {
            return Err(Error::WorkflowFailed {
                id: run.id,
                state: run.state.to_string(),
                error: run.error.map(|e| e.to_string()).unwrap_or_default(),
            });
        }
        Ok(serde_json::from_value(run.output.unwrap_or(Value::Null))?)
    }

    /// Pauses the run: see [`Client::pause_workflow`].
    pub async fn pause(&self) -> Result<WorkflowState> {
        self.client.pause_workflow(self.id).await
    }

    /// Resumes the run: see [`Client::resume_workflow`].
    pub async fn resume(&self) -> Result<WorkflowState> {
        self.client.resume_workflow(self.id).await
    }

    /// Cancels the run: see [`Client::cancel_workflow`].
    pub async fn cancel(&self) -> Result<WorkflowState> {
        self.client.cancel_workflow(self.id).await
    }

    /// Retries the run: see [`Client::retry_workflow`].
    pub async fn retry(&self) -> Result<WorkflowState> {
        self.client.retry_workflow(self.id).await
    }

    /// Sends the run a signal: see [`Client::signal_workflow`].
    pub async fn signal(&self, name: &str, data: &impl Serialize) -> Result<usize> {
        self.client
            .signal_workflow(self.id, name, &serde_json::to_value(data)?)
            .await
    }
}

impl Client {
    /// Starts a run of `workflow` with `input` (what `"$input"` args receive).
    pub async fn start_workflow<O>(
        &self,
        workflow: &Workflow<O>,
        input: &impl Serialize,
    ) -> Result<WorkflowHandle<O>> {
        self.start_workflow_keyed(workflow, input, None).await
    }

    /// Starts a run, or returns the one started with idempotency key `key` when its
    /// definition is the same; a different definition is refused ([`Error::WorkflowDrift`]).
    pub async fn start_workflow_keyed<O>(
        &self,
        workflow: &Workflow<O>,
        input: &impl Serialize,
        key: Option<&str>,
    ) -> Result<WorkflowHandle<O>> {
        let compiled = workflow
            .compile()
            .map_err(|e| Error::InvalidWorkflow(e.problems))?;
        let started = self
            .start_compiled(&compiled, &serde_json::to_value(input)?, key)
            .await?;
        Ok(WorkflowHandle {
            client: self.clone(),
            id: started.id,
            existed: started.existed,
            _output: PhantomData,
        })
    }

    /// Starts a run of a spec (as loaded from a file), untyped.
    pub async fn start_workflow_spec(
        &self,
        spec: &WorkflowSpec,
        input: &Value,
        key: Option<&str>,
    ) -> Result<Started> {
        let compiled = compile(spec).map_err(|e| Error::InvalidWorkflow(e.problems))?;
        self.start_compiled(&compiled, input, key).await
    }

    /// Starts a new run of the definition run `from` was started with (the dashboard's "run
    /// again"), with `input` and an idempotency `key`.
    pub async fn start_workflow_like(
        &self,
        from: i64,
        input: &Value,
        key: Option<&str>,
    ) -> Result<Started> {
        let conn = self.database().conn().await?;
        let row = conn
            .query_opt(sql::WORKFLOW_DEFINITION, &[&from])
            .await?
            .ok_or(Error::WorkflowNotFound(from))?;
        let compiled: Value = row.try_get("definition")?;
        let group: Option<String> = row.try_get("group_key")?;
        drop(conn);
        // the new run works for the same tenant, unless a group is current here
        let group = crate::group::current().or(group);
        crate::group::scope(group, self.start_compiled(&compiled, input, key)).await
    }

    async fn start_compiled(
        &self,
        compiled: &Value,
        input: &Value,
        key: Option<&str>,
    ) -> Result<Started> {
        let trace = crate::telemetry::tracing_spans::inherited();
        let traceparent = trace.as_ref().map(|t| t.traceparent.as_str());
        let tracestate = trace.as_ref().and_then(|t| t.tracestate.as_deref());
        crate::group::check_current()?;
        let group = crate::group::current();
        let conn = self.database().conn().await?;
        let row = conn
            .query_one(
                sql::WORKFLOW_START,
                &[compiled, input, &key, &traceparent, &tracestate, &group],
            )
            .await?;
        let id: i64 = row.try_get("id")?;
        if row.try_get::<_, bool>("drift")? {
            return Err(Error::WorkflowDrift {
                key: key.unwrap_or_default().to_string(),
                id,
            });
        }
        let existed: bool = row.try_get("existed")?;
        let input_ignored = existed
            && conn
                .query_opt(sql::WORKFLOW_INPUT_DIFFERS, &[&id, input])
                .await?
                .map(|r| r.try_get::<_, bool>("differs"))
                .transpose()?
                .unwrap_or(false);
        Ok(Started {
            id,
            existed,
            input_ignored,
        })
    }

    /// A run with its nodes; `None` when there is no such run.
    pub async fn workflow(&self, id: i64) -> Result<Option<WorkflowStatus>> {
        let conn = self.database().conn().await?;
        let Some(row) = conn.query_opt(sql::WORKFLOW_GET, &[&id]).await? else {
            return Ok(None);
        };
        let mut nodes = BTreeMap::new();
        for n in conn.query(sql::WORKFLOW_NODES, &[&id]).await? {
            let children: Option<Value> = n.try_get("children")?;
            nodes.insert(
                n.try_get("node")?,
                NodeStatus {
                    node_type: n.try_get("type")?,
                    position: n.try_get("position")?,
                    deps: n.try_get("deps")?,
                    state: n
                        .try_get::<_, String>("state")?
                        .parse::<NodeState>()
                        .map_err(Error::InvalidInput)?,
                    reason: n.try_get("reason")?,
                    job_id: n.try_get("job_id")?,
                    attempt: n.try_get("attempt")?,
                    result: n.try_get("result")?,
                    error: n.try_get("error")?,
                    started_at: n.try_get("started_at")?,
                    finished_at: n.try_get("finished_at")?,
                    children: children.map(counts).transpose()?.or_else(|| {
                        (n.try_get::<_, String>("type").ok()? == "map").then(BTreeMap::new)
                    }),
                    workflow_id: n.try_get("child_id")?,
                },
            );
        }
        Ok(Some(WorkflowStatus {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            state: state(row.try_get("state")?)?,
            input: row.try_get("input")?,
            output: row.try_get("output")?,
            error: row.try_get("error")?,
            parent_id: row.try_get("parent_id")?,
            group: row.try_get("group_key")?,
            created_at: row.try_get("created_at")?,
            finished_at: row.try_get("finished_at")?,
            nodes,
        }))
    }

    /// Runs, newest first.
    pub async fn workflows(&self, filter: &WorkflowFilter) -> Result<Vec<WorkflowSummary>> {
        let conn = self.database().conn().await?;
        let wanted = filter.state.map(|s| s.as_str());
        let rows = conn
            .query(
                sql::WORKFLOW_LIST,
                &[&wanted, &filter.name, &filter.limit.unwrap_or(100)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(WorkflowSummary {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    state: state(r.try_get("state")?)?,
                    parent_id: r.try_get("parent_id")?,
                    created_at: r.try_get("created_at")?,
                    finished_at: r.try_get("finished_at")?,
                    nodes: r
                        .try_get::<_, Option<Value>>("nodes")?
                        .map(counts)
                        .transpose()?
                        .unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Pauses a running run and its running sub-workflows: no node starts until it is
    /// resumed; nodes already running finish. Returns the state it had.
    pub async fn pause_workflow(&self, id: i64) -> Result<WorkflowState> {
        let old = self.control(sql::WORKFLOW_PAUSE, id).await?;
        match old {
            WorkflowState::Running | WorkflowState::Paused => Ok(old),
            _ => Err(wrong(id, old, "pause")),
        }
    }

    /// Resumes a paused run (and its sub-workflows): a node whose failure paused it
    /// (`on_error = "pause"`) runs again, then every node whose dependencies allow starts.
    pub async fn resume_workflow(&self, id: i64) -> Result<WorkflowState> {
        let old = self.control(sql::WORKFLOW_RESUME, id).await?;
        match old {
            WorkflowState::Paused | WorkflowState::Running => Ok(old),
            _ => Err(wrong(id, old, "resume")),
        }
    }

    /// Cancels a run that has not ended: its running jobs are cancelled (their workers
    /// told), its pending nodes and sub-workflows cancelled. Returns the state it had; a run
    /// already cancelled is left as it is (`Cancelled`), one that completed or failed is
    /// refused.
    pub async fn cancel_workflow(&self, id: i64) -> Result<WorkflowState> {
        let old = self.control(sql::WORKFLOW_CANCEL, id).await?;
        match old {
            // a second cancel finds what it asked for, as a job's does
            WorkflowState::Running | WorkflowState::Paused | WorkflowState::Cancelled => Ok(old),
            _ => Err(wrong(id, old, "cancel")),
        }
    }

    /// Runs a failed or cancelled run again: only the nodes that did not complete (failed,
    /// cancelled, skipped) run again, with what depends on them; a map runs again only its
    /// failed elements, a sub-workflow only its own failed nodes. Completed nodes keep their
    /// results. Returns the state it had.
    pub async fn retry_workflow(&self, id: i64) -> Result<WorkflowState> {
        let old = self.control(sql::WORKFLOW_RETRY, id).await?;
        match old {
            WorkflowState::Failed | WorkflowState::Cancelled => Ok(old),
            _ => Err(wrong(id, old, "retry")),
        }
    }

    /// Sends signal `name` with `data` to a run: its signal nodes waiting for that name
    /// complete with `data` as their result (one that starts later finds it). Returns how
    /// many nodes it completed now.
    pub async fn signal_workflow(&self, id: i64, name: &str, data: &Value) -> Result<usize> {
        if name.trim().is_empty() {
            return Err(Error::InvalidInput("the signal name is empty".into()));
        }
        let completed: Option<i32> = self
            .with_deadlock_retry(|conn| async move {
                Ok(conn
                    .query_one(sql::WORKFLOW_SIGNAL, &[&id, &name, data])
                    .await?
                    .try_get("completed")?)
            })
            .await?;
        match completed {
            None => Err(Error::WorkflowNotFound(id)),
            Some(-1) => {
                let state = self
                    .workflow(id)
                    .await?
                    .map(|w| w.state.to_string())
                    .unwrap_or_default();
                Err(Error::WorkflowWrongState {
                    id,
                    state,
                    action: "signal",
                })
            }
            Some(n) => Ok(usize::try_from(n).unwrap_or(0)),
        }
    }

    /// Waits until the run ends (completed, failed, cancelled) and returns it;
    /// [`Error::WorkflowWaitTimeout`] if it has not after `timeout`.
    pub async fn wait_workflow(&self, id: i64, timeout: Duration) -> Result<WorkflowStatus> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + crate::duration::MAX);
        let listener = self.listener();
        let mut events = listener.subscribe();
        let listening = listener.ready(timeout.min(Duration::from_secs(5))).await;
        let wanted = id.to_string();
        loop {
            let run = self
                .workflow(id)
                .await?
                .ok_or(Error::WorkflowNotFound(id))?;
            if run.state.is_final() {
                return Ok(run);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::WorkflowWaitTimeout { id, after: timeout });
            }
            let poll = if listening {
                FALLBACK_POLL
            } else {
                Duration::from_millis(100)
            };
            crate::client::wait::notice(
                &mut events,
                "remuda_workflow",
                &wanted,
                deadline.min(now + poll),
            )
            .await;
        }
    }

    async fn control(&self, statement: &'static str, id: i64) -> Result<WorkflowState> {
        let old: Option<String> = self
            .with_deadlock_retry(|conn| async move {
                Ok(conn
                    .query_one(statement, &[&id])
                    .await?
                    .try_get("old_state")?)
            })
            .await?;
        state(old.ok_or(Error::WorkflowNotFound(id))?)
    }

    async fn with_deadlock_retry<T, F, Fut>(&self, run: F) -> Result<T>
    where
        F: Fn(crate::db::Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut tries = 0;
        loop {
            tries += 1;
            let conn = self.database().conn().await?;
            match run(conn).await {
                Err(Error::Db(e))
                    if tries < DEADLOCK_TRIES
                        && e.code()
                            == Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED) =>
                {
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(tries))).await;
                }
                other => return other,
            }
        }
    }
}

fn state(text: String) -> Result<WorkflowState> {
    text.parse().map_err(Error::InvalidInput)
}

fn wrong(id: i64, state: WorkflowState, action: &'static str) -> Error {
    Error::WorkflowWrongState {
        id,
        state: state.to_string(),
        action,
    }
}

fn counts(value: Value) -> Result<BTreeMap<String, i64>> {
    Ok(serde_json::from_value(value)?)
}
