//! The typed builder: nodes of [`Task`]s, whose handles carry their output types, so a run's
//! output is read back as the output node's type.
//!
//! ```no_run
//! # use remuda::{Client, JobContext, Task, TaskError};
//! # use remuda::workflow::Workflow;
//! # struct Fetch; struct Count;
//! # impl Task for Fetch { const KIND: &'static str = "fetch"; type Args = String; type Output = Vec<String>;
//! #   async fn run(&self, _: JobContext, a: String) -> Result<Vec<String>, TaskError> { Ok(vec![a]) } }
//! # impl Task for Count { const KIND: &'static str = "count"; type Args = serde_json::Value; type Output = usize;
//! #   async fn run(&self, _: JobContext, _: serde_json::Value) -> Result<usize, TaskError> { Ok(1) } }
//! # async fn demo(client: Client) -> remuda::Result<()> {
//! let mut wf = Workflow::new("count_pages");
//! let fetch = wf.task::<Fetch>("fetch", &"https://example.com".to_string(), |_| {});
//! let count = wf.task::<Count>("count", &serde_json::json!({}), |n| {
//!     n.args_from("pages", fetch.id());
//! });
//! let run = client.start_workflow(&wf.output(&count), &serde_json::json!(null)).await?;
//! let pages: usize = run.wait(std::time::Duration::from_secs(60)).await?;
//! # Ok(()) }
//! ```

use super::compile::{compile, SpecErrors};
use super::spec::{MapSpec, NodeSpec, OnError, SubWorkflow, WorkflowSpec};
use crate::task::Task;
use serde::Serialize;
use serde_json::Value;
use std::marker::PhantomData;
use std::time::Duration;

/// A node of a workflow being built, typed by its output.
pub struct NodeRef<T> {
    id: String,
    _output: PhantomData<fn() -> T>,
}

impl<T> NodeRef<T> {
    fn new(id: &str) -> Self {
        NodeRef {
            id: id.to_string(),
            _output: PhantomData,
        }
    }

    /// The node's id, for `waits_for`, `args_from` and conditions.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl<T> Clone for NodeRef<T> {
    fn clone(&self) -> Self {
        NodeRef::new(&self.id)
    }
}

/// A workflow definition being built; `O` is the type of its output node's result.
pub struct Workflow<O = Value> {
    spec: WorkflowSpec,
    problems: Vec<String>,
    _output: PhantomData<fn() -> O>,
}

impl Workflow<Value> {
    /// An empty definition named `name`.
    pub fn new(name: &str) -> Self {
        Workflow {
            spec: WorkflowSpec {
                name: name.into(),
                ..WorkflowSpec::default()
            },
            problems: Vec::new(),
            _output: PhantomData,
        }
    }

    /// A definition from a spec (a file's, or one made by hand).
    pub fn from_spec(spec: WorkflowSpec) -> Self {
        Workflow {
            spec,
            problems: Vec::new(),
            _output: PhantomData,
        }
    }
}

impl<O> Workflow<O> {
    /// Adds a task node running `T` with `args` (and `T`'s queue, priority and attempts);
    /// `configure` sets the rest (dependencies, conditions, joins).
    pub fn task<T: Task>(
        &mut self,
        id: &str,
        args: &T::Args,
        configure: impl FnOnce(&mut NodeSpec),
    ) -> NodeRef<T::Output> {
        let options = T::options();
        let mut node = NodeSpec::task(T::KIND, self.json(id, args));
        node.queue = Some(options.queue);
        node.priority = Some(options.priority);
        node.max_attempts = Some(options.max_attempts);
        node.timeout = options.timeout.map(crate::duration::format);
        configure(&mut node);
        self.add(id, node)
    }

    /// Adds a map node: one job of `T` per element of the list at `pointer` in `over`'s
    /// result, each given `args` plus `item` and `index`. Its value is the list of the
    /// elements' outputs, in order (when one failed, its error lists each element's tagged
    /// result as `data`).
    pub fn map<T: Task, U>(
        &mut self,
        id: &str,
        over: &NodeRef<U>,
        pointer: &str,
        args: &impl Serialize,
        configure: impl FnOnce(&mut NodeSpec),
    ) -> NodeRef<Vec<T::Output>> {
        let options = T::options();
        let mut node = NodeSpec::task(T::KIND, self.json(id, args));
        node.queue = Some(options.queue);
        node.priority = Some(options.priority);
        node.max_attempts = Some(options.max_attempts);
        node.map = Some(MapSpec {
            over: over.id().into(),
            pointer: pointer.into(),
        });
        configure(&mut node);
        self.add(id, node)
    }

