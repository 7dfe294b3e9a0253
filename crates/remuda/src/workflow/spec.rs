//! A workflow definition as users write it: the structure of a spec file (TOML or JSON) and
//! of what the Rust builder makes. Nothing here is checked yet: [`super::compile`] checks a
//! definition whole and lists every problem at once.

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// A workflow definition: named nodes, what their run does when one fails, and what it
/// returns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpec {
    /// The definition's name (runs are listed by it).
    pub name: String,
    /// What a failed node does to the run.
    #[serde(default)]
    pub on_error: OnError,
    /// The node whose result is the run's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// A success policy: the run completes when every node of any one case completed (other
    /// nodes may fail). Without one, it completes when no node failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<Vec<Vec<String>>>,
    /// How long the whole run may take (`1h`): past it, it fails with `DEADLINE_EXCEEDED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Who hears of the run's end: `{"webhook", "email", "on": ["completed", "failed",
    /// "cancelled"] or ["final"]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<crate::notify::NotifyTarget>,
    /// The nodes, in the order they were declared.
    #[serde(default)]
    pub nodes: Nodes,
}

/// What a failed node does to its run.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Its dependents are skipped (unless they allow failed dependencies), the other branches
    /// go on, and the run fails at its end.
    #[default]
    Fail,
    /// The run pauses; `resume` runs the failed node again (after a fix), `cancel` ends it.
    Pause,
}

/// The nodes of a definition, in declaration order. Kept as a list, not a map, so that a
/// duplicate id is reported rather than silently replaced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Nodes(pub Vec<(String, NodeSpec)>);

impl Serialize for Nodes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(id, node)| (id, node)))
    }
}

impl<'de> Deserialize<'de> for Nodes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Nodes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of nodes by id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Nodes, A::Error> {
                let mut nodes = Vec::new();
                while let Some(entry) = map.next_entry::<String, NodeSpec>()? {
                    nodes.push(entry);
                }
                Ok(Nodes(nodes))
            }
        }
        deserializer.deserialize_map(Each)
    }
}

/// One node. Its type is given by which of `kind`, `sleep`, `signal` and `workflow` it has
/// (a `kind` with `map` is a map node); the other fields say when it runs and with what.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// A task node: the task kind its job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The job's args (a JSON object); `args_from` adds to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// The job's queue (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The job's priority (lower runs first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Attempts allowed (default: the worker's for the kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i32>,
    /// A task's time limit per attempt; a signal's time to wait (then `SIGNAL_TIMEOUT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// How long after the node starts its job may still start (then it expires).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// Nodes that must end first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits_for: Vec<String>,
    /// Arg name → upstream node (or `$input`, the run's input): the upstream's tagged result
    /// is set in the args under that name. Each one is also waited for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args_from: BTreeMap<String, String>,
    /// Upstream nodes whose results the task can read from its workflow context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_from: Vec<String>,
    /// Run even when dependencies failed or were skipped (their error results are passed).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_failed_deps: bool,
    /// How many dependencies must complete.
    #[serde(default, skip_serializing_if = "Join::is_all")]
    pub join: Join,
    /// With `join = "quorum"`: how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success: Option<i64>,
    /// Run only if this holds (else the node is skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_if: Option<Condition>,
    /// Skip the node if this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_if: Option<Condition>,
    /// A map node: one job of `kind` per element of a list in an upstream result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapSpec>,
    /// A sleep node: a durable timer (`10s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<String>,
    /// A signal node: waits for the run to receive the signal of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// A sub-workflow node: another definition (a path relative to the spec file, or the
    /// definition itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<SubWorkflow>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A sub-workflow: a spec file to load, or a definition.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum SubWorkflow {
    /// A spec file's path, relative to the file that names it (loaded before compiling).
    Path(String),
    /// The definition.
    Inline(Box<WorkflowSpec>),
}

