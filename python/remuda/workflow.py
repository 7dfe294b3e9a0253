"""Workflows from typed nodes, in the style of horsies' ``TaskNode``: ``resize.node(…,
waits_for=[a], args_from={"image": a}, join="any")``, ``app.workflow("name", nodes,
output=…)``, ``.start()`` → :class:`WorkflowHandle`. The definition is checked whole and run
by remuda's engine (result passing, joins, conditions, maps, sleeps, signals, sub-workflows)."""

from __future__ import annotations

import datetime as dt
import json
import warnings
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Literal, TypedDict, TypeVar, Union

from .errors import InputTypeError, RemudaError
from .result import TaskError, TaskResult
from . import codec
from . import sending
from .sending import seconds
from .task import native_wait, wait_seconds

if TYPE_CHECKING:
    from .app import App
    from .task import Task

R = TypeVar("R")

INPUT = "$input"
"""The run's input, as an ``args_from`` source: ``args_from={"params": remuda.INPUT}``."""

#: how a node is placed and fed: never a task's arguments
_WIRING = ("node_id", "waits_for", "args_from", "context_from", "run_if", "skip_if", "map")

#: a node's job options: a task's arguments instead when its function has a parameter so named
_NODE_OPTIONS = (
    "queue",
    "priority",
    "max_attempts",
    "timeout",
    "deadline",
    "join",
    "min_success",
    "allow_failed_deps",
)


class WorkflowNode(Generic[R]):
    """A node of a workflow: what it waits for and, once placed, its id. ``R`` is its
    result's type (what an ``args_from`` parameter annotated ``TaskResult[R]`` gets)."""

    def __init__(self, node_id: str | None, default_id: str, waits_for: Iterable[Ref], fields: dict[str, Any]) -> None:
        self.node_id = node_id
        self.default_id = default_id
        self.waits_for = list(waits_for)
        self.fields = fields
        self.args_from: dict[str, Ref] = {}
        self.context_from: list[Ref] = []
        self.conditions: dict[str, dict[str, Any]] = {}
        #: rebuilds the node's result as its task returns it (``None``: as stored)
        self.decode: Callable[[Any], Any] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.node_id or self.default_id}>"

    def spec(self, ids: dict[int, str]) -> dict[str, Any]:
        """The node as the engine's spec takes it, other nodes named by ``ids``."""
        out: dict[str, Any] = {k: v for k, v in self.fields.items() if v is not None}
        for key in ("timeout", "deadline", "sleep"):
            if key in out:
                out[key] = duration(out[key])
        if self.waits_for:
            out["waits_for"] = [ref(ids, n) for n in self.waits_for]
        if self.args_from:
            out["args_from"] = {name: ref(ids, n) for name, n in self.args_from.items()}
        if self.context_from:
            out["context_from"] = [ref(ids, n) for n in self.context_from]
        for key, condition in self.conditions.items():
            out[key] = {**condition, "node": ref(ids, condition["node"])}
        return out


#: a node, or a node's id (or :data:`INPUT`) as text
Ref = Union[WorkflowNode[Any], str]


class NodeOptions(TypedDict, total=False):
    """What places a task's node in a workflow and how its job runs
    (``task.call(…).node(**options)``; :meth:`Task.node` takes the same among its
    arguments): durations in seconds, ``"10m"`` or a ``timedelta``."""

    node_id: str
    waits_for: Iterable[Ref]
    args_from: dict[str, Ref]
    context_from: Iterable[Ref]
    run_if: dict[str, Any]
    skip_if: dict[str, Any]
    queue: str
    priority: int
    max_attempts: int
    timeout: float | str | dt.timedelta
    deadline: float | str | dt.timedelta
    join: Literal["all", "any", "quorum"]
    min_success: int
    allow_failed_deps: bool


class TaskNode(WorkflowNode[R]):
    """A node running a task with arguments (``task.node(…)``)."""

    @staticmethod
    def of(task: Task[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any] | None = None) -> TaskNode[Any]:
        """The node ``task.node(*args, **kwargs)`` describes (its node options among the
        keyword arguments), or ``task.call(*args, **kwargs).node(**options)`` (apart)."""
        if options is None:
            options = {k: kwargs.pop(k) for k in _WIRING if k in kwargs}
            params = task.signature.parameters
            options.update({k: kwargs.pop(k) for k in _NODE_OPTIONS if k in kwargs and k not in params})
        unknown = sorted(set(options) - set(_WIRING) - set(_NODE_OPTIONS))
        if unknown:
            raise InputTypeError(f"node options {', '.join(unknown)}: not options of a workflow node ({', '.join(_WIRING + _NODE_OPTIONS)})")
        node_id = options.pop("node_id", None)
        waits_for = options.pop("waits_for", ())
        args_from = options.pop("args_from", None) or {}
        context_from = options.pop("context_from", None) or []
        run_if = options.pop("run_if", None)
        skip_if = options.pop("skip_if", None)
        map_over = options.pop("map", None)
        # the task's own defaults, as its sends have them: a worker claims from its tasks' queues
        fields: dict[str, Any] = {"kind": task.name, **task.defaults(), **options}
        fields["args"] = task.bind(args, kwargs, partial=True)
        node: TaskNode[Any] = TaskNode(node_id, task.name, waits_for, fields)
        node.args_from = dict(args_from)
        node.context_from = list(context_from)
        for key, condition in (("run_if", run_if), ("skip_if", skip_if)):
            if condition is not None:
                node.conditions[key] = dict(condition)
        node.decode = task.codec.decode_result
        if map_over is not None:
            node.decode = lambda values: [task.codec.decode_result(v) for v in values] if isinstance(values, list) else values
            node.conditions["map"] = {"node": map_over["over"], **{k: v for k, v in map_over.items() if k != "over"}}
        return node

    def spec(self, ids: dict[int, str]) -> dict[str, Any]:
        out = super().spec(ids)
        if "map" in out:
            mapped = out.pop("map")
            out["map"] = {"over": mapped.pop("node"), **mapped}
        return out


