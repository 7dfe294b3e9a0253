"""Apps and tasks: ``app = remuda.App(database_url=…)``, ``@app.task("resize", …)``,
``resize.send(…)`` → :class:`TaskHandle`, ``handle.get()`` → :class:`TaskResult`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shlex
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterable, Literal, ParamSpec, Protocol, TypeVar, overload

from . import _native, schedules, sending
from .errors import InputTypeError, InputValueError
from .retry import RetryPolicy
from .result import TaskResult
from .task import AsyncResultTask, AsyncTask, ResultTask, SyncTask, Task, TaskHandle, task_class

if TYPE_CHECKING:
    from .testing import Sent
    from .workflow import Workflow, WorkflowHandle, WorkflowNode

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T", bound=Task[Any, Any])


class TaskDecorator(Protocol):
    """What ``@app.task("name", …)`` returns: it makes a plain function a
    :class:`SyncTask` and an ``async def`` an :class:`AsyncTask`."""

    # a function matches several; the first that matches is the one meant
    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, TaskResult[R]]], /) -> AsyncResultTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> AsyncTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def __call__(self, fn: Callable[P, TaskResult[R]], /) -> ResultTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def __call__(self, fn: Callable[P, R], /) -> SyncTask[P, R]: ...


def queue_limits(
    kind: str,
    max_running: int | None,
    key_limit: int | None,
    rate: tuple[int, float | dt.timedelta] | None,
    rate_burst: int | None,
    rate_per: str | None,
) -> dict[str, Any]:
    """The queue limits a task declares, checked, as the native client takes them."""
    limits: dict[str, Any] = {}
    for key, value, low in (("max_running", max_running, 0), ("key_limit", key_limit, 1), ("rate_burst", rate_burst, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputTypeError(f"task {kind}: {key}={value!r}: give an int")
        if not low <= value <= 2**31 - 1:
            raise InputValueError(f"task {kind}: {key}={value}: give an int of {low} or more")
        limits[key] = value
    if rate is not None:
        if not isinstance(rate, tuple) or len(rate) != 2 or isinstance(rate[0], bool) or not isinstance(rate[0], int):
            raise InputTypeError(f"task {kind}: rate={rate!r}: give (n, seconds), such as (100, 1) for 100 starts a second")
        count, period = rate
        seconds = sending.seconds("rate's period", period)
        if count < 1 or seconds <= 0:
            raise InputValueError(f"task {kind}: rate={rate!r}: give at least 1 start per period of more than 0 seconds")
        limits["rate"] = [count, seconds]
        if rate_per is not None:
            if rate_per not in ("queue", "kind", "key"):
                raise InputValueError(f"task {kind}: rate_per={rate_per!r}: give 'queue', 'kind' or 'key'")
            limits["rate_per"] = rate_per
    elif rate_burst is not None or rate_per is not None:
        raise InputValueError(f"task {kind}: rate_burst or rate_per without a rate: give rate=(n, seconds) too")
    return limits


def check_mapper(kind: str, mapper: dict[Any, Any]) -> None:
    """An ``exception_mapper`` maps exception classes to error codes (text), or is refused
    at the task's declaration."""
    for cls, code in mapper.items():
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise InputTypeError(f"task {kind}: exception_mapper key {cls!r} is not an exception class (such as TimeoutError)")
        if not isinstance(code, str) or not code:
            raise InputTypeError(f"task {kind}: exception_mapper[{cls.__name__}]={code!r}: give the error code as text, such as 'UPSTREAM_TIMEOUT'")


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
    defaults of every task declared on it (a task's own add to, or replace, them).
    ``tracer_provider`` makes the OpenTelemetry span of each send (the global provider when
    ``None``; none without the ``opentelemetry`` API). A SQLAlchemy-style URL naming a driver
    (``postgresql+psycopg://…``, as horsies takes) is accepted: the driver part is dropped.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        migrate: bool = True,
        retry: RetryPolicy | None = None,
        exception_mapper: dict[type[BaseException], str] | None = None,
        tracer_provider: Any = None,
    ) -> None:
        self.database_url = plain_url(database_url or os.environ.get("DATABASE_URL") or None)
        self.migrate = migrate
        #: the retry policy of every task that sets none (by default
        #: ``RetryPolicy.exponential()``: 25 attempts, 1 s doubling up to an hour, jittered)
        self.retry = retry or RetryPolicy()
        #: exception classes mapped to error codes for every task; a task's own mapper adds
        #: to it and wins for the classes both name
        self.exception_mapper: dict[type[BaseException], str] = dict(exception_mapper or {})
        #: the OpenTelemetry ``TracerProvider`` that makes the span of each send (kind
        #: ``PRODUCER``) when the ``opentelemetry`` API is installed; ``None``: the global one
        self.tracer_provider: Any = tracer_provider
        self.tasks: dict[str, Task[Any, Any]] = {}
        #: the limits tasks declare on their queues (``@app.task(max_running=…)``), set on
        #: each queue when a worker of this app starts
        self.queue_limits: dict[str, dict[str, Any]] = {}
        #: the schedules declared in code (``@app.schedule``), by name: each a
        #: ``[schedules.NAME]`` table, declared by every worker of this app as it starts
        self.schedules: dict[str, dict[str, Any]] = {}
        #: while ``remuda.testing.recording`` or ``eager`` is on: where sends go instead
        self.testing: Sent | None = None
        #: how the database is found at first use when no URL was given (else as the
        #: ``remuda`` binary finds it): ``remuda.django`` reads Django's settings then
        self.find_database: Callable[[], str] = _native.database_url
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
                    self.database_url = self.find_database()
                self._client = _native.Client(self.database_url, self.migrate)
            return self._client

    @overload
    def task(self, name: Callable[P, Coroutine[Any, Any, TaskResult[R]]], /) -> AsyncResultTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def task(self, name: Callable[P, Coroutine[Any, Any, R]], /) -> AsyncTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def task(self, name: Callable[P, TaskResult[R]], /) -> ResultTask[P, R]: ...  # type: ignore[overload-overlap]

    @overload
    def task(self, name: Callable[P, R], /) -> SyncTask[P, R]: ...

    @overload
    def task(
        self,
        name: str | None = None,
        *,
        queue: str = "default",
        priority: int = 0,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        exception_mapper: dict[type[BaseException], str] | None = None,
        batch_size: int | None = None,
        batch_wait: float | dt.timedelta | None = None,
        debounce: float | dt.timedelta | None = None,
        debounce_max: float | dt.timedelta | None = None,
        throttle: float | dt.timedelta | None = None,
        throttle_latest: bool = False,
        max_running: int | None = None,
        key_limit: int | None = None,
        rate: tuple[int, float | dt.timedelta] | None = None,
        rate_burst: int | None = None,
        rate_per: Literal["queue", "kind", "key"] | None = None,
    ) -> TaskDecorator: ...

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
        batch_size: int | None = None,
        batch_wait: float | dt.timedelta | None = None,
        debounce: float | dt.timedelta | None = None,
        debounce_max: float | dt.timedelta | None = None,
        throttle: float | dt.timedelta | None = None,
        throttle_latest: bool = False,
        max_running: int | None = None,
        key_limit: int | None = None,
        rate: tuple[int, float | dt.timedelta] | None = None,
        rate_burst: int | None = None,
        rate_per: Literal["queue", "kind", "key"] | None = None,
    ) -> Any:
        """Declares a task: ``@app.task("resize", queue="media", retry=RetryPolicy.exponential(…))``
        (or bare ``@app.task``, named after the function). Plain ``def`` and ``async def``
        functions both work; they take the job's args as keyword arguments. The task is
        typed as the function: ``send`` checks its arguments, ``get()`` gives its result.
        ``batch_size`` and ``batch_wait`` (seconds) make a task that takes batches: its one
        parameter is a list, fed by ``task.add_to_batch(key, item)``. ``debounce`` (with
        ``debounce_max``) or ``throttle`` (with ``throttle_latest``) form every send of the
        task that gives a ``unique_key`` (or ``unique_by_args``) and no formation of its own.
        ``max_running``, ``key_limit`` (running jobs per ``concurrency_key``), ``rate``
        (``(n, seconds)``: at most n starts per period, counted per ``rate_per``: the whole
        queue by default, or per kind or per key) and ``rate_burst`` are limits of the
        task's queue, set on it when a worker of the app starts, as ``remuda queue set``
        does (tasks sharing a queue must not declare different ones)."""

        def declare(fn: Callable[..., Any]) -> Task[Any, Any]:
            kind = name if isinstance(name, str) else default_kind(fn)
            if not kind.strip():
                raise InputValueError("@app.task(''): give the task a name, or use @app.task bare (named after the function)")
            if kind in self.tasks:
                raise InputValueError(f"task {kind!r} is declared twice")
            policy = retry or self.retry
            if max_attempts is not None:
                policy = dataclasses.replace(policy, max_attempts=max_attempts)
            mapper = {**self.exception_mapper, **(exception_mapper or {})}
            check_mapper(kind, mapper)
            task = task_class(fn)(self, kind, fn, queue, priority, timeout, policy, mapper)
            try:
                # checked here as a send checks them, not first at a send or in a worker
                sending.normalise(task.defaults())
            except InputTypeError as e:
                raise InputTypeError(f"task {kind}: {e.message}") from None
            except InputValueError as e:
                raise InputValueError(f"task {kind}: {e.message}") from None
            if batch_size is not None or batch_wait is not None:
                task.take_batches(batch_size, batch_wait)
            task.form_keyed(debounce=debounce, debounce_max=debounce_max, throttle=throttle, throttle_latest=throttle_latest)
            limits = queue_limits(kind, max_running=max_running, key_limit=key_limit, rate=rate, rate_burst=rate_burst, rate_per=rate_per)
            self.declare_limits(kind, queue, limits)
            self.tasks[kind] = task
            return task

        if name is not None and not isinstance(name, str):
            if not callable(name):
                raise InputTypeError(f"@app.task({name!r}): give the task's name as a str, or use @app.task bare")
            return declare(name)
        return declare

    def declare_limits(self, kind: str, queue: str, limits: dict[str, Any]) -> None:
        """Keeps the limits ``kind`` declares on ``queue``; another task of the queue
        declaring a different value for one of them is refused (one queue, one limit)."""
        known = self.queue_limits.get(queue, {})
        for key, value in limits.items():
            if key in known and known[key] != value:
                raise InputValueError(
                    f"task {kind}: {key}={value!r} on queue {queue!r}, where another task declares {key}={known[key]!r}: "
                    "a limit belongs to the queue; declare it once"
                )
        if limits:
            self.queue_limits[queue] = {**known, **limits}

    def schedule(
        self,
        cron: str | None = None,
        /,
        *,
        name: str | None = None,
        every: str | float | dt.timedelta | None = None,
        hourly: int | dict[str, int] | None = None,
        daily: str | None = None,
        weekly: dict[str, Any] | None = None,
        monthly: dict[str, Any] | None = None,
        args: dict[str, Any] | None = None,
        tz: str | None = None,
        catch_up: schedules.CatchUp | None = None,
        catch_up_limit: int | None = None,
        overlap: schedules.Overlap | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        group: str | None = None,
    ) -> Callable[[T], T]:
        """Fires the task it decorates (put it above ``@app.task``) on a schedule, as a
        worker config's ``[schedules.NAME]`` table does, with the same keys: one pattern (a
        cron expression, ``every="30s"`` or seconds, ``hourly=15``, ``daily="03:00"``,
        ``weekly={"days": ["mon"], "at": "09:30"}``, ``monthly={"day": 1, "at": "06:00"}``)
        in zone ``tz`` (default UTC), the ``args`` its jobs take (checked against the task's
        signature here), ``catch_up``, ``overlap`` and the jobs' options (the queue defaults to
        the task's). ``name`` defaults to the task's; a task with two schedules names them.

        Every worker of the app declares its schedules as it starts (created, or replaced
        when changed; one removed from the code stays until ``remuda schedule delete``), and
        whichever worker leads maintenance fires each one, exactly once per time."""
        pattern = {"cron": cron, "every": every, "hourly": hourly, "daily": daily, "weekly": weekly, "monthly": monthly}
        options = {
            "args": args,
            "tz": tz,
            "catch_up": catch_up,
            "catch_up_limit": catch_up_limit,
            "overlap": overlap,
            "queue": queue,
            "priority": priority,
            "max_attempts": max_attempts,
            "group": group,
        }

        def declare(task: T) -> T:
            if not isinstance(task, Task):
                raise InputTypeError(f"@app.schedule decorates a task, not {task!r}: put it above @app.task")
            scheduled = name if name is not None else task.name
            if scheduled in self.schedules:
                raise InputValueError(
                    f"schedule {scheduled} is declared twice (for task {self.schedules[scheduled]['kind']} and task {task.name}): "
                    "give each schedule its own name="
                )
            self.schedules[scheduled] = schedules.table(task, scheduled, pattern, dict(options))
            return task

        return declare

    def apply_limits(self, queues: Iterable[str] | None) -> None:
        """Sets the declared limits on the queues a worker serves (``None``: every queue
        with some), as ``remuda queue set`` does."""
        for queue, limits in self.queue_limits.items():
            if queues is None or queue in queues:
                self.client.limit_queue(queue, json.dumps(limits))

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
            f"(python -m remuda worker module:app --queues {shlex.quote(queue)})",
            RuntimeWarning,
            stacklevel=3,
        )

    @overload
    def workflow(
        self,
        name: str,
        nodes: Iterable[WorkflowNode[Any]],
        *,
        output: WorkflowNode[R],
        on_error: str = "fail",
        success: list[list[WorkflowNode[Any]]] | None = None,
        deadline: str | None = None,
        notify: dict[str, Any] | None = None,
    ) -> Workflow[R]: ...

    @overload
    def workflow(
        self,
        name: str,
        nodes: Iterable[WorkflowNode[Any]],
        *,
        output: None = None,
        on_error: str = "fail",
        success: list[list[WorkflowNode[Any]]] | None = None,
        deadline: str | None = None,
        notify: dict[str, Any] | None = None,
    ) -> Workflow[Any]: ...

    def workflow(
        self,
        name: str,
        nodes: Iterable[WorkflowNode[Any]],
        *,
        output: WorkflowNode[Any] | None = None,
        on_error: str = "fail",
        success: list[list[WorkflowNode[Any]]] | None = None,
        deadline: str | None = None,
        notify: dict[str, Any] | None = None,
    ) -> Workflow[Any]:
        """A workflow definition from nodes (``task.node(…)``, :func:`remuda.sleep`,
        :func:`remuda.signal`, ``other_workflow.node(…)``)."""
        from .workflow import Workflow

        return Workflow(self, name, list(nodes), output, on_error, success, deadline, notify)

    def workflow_handle(self, id: int) -> WorkflowHandle[Any]:
        """A handle on an existing run."""
        from .workflow import WorkflowHandle

        return WorkflowHandle(self, id, False)

    def handle(self, id: int) -> TaskHandle[Any]:
        """A handle on an existing job (its result as stored: ``task.handle(id)`` rebuilds
        it as the task's)."""
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
        once_wait: float | dt.timedelta | None = None,
    ) -> dict[str, Any]:
        """Runs a worker for this app's tasks in this process until SIGINT or SIGTERM, until
        ``stop`` is set, or with ``once`` until the queues are drained: a retry due within
        ``once_wait`` seconds (default 60; 0: only what is due now) is waited for (see
        :func:`remuda.worker.run`)."""
        from .worker import run

        overrides: dict[str, Any] = {}
        if once_wait is not None:
            overrides["once_wait"] = f"{round(sending.seconds('once_wait', once_wait) * 1000)}ms"
        return run(
            self, queues=queues, concurrency=concurrency, processes=processes, config=config, name=name, app_path=app_path,
            stop=stop, once=once, overrides=overrides,
        )


def default_kind(fn: Callable[..., Any]) -> str:
    """A task's kind when the decorator names none: ``module.function``. A worker imports
    the module by its name, so a function of ``__main__`` or inside another needs a name."""
    module, qualname = fn.__module__, fn.__qualname__
    if module == "__main__" or "<locals>" in qualname:
        raise InputValueError(
            f"task {qualname} needs a name (@app.task(\"name\")): defined in {module} or inside a function, "
            "its default name would differ in the worker that imports it"
        )
    return f"{module}.{qualname}"
