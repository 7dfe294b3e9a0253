"""Testing an app's tasks.

Without a database: :func:`recording` keeps what is sent instead of writing it, and
:func:`eager` also runs each send at once, here, as a worker would (its args read from their
JSON by the task's annotations, its exceptions mapped to error codes), so that ``send(…)
.get()`` returns the outcome (Celery's eager mode). Either answers what was sent:
``sent.assert_enqueued(task, args={…})``.

With a database (the jobs written as in production: unique keys, debounce, batches,
workflows): :func:`assert_enqueued` and :func:`enqueued` read the waiting jobs, and
:func:`drain` runs a worker until nothing is left to run. The pytest plugin
(``pytest_plugins = ["remuda.pytest_plugin"]``) gives each test a database of its own and
the app bound to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from . import _native, codec, running, sending
from .context import JobContext, _enter, _leave
from .errors import RemudaError
from .result import TaskError, TaskResult
from .task import Task, TaskHandle, job_result

if TYPE_CHECKING:
    from .app import App


@dataclass
class SentJob:
    """A job sent while :func:`recording` or :func:`eager` was on: its kind, args (as the
    worker reads them: JSON) and send options (``queue``, ``priority``, ``delay``,
    ``unique_key``, … as given or defaulted); with :func:`eager`, its ``state``
    (``completed``, ``failed`` or ``snoozed``) and ``result`` once it ran."""

    id: int
    kind: str
    args: Any
    options: dict[str, Any]
    state: str = "available"
    result: TaskResult[Any] | None = None
    #: the exception the body raised (eager), if it raised one
    raised: BaseException | None = field(default=None, repr=False)


class Sent:
    """What :func:`recording` and :func:`eager` yield: the jobs sent, in order, and
    assertions on them."""

    def __init__(self, app: App, run: bool, propagate: bool) -> None:
        self.app = app
        self.run = run
        self.propagate = propagate
        self.jobs: list[SentJob] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def of(self, task: Task[Any, Any] | str | None = None) -> list[SentJob]:
        """The jobs sent of ``task`` (a task or its name; ``None``: all)."""
        kind = task.name if isinstance(task, Task) else task
        return [job for job in self.jobs if kind is None or job.kind == kind]

    def assert_enqueued(self, task: Task[Any, Any] | str, args: dict[str, Any] | None = None, **options: Any) -> SentJob:
        """The job of ``task`` whose args contain ``args`` (compared as JSON: the task's
        types are encoded first) and whose options include ``options``; an
        ``AssertionError`` listing what was sent when there is none."""
        found = self._matching(task, args, options)
        if not found:
            raise AssertionError(f"no job of {_kind(task)} with args {args!r} {options or ''} was sent; sent: {self._shown()}")
        return found[0]

    def refute_enqueued(self, task: Task[Any, Any] | str, args: dict[str, Any] | None = None, **options: Any) -> None:
        """An ``AssertionError`` if a job of ``task`` matching ``args`` and ``options`` was sent."""
        found = self._matching(task, args, options)
        if found:
            raise AssertionError(f"{len(found)} job(s) of {_kind(task)} with args {args!r} {options or ''} were sent: {found!r}")

    def record(self, task: Task[Any, Any], payload: str, options: dict[str, Any]) -> TaskHandle[Any]:
        """Keeps a send (and with :func:`eager`, runs it): its handle."""
        # refused as the client refuses it before writing (names, limits, size, deadline)
        _native.check_send(task.name, payload, sending.to_json(options))
        if task.batch is not None:
            # a batch item: its job's args are the list of its batch's items
            payload = f"[{payload}]"
        with self._lock:
            job = SentJob(next(self._ids), task.name, json.loads(payload), dict(options))
            self.jobs.append(job)
        if self.run:
            self._run(task, job, payload)
        return SentHandle(self.app, job, task.codec)

    def _run(self, task: Task[Any, Any], job: SentJob, payload: str) -> None:
        ctx = JobContext(
            id=job.id,
            kind=task.name,
            queue=str(job.options.get("queue", task.queue)),
            attempt=1,
            max_attempts=int(job.options.get("max_attempts") or task.retry.max_attempts),
            worker_id="eager",
            group=job.options.get("group"),
            steps=MemorySteps(),
        )
        (status, text), job.raised = _attempt(task, payload, ctx)
        if status == "ok":
            job.state, job.result = "completed", TaskResult(ok=json.loads(text))
        elif status == "snooze":
            job.state, job.result = "snoozed", TaskResult(err=TaskError("SNOOZED", f"the job sleeps {text}s: eager runs do not wait"))
        else:
            job.state, job.result = "failed", job_result({"id": job.id, "state": "failed", "result": {"err": json.loads(text)}})
        if self.propagate and job.raised is not None and status == "err":
            raise job.raised

    def _matching(self, task: Task[Any, Any] | str, args: dict[str, Any] | None, options: dict[str, Any]) -> list[SentJob]:
        wanted = _json_args(task, args)
        # (as a send stores them: seconds for a timedelta, …)
        options = sending.normalise(dict(options))
        return [
            job
            for job in self.of(task)
            if (wanted is None or _contains(job.args, wanted)) and all(job.options.get(k) == v for k, v in options.items())
        ]

    def _shown(self) -> str:
        return ", ".join(f"{j.kind}({json.dumps(j.args)})" for j in self.jobs) or "nothing"


class MemorySteps:
    """The steps of an eager run, kept in memory: a step runs once and is replayed after,
    and a durable sleep ends at once (a test does not wait for it)."""

    def __init__(self) -> None:
        self.steps: dict[str, str] = {}

    def recorded(self, name: str) -> str | None:
        return self.steps.get(name)

    def record(self, name: str, output: str) -> str:
        return self.steps.setdefault(name, output)

    def sleep(self, until: str) -> float | None:
        return None


class SentHandle(TaskHandle[Any]):
    """The handle of a job sent while :func:`recording` or :func:`eager` was on: ``get``
    returns its outcome (eager) at once."""

    def __init__(self, app: App, job: SentJob, decoder: codec.TaskCodec) -> None:
        super().__init__(app, job.id, False, decoder)
        self.job = job

    def get(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[Any]:
        if self.job.result is None:
            return TaskResult(err=TaskError("WAIT_TIMEOUT", f"job {self.id} was recorded, not run: use remuda.testing.eager to run sends"))
        result = self.job.result
        if self.decoder is not None and result.is_ok():
            return TaskResult(ok=self.decoder.decode_result(result.ok))
        return result

    async def get_async(self, timeout: float | None = None, *, timeout_ms: int | None = None) -> TaskResult[Any]:
        return self.get(timeout, timeout_ms=timeout_ms)

    def info(self) -> dict[str, Any] | None:
        result = None if self.job.result is None else self.job.result.to_json()
        return {"id": self.job.id, "kind": self.job.kind, "state": self.job.state, "args": self.job.args, "result": result}

    def cancel(self) -> str:
        if self.job.state in ("completed", "failed"):
            raise RemudaError("WRONG_STATE", f"job {self.id} already ran ({self.job.state}): it cannot be cancelled")
        self.job.state = "cancelled"
        return "cancelled"


@contextlib.contextmanager
def recording(app: App) -> Iterator[Sent]:
    """Within it, ``app``'s task sends (``send``, ``send_many``, ``send_in``,
    ``add_to_batch``, ``options(…).send``) are checked as usual and kept, not written: no
    database is needed. Workflows are not covered (they need the database)."""
    with _testing(app, Sent(app, run=False, propagate=False)) as sent:
        yield sent


@contextlib.contextmanager
def eager(app: App, *, propagate: bool = False) -> Iterator[Sent]:
    """:func:`recording`, and each send runs at once, in the caller's thread, as a worker
    would run its first attempt: ``handle.get()`` returns its outcome (retries are not run;
    steps run and replay as in a worker, kept in memory, and a durable sleep ends at once).
    ``propagate``: an exception the body raises is raised from the send itself, with its
    traceback. A send from a task's body runs in turn."""
    with _testing(app, Sent(app, run=True, propagate=propagate)) as sent:
        yield sent


