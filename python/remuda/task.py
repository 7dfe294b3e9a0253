"""Declared tasks and sent jobs: ``@app.task`` makes a :class:`SyncTask` or an
:class:`AsyncTask`, generic in the function's parameters and result; ``send`` checks its
arguments against them and returns a :class:`TaskHandle` whose ``get()`` is a
:class:`TaskResult` of that result."""

from __future__ import annotations

import asyncio
import atexit
import datetime as dt
import inspect
import json
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Generic, Iterable, Optional, ParamSpec, TypeVar, overload

from . import _native, codec, connections, sending
from .errors import InputTypeError, InputValueError, RemudaError
from .result import TaskError, TaskResult
from .retry import RetryPolicy

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .app import App
    from .sending import SendOptions
    from .workflow import NodeOptions, TaskNode

P = ParamSpec("P")
R = TypeVar("R")


#: the argument types JSON stores and gives back unchanged (subclasses, such as enums, excluded)
_AS_IS = frozenset({int, str, bool, type(None)})


class Task(Generic[P, R]):
    """A declared task: ``send`` it, ``options(…)`` then send it, or make a workflow
    ``node`` of it. ``P`` are the function's parameters, ``R`` what it returns (for an
    ``async def``, what it returns when awaited)."""

    def __init__(
        self,
        app: App,
        name: str,
        fn: Callable[P, Any],
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
        self.signature = signature_of(fn)
        for param in self.signature.parameters.values():
            if param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
                raise InputTypeError(
                    f"task {name}: parameter {param.name!r} is positional-only or *args; a job's args are passed by name, "
                    "so give every parameter a name (**kwargs is fine)"
                )
        #: how each argument and the result are rebuilt from JSON (from the annotations)
        self.codec = codec.TaskCodec(fn, self.signature)
        #: for a task that takes batches: its batch size, its wait in seconds, and the one
        #: parameter that takes the list (see :meth:`take_batches`)
        self.batch: tuple[int, float, str] | None = None
        #: the debounce or throttle of its keyed sends (see :meth:`form_keyed`)
        self.keyed: dict[str, Any] = {}
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)

    def __repr__(self) -> str:
        return f"<remuda task {self.name!r}>"

    def take_batches(self, size: int | None, wait: float | dt.timedelta | None) -> None:
        """Makes this a task that takes batches (``@app.task(batch_size=…, batch_wait=…)``):
        its one parameter receives the list of the args of every :meth:`add_to_batch` of a
        batch, run when ``size`` have joined or ``wait`` seconds have passed since the first."""
        if size is None or wait is None:
            raise InputValueError(f"task {self.name}: a task that takes batches needs both batch_size and batch_wait")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InputValueError(f"task {self.name}: batch_size={size!r}: give an int of 1 or more")
        seconds = sending.seconds("batch_wait", wait)
        if seconds <= 0:
            raise InputValueError(f"task {self.name}: batch_wait must be more than zero")
        params = list(self.signature.parameters.values())
        if len(params) != 1 or params[0].kind == inspect.Parameter.VAR_KEYWORD:
            raise InputTypeError(
                f"task {self.name}: a task that takes batches has one parameter, the list of its batch's args (such as events: list[Event])"
            )
        self.batch = (size, seconds, params[0].name)

    def add_to_batch(self, key: str, item: Any) -> TaskHandle[R]:
        """Adds ``item`` to the batch of ``key``: enqueues with one key accumulate into one
        job whose argument is the list of their items (in enqueue order), run when the
        task's ``batch_size`` have joined or its ``batch_wait`` has passed since the first.
        Returns the batch's handle, whose ``joined`` says whether the item joined a batch
        that was waiting (``False``: it started a new one). The item is checked against the
        parameter's annotation here, so that a bad one is refused at once rather than
        failing its whole batch."""
        payload, merged = self._batch_item(key, item)
        if self.app.testing is not None:
            return self.app.testing.record(self, payload, merged)
        with sending.send_span(self.app.tracer_provider, str(merged.get("queue", self.queue)), 1, merged) as (merged, sent):
            id, duplicate, joined = self.app.client.send(self.name, payload, sending.to_json(merged))
            sent(id)
        return TaskHandle(self.app, id, duplicate, self.codec, joined=joined)

    def _batch_item(self, key: str, item: Any) -> tuple[str, dict[str, Any]]:
        """The item as its job's args, checked as the task will read it, and the options of
        its batch."""
        if self.batch is None:
            raise InputTypeError(f"task {self.name} takes no batches: declare it with batch_size= and batch_wait=")
        size, wait, param = self.batch
        try:
            payload = codec.dumps(item)
            # checked as the task will read it, so that one bad item cannot fail its batch
            self.codec.decode_args(self.name, {param: [json.loads(payload)]})
        except (TypeError, ValueError, codec.BadArgs) as e:
            raise InputTypeError(f"task {self.name}: the batch item does not fit {param}: {e}") from None
        merged = sending.grouped(sending.normalise(self.defaults()))
        merged.update({"batch_key": key, "batch_size": size, "batch_wait": wait})
        return payload, merged

    def add_to_batch_in(self, conn: Any, key: str, item: Any) -> TaskHandle[R]:
        """:meth:`add_to_batch` inside the caller's psycopg (3) transaction (``conn`` is a
        connection or cursor), through the SQL function ``remuda.enqueue_job``: the item joins
        its batch if and only if that transaction commits (``joined`` says whether it joined
        one that was waiting)."""
        payload, merged = self._batch_item(key, item)
        return self._send_sql(conn, payload, merged)

    def form_keyed(
        self,
        *,
        debounce: float | dt.timedelta | None = None,
        debounce_max: float | dt.timedelta | None = None,
        throttle: float | dt.timedelta | None = None,
        throttle_latest: bool = False,
    ) -> None:
        """Declares the task's debounce (``@app.task(debounce=…, debounce_max=…)``) or
        throttle (``throttle=…, throttle_latest=…``): every send of it that gives a
        ``unique_key`` (or ``unique_by_args``) and no formation of its own takes it. Checked
        here as a send's own options are."""
        keyed: dict[str, Any] = {}
        for option, value in (("debounce", debounce), ("debounce_max", debounce_max), ("throttle", throttle)):
            if value is not None:
                keyed[option] = value
        if throttle_latest:
            keyed["throttle_latest"] = True
        if not keyed:
            return
        if debounce is not None and throttle is not None:
            raise InputValueError(f"task {self.name}: debounce and throttle are two ways to form one job from many sends: give one of them")
        if debounce_max is not None and debounce is None:
            raise InputValueError(f"task {self.name}: debounce_max caps a debounce: give debounce too")
        if throttle_latest and throttle is None:
            raise InputValueError(f"task {self.name}: throttle_latest is for a throttle: give throttle too")
        for option in ("debounce", "throttle"):
            if option in keyed and not sending.seconds(option, keyed[option]) > 0:
                raise InputValueError(f"task {self.name}: {option} must be more than zero")
        if debounce is not None and debounce_max is not None:
            if sending.seconds("debounce_max", debounce_max) < sending.seconds("debounce", debounce):
                raise InputValueError(f"task {self.name}: debounce_max is shorter than the debounce: give a debounce_max of at least the debounce")
        try:
            sending.normalise({**keyed, "unique_key": "k"})
        except InputTypeError as e:
            raise InputTypeError(f"task {self.name}: {e.message}") from None
        except InputValueError as e:
            raise InputValueError(f"task {self.name}: {e.message}") from None
        self.keyed = keyed

    def keyed_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The task's debounce or throttle, for a send with ``options`` that gives a unique key
        and no formation of its own (its own options then come on top)."""
        # the send's own formation, or what a formation takes no part of (then a plain unique
        # job, as asked)
        own = any(
            options.get(k) is not None
            for k in ("debounce", "throttle", "batch_key", "unique_states", "unique_period", "delay", "run_at", "deadline")
        )
        keyed = options.get("unique_key") is not None or bool(options.get("unique_by_args"))
        return dict(self.keyed) if keyed and not own else {}

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
        take some from ``args_from``). A task that takes batches is fed by
        :meth:`add_to_batch` only."""
        if self.batch is not None:
            raise InputTypeError(f"task {self.name} takes batches: add to one with add_to_batch(key, item)")
        try:
            bound = self.signature.bind_partial(*args, **kwargs) if partial else self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise InputTypeError(f"task {self.name}{self.signature}: {e}") from None
        out: dict[str, Any] = {}
        for key, value in bound.arguments.items():
            if self.signature.parameters[key].kind == inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            else:
                out[key] = value
        return out

    def encode(self, args: dict[str, Any]) -> str:
        """The job's args as JSON (see :mod:`remuda.codec` for the types beyond JSON),
        each checked against its parameter's annotation as the worker will read it."""
        payload = self.codec.encode_args(self.name, args)
        if self.codec.params:
            # the JSON as the worker will read it (a datetime sent to a str parameter is
            # text); values JSON keeps as they are need no round trip (a tenth of a bulk send)
            plain = all(type(value) in _AS_IS for value in args.values())
            self.codec.check_args(self.name, args if plain else json.loads(payload))
        return payload

    def split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The job's args as JSON and the send options among the keywords (an option that
        is also a parameter's name is the argument)."""
        params = self.signature.parameters
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in sending.OPTIONS and k not in params}
        return self.encode(self.bind(args, kwargs)), options

    def send(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueues a job with the task's arguments (checked against its signature). Send
        options (``delay=``, ``unique_key=``, …) go through :meth:`options`; given here
        among the arguments they are taken too, untyped."""
        payload, options = self.split(args, dict(kwargs))
        return self._send(payload, options)

    def send_in(self, conn: Any, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Enqueues a job inside the caller's transaction (``conn``: a psycopg 3 connection
        or cursor, a SQLAlchemy ``Connection`` or ``Session``, Django's connection, a
        psycopg2 connection or cursor; see :mod:`remuda.connections`), through the SQL
        function ``remuda.enqueue_job``
        (``remuda.enqueue``'s, answering whether it was a duplicate or joined): the job exists
        if and only if that transaction commits."""
        payload, options = self.split(args, dict(kwargs))
        return self._send_in(conn, payload, options)

    async def send_in_async(self, conn: Any, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """:meth:`send_in` on the caller's async connection (a psycopg ``AsyncConnection`` or
        ``AsyncCursor``, a SQLAlchemy ``AsyncConnection`` or ``AsyncSession``): the job
        exists if and only if that transaction commits."""
        payload, options = self.split(args, dict(kwargs))
        return await self._send_in_async(conn, payload, options)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[P, R]:
        """The arguments of one call of the task, checked by type checkers as a send's are:
        what :meth:`send_many` takes (``task.send_many([task.call(a=1), task.call(a=2)])``),
        and a typed workflow node (``task.call(a=1).node(waits_for=[b])``)."""
        return Call(self, args, dict(kwargs))

    def send_many(self, calls: Iterable[Call[P, R] | dict[str, Any]], **options: Unpack[SendOptions]) -> int:
        """Enqueues one job per call in one transaction (binary COPY for jobs due now): each a
        :meth:`call` (typed as the task's arguments) or a dict of keyword arguments (checked
        when sent); how many were inserted."""
        payloads = [
            self.encode(self.bind(c.args, c.kwargs) if isinstance(c, Call) else self.bind((), dict(c))) for c in calls
        ]
        given = dict(options)
        merged = sending.grouped(sending.normalise({**self.defaults(), **self.keyed_options(given), **given}))
        if self.app.testing is not None:
            return len([self.app.testing.record(self, payload, merged) for payload in payloads])
        with sending.send_span(self.app.tracer_provider, str(merged.get("queue", self.queue)), len(payloads), merged) as (merged, _):
            return int(self.app.client.send_bulk(self.name, payloads, sending.to_json(merged)))

    def options(self, **options: Unpack[SendOptions]) -> Sending[P, R]:
        """The task with send options: ``charge.options(delay=60, unique_key="o-1").send(order_id="o-1")``
        (every option in ``remuda.sending.SendOptions``; checked here)."""
        sending.normalise(dict(options))
        return Sending(self, dict(options))

    def handle(self, id: int) -> TaskHandle[R]:
        """A handle on an existing job of this task (its result rebuilt as the task's)."""
        return TaskHandle(self.app, id, False, self.codec)

    def find_by_key(self, key: str) -> list[TaskHandle[R]]:
        """Handles on the jobs of this task that hold ``key``, newest first: the job waiting
        under it as its unique, debounce, throttle or batch key (a debounced, throttled or
        batched job holds it only while it waits), or a unique job running or finished in one
        of its unique states. ``handle.cancel()`` cancels one."""
        if not isinstance(key, str):
            raise InputTypeError(f"find_by_key: the key is a str, not {type(key).__name__}")
        return [self.handle(id) for id in self.app.client.find_by_key(self.name, key)]

    @overload
    def node(self, *args: Any, map: dict[str, Any], **kwargs: Any) -> TaskNode[list[R]]: ...

    @overload
    def node(self, *args: Any, map: None = None, **kwargs: Any) -> TaskNode[R]: ...

    def node(self, *args: Any, map: dict[str, Any] | None = None, **kwargs: Any) -> TaskNode[Any]:
        """A workflow node running this task: its arguments plus ``waits_for=[…]``,
        ``args_from={"arg": node}``, ``join="all"|"any"|"quorum"``, ``min_success=``,
        ``run_if=``, ``skip_if=``, ``context_from=[…]``, ``allow_failed_deps=``, ``map=``,
        ``node_id=``, ``queue=``, ``priority=``, ``max_attempts=``, ``timeout=``, ``deadline=``
        (queue, priority, attempts and timeout default to the task's). A map node
        (``map={"over": node, "pointer": "/items"}``) runs once per element, with the element
        and its position added to the args as ``item`` and ``index``; its result is the list
        of the elements' results."""
        from .workflow import TaskNode

        if map is not None:
            kwargs["map"] = map
        return TaskNode.of(self, args, kwargs)

    def _send(self, payload: str, options: dict[str, Any]) -> TaskHandle[R]:
        merged = sending.grouped(sending.normalise({**self.defaults(), **self.keyed_options(options), **options}))
        if self.app.testing is not None:
            return self.app.testing.record(self, payload, merged)
        queue = str(merged.get("queue", self.queue))
        with sending.send_span(self.app.tracer_provider, queue, 1, merged) as (merged, sent):
            id, duplicate, joined = self.app.client.send(self.name, payload, sending.to_json(merged))
            sent(id)
        self.app.warn_if_unserved(self.name, queue)
        return TaskHandle(self.app, id, duplicate, self.codec, joined=joined)

    def _send_in(self, conn: Any, payload: str, options: dict[str, Any]) -> TaskHandle[R]:
        merged = sending.grouped(sending.normalise({**self.defaults(), **self.keyed_options(options), **options}))
        return self._send_sql(conn, payload, merged)

    def _send_sql(self, conn: Any, payload: str, merged: dict[str, Any]) -> TaskHandle[R]:
        """Enqueues through SQL on the caller's connection: the handle says whether a unique
        job's holder was returned (``duplicate``) or the job joined one that was waiting."""
        if self.app.testing is not None:
            return self.app.testing.record(self, payload, merged)
        queue = str(merged.get("queue", self.queue))
        with sending.send_span(self.app.tracer_provider, queue, 1, merged) as (merged, sent):
            statement, params = sending.enqueue_sql(self.name, payload, merged)
            row = connections.fetch_one(conn, statement, params)
            sent(int(row[0]))
        return TaskHandle(self.app, int(row[0]), bool(row[2]), self.codec, joined=bool(row[1]))

    async def _send_in_async(self, conn: Any, payload: str, options: dict[str, Any]) -> TaskHandle[R]:
        merged = sending.grouped(sending.normalise({**self.defaults(), **self.keyed_options(options), **options}))
        if self.app.testing is not None:
            return self.app.testing.record(self, payload, merged)
        queue = str(merged.get("queue", self.queue))
        with sending.send_span(self.app.tracer_provider, queue, 1, merged) as (merged, sent):
            statement, params = sending.enqueue_sql(self.name, payload, merged)
            row = await connections.fetch_one_async(conn, statement, params)
            sent(int(row[0]))
        return TaskHandle(self.app, int(row[0]), bool(row[2]), self.codec, joined=bool(row[1]))


class SyncTask(Task[P, R]):
    """A task of a plain ``def``: calling it runs the function here."""

    def __init__(self, app: App, name: str, fn: Callable[P, R], *rest: Any) -> None:
        super().__init__(app, name, fn, *rest)
        self._call = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._call(*args, **kwargs)


class AsyncTask(Task[P, R]):
    """A task of an ``async def``: calling it returns the coroutine, as the function does."""

    def __init__(self, app: App, name: str, fn: Callable[P, Coroutine[Any, Any, R]], *rest: Any) -> None:
        super().__init__(app, name, fn, *rest)
        self._call = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self._call(*args, **kwargs)


class ResultTask(Task[P, R]):
    """A task of a plain ``def`` returning ``TaskResult[R]``: its jobs' results are ``R``s
    (the error is stored apart); calling it returns the ``TaskResult``."""

    def __init__(self, app: App, name: str, fn: Callable[P, TaskResult[R]], *rest: Any) -> None:
        super().__init__(app, name, fn, *rest)
        self._call = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> TaskResult[R]:
        return self._call(*args, **kwargs)


class AsyncResultTask(Task[P, R]):
    """A task of an ``async def`` returning ``TaskResult[R]`` (see :class:`ResultTask`)."""

    def __init__(self, app: App, name: str, fn: Callable[P, Coroutine[Any, Any, TaskResult[R]]], *rest: Any) -> None:
        super().__init__(app, name, fn, *rest)
        self._call = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, TaskResult[R]]:
        return self._call(*args, **kwargs)


def task_class(fn: Callable[..., Any]) -> Callable[..., Task[Any, Any]]:
    """The class a function's task is: by ``async`` and by a ``TaskResult`` return."""
    returns_result = codec.returns_task_result(fn)
    if inspect.iscoroutinefunction(fn):
        return AsyncResultTask if returns_result else AsyncTask
    return ResultTask if returns_result else SyncTask


class Sending(Generic[P, R]):
    """A task with send options (:meth:`Task.options`): ``send``, ``send_in`` and
    ``send_many`` as the task's, with those options."""

    def __init__(self, task: Task[P, R], options: dict[str, Any]) -> None:
        self.task = task
        self.opts = options

    def send(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """:meth:`Task.send` with these options."""
        payload, extra = self.task.split(args, dict(kwargs))
        return self.task._send(payload, {**self.opts, **extra})

    def send_in(self, conn: Any, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """:meth:`Task.send_in` with these options."""
        payload, extra = self.task.split(args, dict(kwargs))
        return self.task._send_in(conn, payload, {**self.opts, **extra})

    async def send_in_async(self, conn: Any, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """:meth:`Task.send_in_async` with these options."""
        payload, extra = self.task.split(args, dict(kwargs))
        return await self.task._send_in_async(conn, payload, {**self.opts, **extra})

    def send_many(self, calls: Iterable[Call[P, R] | dict[str, Any]]) -> int:
        """:meth:`Task.send_many` with these options."""
        return self.task.send_many(calls, **self.opts)


class Call(Generic[P, R]):
    """The arguments of one call of a task (``task.call(…)``), typed as the task's
    parameters: what ``send_many`` takes, and a workflow node with :meth:`node`."""

    def __init__(self, task: Task[P, R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.task = task
        self.args = args
        self.kwargs = kwargs

    def node(self, **options: Unpack[NodeOptions]) -> TaskNode[R]:
        """A workflow node running the task with these arguments, its node options typed
        (``charge.call(order_id="o-1").node(waits_for=[a], node_id="charge")``). Arguments
        filled from other nodes (``args_from``) or a map's elements are given to the untyped
        :meth:`Task.node`, which leaves them out."""
        from .workflow import TaskNode

        return TaskNode.of(self.task, self.args, dict(self.kwargs), dict(options))


class TaskHandle(Generic[R]):
    """A sent job: ``id``, ``duplicate`` (a unique job's holder was returned), ``joined``
    (the send was folded into a debounced, throttled or batched job that was waiting, whose
    id this is) and ``get``."""

    def __init__(
        self, app: App, id: int, duplicate: bool, decoder: codec.TaskCodec | None = None, *, joined: bool = False
    ) -> None:
        self.app = app
        self.id = id
        self.duplicate = duplicate
        self.joined = joined
        self.decoder = decoder

    def __repr__(self) -> str:
        return f"TaskHandle(id={self.id})"

    def get(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[R]:
        """Waits (LISTEN/NOTIFY, no polling) for the job's final state: its result, or
        ``TaskError("WAIT_TIMEOUT")`` if ``timeout`` seconds (or ``timeout_ms``) pass first
        (``None``: no limit). Every outcome of the job is a :class:`TaskResult`, a job that
        does not exist too (``TaskError("NOT_FOUND")``); only bad arguments and database
        failures raise :class:`RemudaError`."""
        wait = wait_seconds(timeout, timeout_ms)
        try:
            text = self.app.client.wait(self.id, wait)
        except RemudaError as e:
            return self._missing(e)
        return self._outcome(text, timeout if timeout_ms is None else timeout_ms / 1000)

    async def get_async(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[R]:
        """:meth:`get` for asyncio code: the wait is the Rust client's, on its own runtime,
        and holds no thread while it waits."""
        wait = wait_seconds(timeout, timeout_ms)
        try:
            text = await native_wait(lambda done: self.app.client.wait_callback(self.id, wait, done))
        except RemudaError as e:
            return self._missing(e)
        return self._outcome(text, timeout if timeout_ms is None else timeout_ms / 1000)

    def info(self) -> dict[str, Any] | None:
        """The job as stored (state, attempts, errors, result), or ``None``."""
        text = self.app.client.job(self.id)
        return None if text is None else dict(json.loads(text))

    def cancel(self) -> str:
        """Cancels the job, and says what happened: ``"cancelled"`` (it was waiting: it will
        not run), ``"stopping"`` (it was running: its body is asked to stop, and the job ends
        cancelled), or ``"already cancelled"``. A finished job cannot be cancelled
        (``RemudaError`` ``WRONG_STATE``)."""
        was = str(self.app.client.cancel(self.id))
        return {"running": "stopping", "cancelled": "already cancelled"}.get(was, "cancelled")

    def _missing(self, e: RemudaError) -> TaskResult[R]:
        if e.code != "NOT_FOUND":
            raise e
        return TaskResult(err=TaskError("NOT_FOUND", f"there is no job {self.id}: it was never enqueued, or retention deleted it"))

    def _outcome(self, text: str | None, timeout: float | None) -> TaskResult[R]:
        if text is None:
            return TaskResult(err=TaskError("WAIT_TIMEOUT", f"job {self.id} did not finish within {timeout}s"))
        result: TaskResult[R] = job_result(json.loads(text))
        if self.decoder is not None and result.is_ok():
            return TaskResult(ok=self.decoder.decode_result(result.ok))
        return result


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """The function's signature with its annotations resolved where they can be (so that
    messages read ``add(a: int, b: int) -> int``, not ``'int'``)."""
    try:
        return inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - a name that cannot be resolved leaves the text
        return inspect.signature(fn)


def wait_seconds(timeout: float | None, timeout_ms: int | None) -> float:
    """A wait's limit in seconds (no limit: a century)."""
    if timeout_ms is not None:
        return sending.seconds("timeout_ms", timeout_ms) / 1000
    return 100 * 365 * 86400.0 if timeout is None else sending.seconds("timeout", timeout)


Settle = Callable[[Optional[str], Optional[BaseException]], None]

# a wait's callback still leaving Python on the client's thread when the program ends is let
# finish before the interpreter is torn down under it (which aborted the process)
atexit.register(_native.finish_waits)


async def native_wait(start: Callable[[Settle], _native.Waiting]) -> str | None:
    """Awaits a wait of the Rust client started by ``start(done)`` on its own runtime (no
    thread held): what it gave, or the error it raised. A wait given up (the awaiting task
    cancelled) is stopped at once."""
    future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    waiting = start(resolver(future))
    try:
        return await future
    finally:
        waiting.cancel()


def resolver(future: asyncio.Future[str | None]) -> Settle:
    """What the Rust client calls, from its own thread, when a wait ends: the future is set
    on its event loop."""
    loop = future.get_loop()

    def resolve(text: str | None, error: BaseException | None) -> None:
        def settle() -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(text)

        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:
            # the loop was closed before the wait ended: nobody awaits it any more
            pass

    return resolve


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