    /// Adds a sleep node: a durable timer of `duration`.
    pub fn sleep(
        &mut self,
        id: &str,
        duration: Duration,
        configure: impl FnOnce(&mut NodeSpec),
    ) -> NodeRef<()> {
        let mut node = NodeSpec {
            sleep: Some(crate::duration::format(duration)),
            ..NodeSpec::default()
        };
        configure(&mut node);
        self.add(id, node)
    }

    /// Adds a signal node: it completes with the payload of the run's signal `name` (see
    /// [`crate::Client::signal_workflow`]), or fails with `SIGNAL_TIMEOUT` after `timeout`.
    pub fn signal<S>(
        &mut self,
        id: &str,
        name: &str,
        timeout: Option<Duration>,
        configure: impl FnOnce(&mut NodeSpec),
    ) -> NodeRef<S> {
        let mut node = NodeSpec {
            signal: Some(name.into()),
            timeout: timeout.map(crate::duration::format),
            ..NodeSpec::default()
        };
        configure(&mut node);
        self.add(id, node)
    }

    /// Adds a sub-workflow node running `child` (its input: this node's args). Its result
    /// is the child run's summary: state, output, counts of nodes per state, first error.
    pub fn sub_workflow<C>(
        &mut self,
        id: &str,
        child: &Workflow<C>,
        configure: impl FnOnce(&mut NodeSpec),
    ) -> NodeRef<Value> {
        self.problems.extend(
            child
                .problems
                .iter()
                .map(|p| format!("node {id} (sub-workflow): {p}")),
        );
        let mut node = NodeSpec {
            workflow: Some(SubWorkflow::Inline(Box::new(child.spec.clone()))),
            ..NodeSpec::default()
        };
        configure(&mut node);
        self.add(id, node)
    }

    /// Adds a node as written in a spec.
    pub fn node(&mut self, id: &str, node: NodeSpec) -> NodeRef<Value> {
        self.add(id, node)
    }

    /// What a failed node does to the run.
    pub fn on_error(&mut self, on_error: OnError) -> &mut Self {
        self.spec.on_error = on_error;
        self
    }

    /// Notifies `target` when the run ends in an outcome it names (completed, failed or
    /// cancelled).
    pub fn notify(&mut self, target: crate::notify::NotifyTarget) -> &mut Self {
        self.spec.notify = Some(target);
        self
    }

    /// How long the whole run may take.
    pub fn deadline(&mut self, deadline: Duration) -> &mut Self {
        self.spec.deadline = Some(crate::duration::format(deadline));
        self
    }

    /// The success policy: the run completes when every node of any one case completed.
    pub fn success(&mut self, cases: &[&[&str]]) -> &mut Self {
        self.spec.success = Some(
            cases
                .iter()
                .map(|c| c.iter().map(|s| s.to_string()).collect())
                .collect(),
        );
        self
    }

    /// The definition whose output is `node`'s result.
    pub fn output<T>(self, node: &NodeRef<T>) -> Workflow<T> {
        let mut spec = self.spec;
        spec.output = Some(node.id().into());
        Workflow {
            spec,
            problems: self.problems,
            _output: PhantomData,
        }
    }

    /// The definition as a spec.
    pub fn spec(&self) -> &WorkflowSpec {
        &self.spec
    }

    /// Checks the definition and compiles it (every problem listed).
    pub fn compile(&self) -> Result<Value, SpecErrors> {
        match compile(&self.spec) {
            Ok(compiled) if self.problems.is_empty() => Ok(compiled),
            Ok(_) => Err(SpecErrors {
                problems: self.problems.clone(),
            }),
            Err(mut e) => {
                let mut problems = self.problems.clone();
                problems.append(&mut e.problems);
                Err(SpecErrors { problems })
            }
        }
    }

    fn add<T>(&mut self, id: &str, node: NodeSpec) -> NodeRef<T> {
        self.spec.nodes.0.push((id.to_string(), node));
        NodeRef::new(id)
    }

    fn json(&mut self, id: &str, args: &impl Serialize) -> Value {
        serde_json::to_value(args).unwrap_or_else(|e| {
            self.problems.push(format!(
                "node {id}: its args cannot be written as JSON: {e}"
            ));
            Value::Null
        })
    }
}
