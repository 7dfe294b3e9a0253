"""Apps and tasks: ``app = remuda.App(database_url=…)``, ``@app.task("resize", …)``,
``resize.send(…)`` → :class:`TaskHandle`, ``handle.get()`` → :class:`TaskResult`."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, TypeVar

from . import _native, sending
from .errors import RemudaError
from .result import TaskError, TaskResult
from .retry import RetryPolicy

if TYPE_CHECKING:
    from .workflow import TaskNode, Workflow, WorkflowNode

T = TypeVar("T")


def plain_url(url: str | None) -> str | None:
    """``url`` without a SQLAlchemy driver in its scheme: ``postgresql+psycopg://`` (or
    ``+psycopg2``, ``+asyncpg``, …) becomes ``postgresql://``."""
    if url is None:
        return None
    scheme, sep, rest = url.partition("://")
    base, plus, _driver = scheme.partition("+")
    if sep and plus and base in ("postgresql", "postgres"):
        return f"{base}://{rest}"
    return url


class App:
    """A remuda application: the database, the tasks, the workflows.

    ``database_url`` defaults to ``$DATABASE_URL``, else the database the ``remuda`` binary
    would find (a local server that lets you in, else a private cluster it starts from the
    local PostgreSQL binaries). The schema is migrated on first use (safe with many
    processes at once) unless ``migrate=False``. ``retry`` and ``exception_mapper`` are the
    defaults of every task declared on it (a task's own add to, or replace, them). A
    SQLAlchemy-style URL naming a driver
    (``postgresql+psycopg://…``, as horsies takes) is accepted: the driver part is dropped.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        migrate: bool = True,
        retry: RetryPolicy | None = None,
        exception_mapper: dict[type[BaseException], str] | None = None,
    ) -> None:
        self.database_url = plain_url(database_url or os.environ.get("DATABASE_URL") or None)
        self.migrate = migrate
        #: the retry policy of every task that sets none (by default
        #: ``RetryPolicy.exponential()``: 25 attempts, 1 s doubling up to an hour, jittered)
        self.retry = retry or RetryPolicy()
        #: exception classes mapped to error codes for every task; a task's own mapper adds
        #: to it and wins for the classes both name
        self.exception_mapper: dict[type[BaseException], str] = dict(exception_mapper or {})
        self.tasks: dict[str, Task[Any]] = {}
        self._client: _native.Client | None = None
        self._lock = threading.Lock()
        # the (kind, queue) pairs whose service was looked at (see warn_if_unserved)
        self._checked: set[tuple[str, str]] = set()

    @property
    def client(self) -> _native.Client:
        """The Rust client (connected on first use)."""
        with self._lock:
            if self._client is None:
                if self.database_url is None:
                    self.database_url = _native.database_url()
                self._client = _native.Client(self.database_url, self.migrate)
            return self._client

    def task(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        queue: str = "default",
        priority: int = 0,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        exception_mapper: dict[type[BaseException], str] | None = None,
    ) -> Any:
        """Declares a task: ``@app.task("resize", queue="media", retry=RetryPolicy.exponential(…))``
        (or bare ``@app.task``, named after the function). Plain ``def`` and ``async def``
        functions both work; they take the job's args as keyword arguments."""

        def declare(fn: Callable[..., Any]) -> Task[Any]:
            kind = name if isinstance(name, str) else default_kind(fn)
            if kind in self.tasks:
                raise ValueError(f"task {kind!r} is declared twice")
            policy = retry or self.retry
            if max_attempts is not None:
                policy = RetryPolicy(max_attempts, policy.kind, policy.base, policy.max_delay, policy.jitter, policy.retry_on)
            mapper = {**self.exception_mapper, **(exception_mapper or {})}
            task: Task[Any] = Task(self, kind, fn, queue, priority, timeout, policy, mapper)
            self.tasks[kind] = task
            return task

        if callable(name):
            return declare(name)
        return declare

    def warn_if_unserved(self, kind: str, queue: str) -> None:
        """Warns (once per kind and queue in this process, as ``remuda enqueue`` notes it)
        when no live worker runs ``kind`` on ``queue``: the job waits until one does."""
        key = (kind, queue)
        if key in self._checked:
            return
        self._checked.add(key)
        served, any_worker = self.client.kind_served(kind, queue)
        if served:
            return
        why = "no worker is running" if not any_worker else f"no live worker runs {kind!r} on queue {queue!r}"
        warnings.warn(
            f"{why}: job of {kind!r} waits until a worker serving queue {queue!r} runs it "
            f"(python -m remuda worker module:app --queues {queue})",
            RuntimeWarning,
            stacklevel=3,
        )

    def workflow(
        self,
        name: str,
        nodes: Iterable[WorkflowNode],
        *,
        output: WorkflowNode | None = None,
        on_error: str = "fail",
        success: list[list[WorkflowNode]] | None = None,
        deadline: str | None = None,
        notify: dict[str, Any] | None = None,
    ) -> Workflow:
        """A workflow definition from nodes (``task.node(…)``, :func:`remuda.sleep`,
        :func:`remuda.signal`, ``other_workflow.node(…)``)."""
        from .workflow import Workflow

        return Workflow(self, name, list(nodes), output, on_error, success, deadline, notify)

    def workflow_handle(self, id: int) -> Any:
        """A handle on an existing run."""
        from .workflow import WorkflowHandle

        return WorkflowHandle(self, id, False)

    def handle(self, id: int) -> TaskHandle[Any]:
        """A handle on an existing job."""
        return TaskHandle(self, id, False)

    def run_worker(
        self,
        *,
        queues: list[str] | None = None,
        concurrency: int | None = None,
        processes: int = 0,
        config: str | None = None,
        name: str | None = None,
        app_path: str | None = None,
        stop: threading.Event | None = None,
        once: bool = False,
    ) -> dict[str, Any]:
        """Runs a worker for this app's tasks in this process until SIGINT or SIGTERM, until
        ``stop`` is set, or with ``once`` until the queues are drained (see
        :func:`remuda.worker.run`)."""
        from .worker import run

        return run(self, queues=queues, concurrency=concurrency, processes=processes, config=config, name=name, app_path=app_path, stop=stop, once=once)