def sleep(duration: float | str, *, node_id: str | None = None, waits_for: Iterable[Ref] = ()) -> WorkflowNode[None]:
    """A durable timer node (seconds, or ``"10m"``)."""
    return WorkflowNode(node_id, "sleep", waits_for, {"sleep": duration})


def signal(name: str, *, node_id: str | None = None, timeout: float | str | None = None, waits_for: Iterable[Ref] = ()) -> WorkflowNode[Any]:
    """A node that waits for the run to receive signal ``name`` (``handle.signal(name,
    data)``); it completes with the data, or fails with ``SIGNAL_TIMEOUT``."""
    return WorkflowNode(node_id, name, waits_for, {"signal": name, "timeout": timeout})


class Workflow(Generic[R]):
    """A workflow definition: ``start`` runs it; ``node`` makes it a sub-workflow of another."""

    def __init__(
        self,
        app: App,
        name: str,
        nodes: list[WorkflowNode[Any]],
        output: WorkflowNode[R] | None,
        on_error: str,
        success: list[list[WorkflowNode[Any]]] | None,
        deadline: str | None,
        notify: dict[str, Any] | None,
    ) -> None:
        self.app = app
        self.name = name
        self.nodes = nodes
        self.output = output
        self.on_error = on_error
        self.success = success
        self.deadline = deadline
        self.notify = notify

    def ids(self) -> dict[int, str]:
        """Each node's id: its own ``node_id``, else its task's name (``name_2`` … when
        several nodes run one task)."""
        ids: dict[int, str] = {}
        explicit = [n.node_id for n in self.nodes if n.node_id]
        twice = sorted({i for i in explicit if explicit.count(i) > 1})
        if twice:
            raise ValueError(f"workflow {self.name}: node ids {twice} are given to more than one node")
        taken: set[str] = set(explicit)
        for node in self.nodes:
            if node.node_id:
                ids[id(node)] = node.node_id
                continue
            candidate, n = node.default_id, 1
            while candidate in taken:
                n += 1
                candidate = f"{node.default_id}_{n}"
            taken.add(candidate)
            ids[id(node)] = candidate
        return ids

    def spec(self) -> dict[str, Any]:
        """The definition as the engine's spec (JSON)."""
        ids = self.ids()
        spec: dict[str, Any] = {"name": self.name, "on_error": self.on_error, "nodes": {ids[id(n)]: n.spec(ids) for n in self.nodes}}
        if self.output is not None:
            spec["output"] = ref(ids, self.output)
        if self.success is not None:
            spec["success"] = [[ref(ids, n) for n in case] for case in self.success]
        if self.deadline is not None:
            spec["deadline"] = duration(self.deadline)
        if self.notify is not None:
            spec["notify"] = self.notify
        return spec

    def compile(self) -> dict[str, Any]:
        """Checks the definition whole (every problem listed, in a ``RemudaError``
        ``INVALID_SPEC``) and returns the compiled form ``remuda.start_workflow`` takes."""
        from . import _native

        return dict(json.loads(_native.Client.compile_workflow(codec.dumps(self.spec()))))

    def start(self, input: Any = None, *, key: str | None = None, group: str | None = None) -> WorkflowHandle[R]:
        """Starts a run with ``input`` (what ``args_from={…: remuda.INPUT}`` passes); with an
        idempotency ``key``, a second start returns the first run (``existed``), and warns
        (``RuntimeWarning``) when it was started with another input: the input given now is
        not used. The run works for ``group`` (its node jobs take it, so a queue with fair
        share on shares its starts by it); inside a task, the task's group when not given."""
        if group is not None and not isinstance(group, str):
            raise InputTypeError(f"group={group!r}: give a str, not {type(group).__name__}")
        trace = sending.grouped(sending.traced({} if group is None else {"group": group}))
        id, existed, warning = self.app.client.start_workflow(
            codec.dumps(self.spec()),
            codec.dumps(input),
            key,
            trace.get("traceparent"),
            trace.get("tracestate"),
            trace.get("group"),
        )
        if warning is not None:
            warnings.warn(warning, RuntimeWarning, stacklevel=2)
        handle: WorkflowHandle[R] = WorkflowHandle(self.app, id, existed, None if self.output is None else self.output.decode)
        handle.input_ignored = warning is not None
        return handle

    def node(
        self,
        *,
        node_id: str | None = None,
        waits_for: Iterable[Ref] = (),
        args_from: dict[str, Ref] | None = None,
        **fields: Any,
    ) -> WorkflowNode[R]:
        """This workflow as a node of another (a sub-workflow; horsies' ``SubWorkflowNode``):
        it starts with the ``args_from`` results as its input."""
        node: WorkflowNode[R] = WorkflowNode(node_id, self.name, waits_for, {"workflow": self.spec(), **fields})
        node.args_from = dict(args_from or {})
        return node


