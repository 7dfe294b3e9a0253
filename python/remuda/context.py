"""What a running task can know of its job: :func:`job` (typed as always there, raising
outside a task body) and :func:`current_job` (``None`` outside one)."""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InputValueError, RemudaError

if TYPE_CHECKING:
    from .steps import StepStore


class StopFlag(threading.Event):
    """The flag a job's stop sets: a ``threading.Event`` whose ``is_set()`` and ``wait()``
    answering ``True`` count as the body seeing the stop (however it reads it)."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = "shutdown"
        #: whether the body read the flag as set
        self.seen = False

    def ask(self, reason: str) -> None:
        """Sets the flag for ``reason``; a later reason does not replace the first (the
        worker's calls come from its dispatcher, and at its stop, when the reason is moot)."""
        if not super().is_set():
            self.reason = reason
        super().set()

    def asked(self) -> bool:
        """Whether a stop was asked (the worker's look: not the body seeing it)."""
        return super().is_set()

    def is_set(self) -> bool:
        if super().is_set():
            self.seen = True
            return True
        return False

    def wait(self, timeout: float | None = None) -> bool:
        if super().wait(timeout):
            self.seen = True
            return True
        return False


@dataclass
class JobContext:
    """The job a task body is running: its id, attempt, and whether it must stop.

    A long task checks :meth:`is_cancelled` (or :attr:`stop_reason`) and returns when it is
    asked to stop: the job was cancelled (``"cancel"``), the worker shuts down
    (``"shutdown"``), the attempt ran out of time (``"timeout"``), or the worker lost the
    database long enough that the job may run elsewhere (``"fenced"``). Async tasks are also
    cancelled (``asyncio.CancelledError``).

    A body that saw the stop (``is_cancelled()`` answered ``True``, ``stop_reason`` was not
    ``None``, :meth:`wait_cancelled` returned ``True``, or its async task was cancelled) was cut
    short: whatever it returns, its job is given back for another worker without spending
    an attempt (a cancelled job stays cancelled). A body that finishes without looking
    completes as usual.
    """

    id: int
    kind: str
    queue: str
    attempt: int
    max_attempts: int
    worker_id: str
    timeout: float | None = None
    workflow: dict[str, Any] | None = None
    cancelled: StopFlag = field(default_factory=lambda: StopFlag())
    #: where :func:`remuda.step` reads and records this run's steps (``None`` outside a worker)
    steps: StepStore | None = field(default=None, repr=False)
    #: the W3C ``traceparent`` of this attempt when the job continues a trace (the job's trace,
    #: the attempt's span as parent): pass it on to what the task calls; its sends carry it on
    traceparent: str | None = None
    #: the ``tracestate`` that goes with it
    tracestate: str | None = None
    #: the job's fair-share group (the tenant it works for), if it has one: jobs the task
    #: sends and workflows it starts take it unless they name their own ``group``
    group: str | None = None

    def is_cancelled(self) -> bool:
        """Whether the job was asked to stop (``True`` counts as seeing the stop)."""
        return self.cancelled.is_set()

    @property
    def stop_reason(self) -> str | None:
        """Why the job must stop: ``"cancel"``, ``"shutdown"``, ``"timeout"`` or
        ``"fenced"``; ``None`` while it runs on (an answer counts as seeing the stop)."""
        if not self.cancelled.is_set():
            return None
        return self.cancelled.reason

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Waits up to ``timeout`` seconds for a stop: whether one came (``True`` counts as
        seeing it). A body sleeping between steps sleeps here."""
        return self.cancelled.wait(timeout)

    def sleep(self, seconds: float | dt.timedelta) -> None:
        """A durable sleep (as Rust's ``ctx.sleep``): its first call records when it ends and
        raises :class:`Sleeping`, which the body lets through; the job is given back, holding
        no slot and spending no attempt, and runs again once the time has passed, when this
        call returns at once. Sleeps are told apart by their order in the attempt
        (``sleep-1``, …): take them in the same order each time."""
        self.sleep_until(_until(seconds))

    def sleep_until(self, when: dt.datetime) -> None:
        """:meth:`sleep` until ``when`` (an aware datetime)."""
        left = self._sleep_store().sleep(_instant(when))
        if left is not None:
            raise Sleeping(left)

    async def sleep_async(self, seconds: float | dt.timedelta) -> None:
        """:meth:`sleep` for ``async def`` bodies (the sleep is looked up off the loop)."""
        await self.sleep_until_async(_until(seconds))

    async def sleep_until_async(self, when: dt.datetime) -> None:
        """:meth:`sleep_until` for ``async def`` bodies."""
        left = await asyncio.to_thread(self._sleep_store().sleep, _instant(when))
        if left is not None:
            raise Sleeping(left)

    def _sleep_store(self) -> StepStore:
        if self.steps is None:
            raise RemudaError("NO_JOB", "a durable sleep runs inside a task body, while its job runs")
        return self.steps

    def stop(self, reason: str) -> None:
        """Asks the body to stop for ``reason`` (the worker's call; the first reason stays)."""
        self.cancelled.ask(reason)

    def saw_stop(self) -> bool:
        """Whether the body saw a stop it was asked for."""
        return self.cancelled.seen

    @staticmethod
    def from_info(info: dict[str, Any]) -> JobContext:
        """The context from the worker's job description (in a process of the pool, with the
        path of the run's step socket)."""
        steps: StepStore | None = None
        if info.get("step_socket"):
            from .steps import SocketSteps

            steps = SocketSteps(str(info["step_socket"]))
        return JobContext(
            id=int(info["id"]),
            kind=str(info["kind"]),
            queue=str(info["queue"]),
            attempt=int(info["attempt"]),
            max_attempts=int(info["max_attempts"]),
            worker_id=str(info["worker_id"]),
            timeout=info.get("timeout"),
            workflow=info.get("workflow"),
            steps=steps,
            traceparent=info.get("traceparent"),
            tracestate=info.get("tracestate"),
            group=info.get("group"),
        )


_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar("remuda_job", default=None)


class Sleeping(BaseException):
    """Raised by a durable sleep with time left (:meth:`JobContext.sleep`): let it through
    (it is no ``Exception``, so ``except Exception`` does not catch it); the worker gives the
    job back for ``seconds``, without spending an attempt."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"sleeping {seconds:.3f} s more")
        self.seconds = seconds


def _until(seconds: float | dt.timedelta) -> dt.datetime:
    if isinstance(seconds, dt.timedelta):
        delta = seconds
    elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise InputValueError(f"sleep({seconds!r}): give seconds (0 or more) or a timedelta")
    else:
        delta = dt.timedelta(seconds=seconds)
    return dt.datetime.now(dt.timezone.utc) + delta


def _instant(when: dt.datetime) -> str:
    if not isinstance(when, dt.datetime) or when.tzinfo is None:
        raise InputValueError(f"sleep_until({when!r}): give an aware datetime (with its time zone)")
    return when.astimezone(dt.timezone.utc).isoformat()


def current_job() -> JobContext | None:
    """The job the calling task body runs (``None`` outside a task)."""
    return _current.get()


def job() -> JobContext:
    """The job the calling task body runs, for code that runs only inside one: typed as
    always there, so a strictly typed body writes ``remuda.job().attempt`` without a check.
    Raises :class:`~remuda.RemudaError` ``NO_JOB`` outside a task body, where
    :func:`current_job` answers ``None``."""
    ctx = _current.get()
    if ctx is None:
        raise RemudaError(
            "NO_JOB",
            "remuda.job() is called from a task body while its job runs; outside one, remuda.current_job() answers None",
        )
    return ctx


def _enter(ctx: JobContext) -> contextvars.Token[JobContext | None]:
    return _current.set(ctx)


def _leave(token: contextvars.Token[JobContext | None]) -> None:
    _current.reset(token)