class Task(Generic[T]):
    """A declared task: call it directly, ``send`` it, or make a workflow ``node`` of it."""

    def __init__(
        self,
        app: App,
        name: str,
        fn: Callable[..., Any],
        queue: str,
        priority: int,
        timeout: float | None,
        retry: RetryPolicy,
        exception_mapper: dict[type[BaseException], str],
    ) -> None:
        self.app = app
        self.name = name
        self.fn = fn
        self.queue = queue
        self.priority = priority
        self.timeout = timeout
        self.retry = retry
        self.exception_mapper = exception_mapper
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = inspect.signature(fn)
        for param in self.signature.parameters.values():
            if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
                raise TypeError(
                    f"task {name}: parameter {param.name!r} is positional-only or *args; a job's args are passed by name, "
                    "so give every parameter a name (**kwargs is fine)"
                )
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<remuda task {self.name!r}>"

    def spec(self) -> dict[str, Any]:
        """The options the worker registers the kind with."""
        timeout = None if self.timeout is None else sending.seconds("timeout", self.timeout)
        spec = {"queue": self.queue, "priority": self.priority, "timeout": timeout}
        spec.update(self.retry.to_json())
        return spec

    def defaults(self) -> dict[str, Any]:
        """What its jobs and workflow nodes get unless told otherwise."""
        return {"queue": self.queue, "priority": self.priority, "max_attempts": self.retry.max_attempts, "timeout": self.timeout}

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any], partial: bool = False) -> dict[str, Any]:
        """Positional and keyword arguments as the job's args (by name; ``**kwargs`` spread
        out). A send must give every required argument (``partial``: a workflow node may
        take some from ``args_from``)."""
        try:
            bound = self.signature.bind_partial(*args, **kwargs) if partial else self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"task {self.name}: {e}") from None
        out: dict[str, Any] = {}
        for key, value in bound.arguments.items():
            if self.signature.parameters[key].kind == inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            else:
                out[key] = value
        return out

    def split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The job's args as JSON and the send options among the keywords."""
        params = self.signature.parameters
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in sending.OPTIONS and k not in params}
        merged = self.defaults()
        merged.update(options)
        return encode(self.name, self.bind(args, kwargs)), sending.normalise(merged)

    def send(self, *args: Any, **kwargs: Any) -> TaskHandle[T]:
        """Enqueues a job: the task's arguments plus send options (``delay=``, ``run_at=``,
        ``deadline=``, ``unique_key=``, ``queue=``, ``priority=``, …; see docs/python.md)."""
        payload, options = self.split(args, kwargs)
        id, duplicate = self.app.client.send(self.name, payload, sending.to_json(options))
        self.app.warn_if_unserved(self.name, str(options.get("queue", self.queue)))
        return TaskHandle(self.app, id, duplicate)

    def send_in(self, conn: Any, *args: Any, **kwargs: Any) -> TaskHandle[T]:
        """Enqueues a job inside the caller's psycopg (3) transaction (``conn`` is a
        connection or cursor), through the SQL function ``remuda.enqueue``: the job exists
        if and only if that transaction commits."""
        payload, options = self.split(args, kwargs)
        statement, params = sending.enqueue_sql(self.name, payload, options)
        row = conn.execute(statement, params).fetchone()
        return TaskHandle(self.app, int(row[0]), False)

    def send_many(self, calls: Iterable[dict[str, Any]], **options: Any) -> int:
        """Enqueues one job per dict of keyword arguments in one transaction (binary COPY for
        jobs due now): how many were inserted."""
        merged = self.defaults()
        merged.update(options)
        payloads = [encode(self.name, self.bind((), dict(c))) for c in calls]
        return int(self.app.client.send_bulk(self.name, payloads, sending.to_json(sending.normalise(merged))))

    def node(self, *args: Any, **kwargs: Any) -> TaskNode:
        """A workflow node running this task: its arguments plus ``waits_for=[…]``,
        ``args_from={"arg": node}``, ``join="all"|"any"|"quorum"``, ``min_success=``,
        ``run_if=``, ``skip_if=``, ``context_from=[…]``, ``allow_failed_deps=``, ``map=``,
        ``node_id=``, ``queue=``, ``priority=``, ``max_attempts=``, ``timeout=``, ``deadline=``
        (queue, priority, attempts and timeout default to the task's). A map node
        (``map={"over": node, "pointer": "/items"}``) runs once per element, with the element
        and its position added to the args as ``item`` and ``index``."""
        from .workflow import TaskNode

        return TaskNode.of(self, args, kwargs)