/// How many of a node's dependencies must complete for it to run. `any` and `quorum` count
/// the nodes it waits for (`waits_for`; all its dependencies when it names none) and start it
/// as soon as enough completed; the nodes it only takes args or context from must end first.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Join {
    /// Every one (the default).
    #[default]
    All,
    /// The first to complete starts the node.
    Any,
    /// `min_success` of them.
    Quorum,
}

impl Join {
    fn is_all(&self) -> bool {
        *self == Join::All
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Join::All => "all",
            Join::Any => "any",
            Join::Quorum => "quorum",
        }
    }
}

/// A declarative condition on an upstream node: its state, its error code, or whether its
/// ok result contains a JSON value. Exactly one of the three tests.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// The upstream node.
    pub node: String,
    /// Holds when the node ended in this state (`completed`, `failed`, `skipped`, `cancelled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Holds when the node failed with this error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Holds when the node's ok result contains this JSON (PostgreSQL's `@>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_contains: Option<Value>,
}

impl Condition {
    /// Holds when `node` ended in `state`.
    pub fn state(node: &str, state: &str) -> Condition {
        Condition {
            node: node.into(),
            state: Some(state.into()),
            ..Condition::default()
        }
    }

    /// Holds when `node` failed with error `code`.
    pub fn error_code(node: &str, code: &str) -> Condition {
        Condition {
            node: node.into(),
            error_code: Some(code.into()),
            ..Condition::default()
        }
    }

    /// Holds when `node`'s ok result contains `value`.
    pub fn result_contains(node: &str, value: Value) -> Condition {
        Condition {
            node: node.into(),
            result_contains: Some(value),
            ..Condition::default()
        }
    }
}

/// What a map node maps over: the list at `pointer` (a JSON pointer, `""` for the whole
/// value) in the ok result of node `over`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MapSpec {
    /// The upstream node.
    pub over: String,
    /// Where the list is in its result.
    #[serde(default)]
    pub pointer: String,
}

impl NodeSpec {
    /// A task node running `kind` with `args`.
    pub fn task(kind: &str, args: Value) -> NodeSpec {
        NodeSpec {
            kind: Some(kind.into()),
            args: Some(args),
            ..NodeSpec::default()
        }
    }

    /// Waits for `node` to end.
    pub fn waits_for(&mut self, node: &str) -> &mut Self {
        self.waits_for.push(node.into());
        self
    }

    /// Sets arg `name` to `node`'s tagged result (`"$input"`: the run's input).
    pub fn args_from(&mut self, name: &str, node: &str) -> &mut Self {
        self.args_from.insert(name.into(), node.into());
        self
    }

    /// Lets the task read `node`'s result from its workflow context.
    pub fn context_from(&mut self, node: &str) -> &mut Self {
        self.context_from.push(node.into());
        self
    }

    /// Runs even when dependencies failed or were skipped.
    pub fn allow_failed_deps(&mut self) -> &mut Self {
        self.allow_failed_deps = true;
        self
    }

    /// Runs once any dependency completed.
    pub fn join_any(&mut self) -> &mut Self {
        self.join = Join::Any;
        self
    }

    /// Runs once `min` dependencies completed.
    pub fn quorum(&mut self, min: i64) -> &mut Self {
        self.join = Join::Quorum;
        self.min_success = Some(min);
        self
    }

    /// Runs only if `condition` holds.
    pub fn run_if(&mut self, condition: Condition) -> &mut Self {
        self.run_if = Some(condition);
        self
    }

    /// Is skipped if `condition` holds.
    pub fn skip_if(&mut self, condition: Condition) -> &mut Self {
        self.skip_if = Some(condition);
        self
    }

    /// The job's queue.
    pub fn queue(&mut self, queue: &str) -> &mut Self {
        self.queue = Some(queue.into());
        self
    }

    /// The job's attempts.
    pub fn max_attempts(&mut self, attempts: i32) -> &mut Self {
        self.max_attempts = Some(attempts);
        self
    }
}