@contextlib.contextmanager
def _testing(app: App, sent: Sent) -> Iterator[Sent]:
    before = app.testing
    app.testing = sent
    try:
        yield sent
    finally:
        app.testing = before


@contextlib.contextmanager
def bound(app: App, database_url: str) -> Iterator[App]:
    """Within it, ``app`` works on ``database_url`` (a test's database): its client is made
    afresh there, and the app's own database and client come back after."""
    with app._lock:
        before = (app.database_url, app._client, app._checked)
        app.database_url, app._client, app._checked = database_url, None, set()
    try:
        yield app
    finally:
        with app._lock:
            app.database_url, app._client, app._checked = before


def enqueued(app: App, task: Task[Any, Any] | str, args: dict[str, Any] | None = None, queue: str | None = None) -> list[dict[str, Any]]:
    """The jobs of ``task`` waiting in the database (available or scheduled), whose args
    contain ``args`` (the task's types encoded first), in ``queue`` if given: each as
    ``handle.info()`` gives it."""
    wanted = _json_args(task, args)
    found: list[dict[str, Any]] = []
    for state in ("available", "scheduled"):
        after: str | None = None
        while True:
            filter = {"state": state, "kind": _kind(task), "queue": queue, "args": wanted, "limit": 1000, "after": after}
            page = json.loads(app.client.jobs(json.dumps(filter)))
            found.extend(page["jobs"])
            after = page["next"]
            if after is None:
                break
    return found