def default_kind(fn: Callable[..., Any]) -> str:
    """A task's kind when the decorator names none: ``module.function``. A worker imports
    the module by its name, so a function of ``__main__`` or inside another needs a name."""
    module, qualname = fn.__module__, fn.__qualname__
    if module == "__main__" or "<locals>" in qualname:
        raise ValueError(
            f"task {qualname} needs a name (@app.task(\"name\")): defined in {module} or inside a function, "
            "its default name would differ in the worker that imports it"
        )
    return f"{module}.{qualname}"


def encode(kind: str, args: dict[str, Any]) -> str:
    """Arguments as JSON, or a clear error naming what could not be encoded."""
    try:
        return json.dumps(args, allow_nan=False, default=_refuse)
    except (TypeError, ValueError) as e:
        raise TypeError(f"task {kind}: the arguments are not JSON: {e}") from None


def _refuse(value: Any) -> Any:
    if isinstance(value, TaskResult):
        return value.to_json()
    raise TypeError(f"{type(value).__name__} is not JSON (pass plain dicts, lists, strings and numbers)")


class TaskHandle(Generic[T]):
    """A sent job: ``id``, ``duplicate`` (a unique job's holder was returned) and ``get``."""

    def __init__(self, app: App, id: int, duplicate: bool) -> None:
        self.app = app
        self.id = id
        self.duplicate = duplicate

    def __repr__(self) -> str:
        return f"TaskHandle(id={self.id})"

    def get(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[T]:
        """Waits (LISTEN/NOTIFY, no polling) for the job's final state: its result, or
        ``TaskError("WAIT_TIMEOUT")`` if ``timeout`` seconds (or ``timeout_ms``) pass first
        (``None``: no limit). Every outcome of the job is a :class:`TaskResult`, a job that
        does not exist too (``TaskError("NOT_FOUND")``); only bad arguments and database
        failures raise :class:`RemudaError`."""
        if timeout_ms is not None:
            timeout = timeout_ms / 1000
        wait = 100 * 365 * 86400.0 if timeout is None else sending.seconds("timeout", timeout)
        try:
            text = self.app.client.wait(self.id, wait)
        except RemudaError as e:
            if e.code != "NOT_FOUND":
                raise
            return TaskResult(err=TaskError("NOT_FOUND", f"there is no job {self.id}: it was never enqueued, or retention deleted it"))
        if text is None:
            return TaskResult(err=TaskError("WAIT_TIMEOUT", f"job {self.id} did not finish within {timeout}s"))
        return job_result(json.loads(text))

    async def get_async(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[T]:
        """:meth:`get` for asyncio code (the wait runs off the event loop)."""
        return await asyncio.to_thread(self.get, timeout, timeout_ms=timeout_ms)

    def info(self) -> dict[str, Any] | None:
        """The job as stored (state, attempts, errors, result), or ``None``."""
        text = self.app.client.job(self.id)
        return None if text is None else json.loads(text)

    def cancel(self) -> str:
        """Cancels the job (a running one is asked to stop): the state it had."""
        return str(self.app.client.cancel(self.id))


def job_result(job: dict[str, Any]) -> TaskResult[Any]:
    """The outcome of a job in a final state."""
    result = job.get("result")
    if isinstance(result, dict) and ("ok" in result or "err" in result):
        return TaskResult.from_json(result)
    state = job.get("state")
    if state == "cancelled":
        return TaskResult(err=TaskError("CANCELLED", f"job {job.get('id')} was cancelled"))
    if state == "expired":
        return TaskResult(err=TaskError("EXPIRED", f"job {job.get('id')} did not start before its deadline"))
    errors = job.get("errors") or []
    if errors:
        return TaskResult(err=TaskError.from_json(errors[-1]))
    return TaskResult(err=TaskError("NO_RESULT", f"job {job.get('id')} ended {state} without a result"))