class WorkflowHandle(Generic[R]):
    """A run: ``status``, ``get``, ``pause``, ``resume``, ``cancel``, ``retry``, ``signal``."""

    def __init__(self, app: App, id: int, existed: bool, decode: Callable[[Any], Any] | None = None) -> None:
        self.app = app
        self.id = id
        self.existed = existed
        #: a start with an idempotency key that returned an earlier run started with another
        #: input: the input given to this start was not used (a ``RuntimeWarning`` says so too)
        self.input_ignored = False
        #: rebuilds the output as the output node's task returns it
        self.decode = decode

    def __repr__(self) -> str:
        return f"WorkflowHandle(id={self.id})"

    def status(self) -> dict[str, Any]:
        """The run and its nodes (state, results, errors) as ``remuda workflow status`` shows them."""
        text = self.app.client.workflow(self.id)
        if text is None:
            raise LookupError(f"no workflow run {self.id}")
        return dict(json.loads(text))

    def get(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[R]:
        """Waits for the run to end: its output, its error, or ``WAIT_TIMEOUT``; a run that
        does not exist is ``NOT_FOUND``, as a job's :meth:`TaskHandle.get` says."""
        try:
            text = self.app.client.wait_workflow(self.id, wait_seconds(timeout, timeout_ms))
        except RemudaError as e:
            return self._missing(e)
        return self._outcome(text, timeout if timeout_ms is None else timeout_ms / 1000)

    async def get_async(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[R]:
        """:meth:`get` for asyncio code: the wait holds no thread."""
        wait = wait_seconds(timeout, timeout_ms)
        try:
            text = await native_wait(lambda done: self.app.client.wait_workflow_callback(self.id, wait, done))
        except RemudaError as e:
            return self._missing(e)
        return self._outcome(text, timeout if timeout_ms is None else timeout_ms / 1000)

    def _missing(self, e: RemudaError) -> TaskResult[R]:
        if e.code != "NOT_FOUND":
            raise e
        return TaskResult(err=TaskError("NOT_FOUND", f"there is no workflow run {self.id}"))

    def _outcome(self, text: str | None, timeout: float | None) -> TaskResult[R]:
        if text is None:
            return TaskResult(err=TaskError("WAIT_TIMEOUT", f"workflow run {self.id} did not end within {timeout}s"))
        run = json.loads(text)
        if run.get("state") == "completed":
            output = run.get("output")
            return TaskResult(ok=output if self.decode is None else self.decode(output))
        error = run.get("error")
        if isinstance(error, dict):
            return TaskResult(err=TaskError(str(error.get("code", "FAILED")), str(error.get("message", "")), error))
        return TaskResult(err=TaskError(str(run.get("state", "FAILED")).upper(), f"workflow run {self.id} ended {run.get('state')}"))

    def pause(self) -> str:
        """Pauses the run (no node starts; running ones finish): the state it had."""
        return str(self.app.client.control_workflow(self.id, "pause"))

    def resume(self) -> str:
        """Resumes a paused run: the state it had."""
        return str(self.app.client.control_workflow(self.id, "resume"))

    def cancel(self) -> str:
        """Cancels the run: the state it had."""
        return str(self.app.client.control_workflow(self.id, "cancel"))

    def retry(self) -> str:
        """Runs again what failed or was cancelled (only that): the state it had."""
        return str(self.app.client.control_workflow(self.id, "retry"))

    def signal(self, name: str, data: Any = None) -> int:
        """Sends the run signal ``name`` with ``data``: how many signal nodes it completed."""
        return int(self.app.client.signal_workflow(self.id, name, codec.dumps(data)))


def ref(ids: dict[int, str], node: Ref) -> str:
    """A node's id (a string is taken as an id, or ``remuda.INPUT``)."""
    if isinstance(node, str):
        return node
    try:
        return ids[id(node)]
    except KeyError:
        raise ValueError(f"{node!r} is referred to but is not among the workflow's nodes: add it to the list") from None


def duration(value: Any) -> str:
    """Seconds, a ``timedelta`` or a duration string (``"10m"``) as the engine's duration text."""
    if isinstance(value, str):
        return value
    return f"{int(round(seconds('duration', value) * 1000))}ms"