def assert_enqueued(app: App, task: Task[Any, Any] | str, args: dict[str, Any] | None = None, queue: str | None = None) -> dict[str, Any]:
    """The first job of ``task`` waiting in the database whose args contain ``args`` (see
    :func:`enqueued`); an ``AssertionError`` saying what waits when there is none (Oban's
    ``assert_enqueued``)."""
    found = enqueued(app, task, args, queue)
    if not found:
        waiting = [(j["kind"], j["args"]) for j in enqueued(app, task)]
        raise AssertionError(f"no waiting job of {_kind(task)} with args {args!r}{f' in queue {queue!r}' if queue else ''}; waiting of that kind: {waiting or 'none'}")
    return found[0]


def refute_enqueued(app: App, task: Task[Any, Any] | str, args: dict[str, Any] | None = None, queue: str | None = None) -> None:
    """An ``AssertionError`` if a job of ``task`` matching ``args`` waits in the database."""
    found = enqueued(app, task, args, queue)
    if found:
        raise AssertionError(f"{len(found)} job(s) of {_kind(task)} with args {args!r} wait: {[j['id'] for j in found]}")


def drain(app: App, queues: list[str] | None = None) -> dict[str, Any]:
    """Runs a worker of ``app`` in this process until its queues have nothing left to run
    now (retries due later stay scheduled): its report (``completed``, ``failed``, …)."""
    return app.run_worker(queues=queues, once=True, once_wait=0)


def _kind(task: Task[Any, Any] | str) -> str:
    return task.name if isinstance(task, Task) else task


def _json_args(task: Task[Any, Any] | str, args: dict[str, Any] | None) -> Any:
    """``args`` as the job's JSON holds them (the task's types encoded)."""
    if args is None:
        return None
    return json.loads(codec.dumps(args))


def _contains(have: Any, want: Any) -> bool:
    """PostgreSQL's ``@>`` on JSON: objects by key (recursively), arrays by element."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and all(any(_contains(h, w) for h in have) for w in want)
    return bool(have == want)


def _attempt(task: Task[Any, Any], payload: str, ctx: JobContext) -> tuple[running.Outcome, BaseException | None]:
    """One attempt as the worker runs it (``remuda.running``): its outcome, and the
    exception the body raised, if any."""
    token = _enter(ctx)
    try:
        args = running.prepare(task, payload, ctx)
        value = task.fn(**args)
        if task.is_async:
            value = _run_coroutine(value)
        return running.encode(task, value), None
    except BaseException as e:  # noqa: BLE001 - every failure becomes the job's error
        return running.failure(task, e), e
    finally:
        _leave(token)


def _run_coroutine(coroutine: Any) -> Any:
    """Runs a coroutine to its end from synchronous code: here when no event loop runs in
    this thread, else on a loop of its own in another thread (the caller's loop waits)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    out: list[Any] = []
    failed: list[BaseException] = []
    # (the job's context, current_job() included, goes with it)
    context = contextvars.copy_context()

    def run() -> None:
        try:
            out.append(context.run(asyncio.run, coroutine))
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(e)

    thread = threading.Thread(target=run, name="remuda-eager")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out[0]
