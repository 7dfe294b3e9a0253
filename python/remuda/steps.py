"""Durable steps: :func:`step` runs a part of a task's work until it is recorded. Its output
is recorded with the job the first time; a later attempt of the same job (a retry after an
error, a rescue after the worker died) returns the recorded output without running it, so a
retry resumes after the last completed step instead of repeating its side effects.

.. code-block:: python

    @app.task("checkout")
    def checkout(order_id: int) -> str:
        key = remuda.step_key("charge")                             # "<job id>:charge"
        charge = remuda.step("charge", charge_card, order_id, idempotency_key=key)
        remuda.step("email", send_receipt, order_id, charge)
        return charge

A step runs at least once: a crash between its side effect and its record (a window of
milliseconds) runs it again on the next attempt. :func:`step_key` gives the step's
idempotency key, the same on every attempt of the job: handed to what the step calls (a
payment API's idempotency key, a unique constraint), it makes the side effect happen once.

The output is stored as JSON (the task codec's: dataclasses, pydantic models, dates); a
replayed step is rebuilt from its JSON by the function's return annotation, so annotate it to
get the same type back. A step that raises is not recorded: the exception fails the attempt
as it would without the step. Steps of one job have unique names; a name used twice returns
the first step's output.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, ParamSpec, Protocol, TypeVar, cast

from . import codec
from .context import current_job
from .errors import InputValueError, RemudaError
from .result import TaskFailed

T = TypeVar("T")
P = ParamSpec("P")


class StepError(RemudaError):
    """A step could not be read or recorded: ``FENCED`` (this run no longer holds its job:
    it was cancelled, rescued or released), ``STEP_STORE`` (the database could not be used),
    ``INVALID_STEP`` (a bad name), ``STEP_OUTPUT`` (a recorded output that no longer fits).
    Raised out of the task body, it fails the attempt with its code."""


class StepStore(Protocol):
    """Where a run's steps are read and recorded (the worker's, in this process or through
    the run's step socket)."""

    def recorded(self, name: str) -> str | None: ...

    def record(self, name: str, output: str) -> str: ...

    def sleep(self, until: str) -> float | None: ...


class SocketSteps:
    """The steps of a run whose body runs in a process of the pool: asked of the worker
    through the run's step socket (``REMUDA_STEP_SOCKET``), one JSON line each way."""

    def __init__(self, path: str) -> None:
        self.path = path

    def recorded(self, name: str) -> str | None:
        return self._ask({"op": "get", "name": name})

    def record(self, name: str, output: str) -> str:
        answer = self._ask({"op": "record", "name": name, "output": output})
        if answer is None:
            raise StepError("STEP_STORE", f"the worker answered nothing for step {name!r}")
        return answer

    def sleep(self, until: str) -> float | None:
        left = self._ask({"op": "sleep", "until": until})
        return None if left is None else int(left) / 1000

    def _ask(self, request: dict[str, Any]) -> str | None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.path)
                conn.sendall(json.dumps(request).encode() + b"\n")
                with conn.makefile("r", encoding="utf-8") as lines:
                    line = lines.readline()
        except OSError as e:
            raise StepError("STEP_STORE", f"cannot reach the worker's step socket {self.path}: {e}") from e
        if not line:
            raise StepError("STEP_STORE", "the worker closed the step socket")
        answer = json.loads(line)
        if "error" in answer:
            raise StepError(str(answer["error"]["code"]), str(answer["error"]["message"]))
        output = answer.get("output")
        return None if output is None else str(output)


def _store(what: str) -> StepStore:
    ctx = current_job()
    if ctx is None or ctx.steps is None:
        raise StepError("INVALID_STEP", f"{what} runs inside a task body, while its job runs")
    return ctx.steps


def _check(name: str) -> None:
    try:
        size = len(name.encode()) if isinstance(name, str) else 0
    except UnicodeEncodeError:
        size = 0
    # (control characters as Rust counts them, Unicode's Cc: the worker checks the same)
    control = size > 0 and any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name)
    if not 1 <= size <= 200 or control or name.startswith("sleep-"):
        raise StepError(
            "INVALID_STEP",
            f"a step's name must be a string of 1 to 200 bytes of UTF-8, without control characters (tabs, newlines), not starting with 'sleep-' (the durable sleeps'), not {name!r}",
        )


def _replay(name: str, fn: Callable[..., Any], stored: str) -> Any:
    """A recorded output, rebuilt by ``fn``'s return annotation (for a coroutine function,
    what it returns when awaited)."""
    value = json.loads(stored)
    decoder = codec.decoder_for(codec._hints(fn).get("return", Any))
    if decoder is None:
        return value
    try:
        return decoder(value)
    except Exception as e:  # noqa: BLE001 - any misfit is the same error
        raise StepError(
            "STEP_OUTPUT",
            f"the recorded output of step {name!r} does not fit what {getattr(fn, '__name__', 'the step')} returns now: {e} "
            "(`remuda retry ID --fresh` runs the job again from its first step)",
        ) from e


def _encode(name: str, value: Any) -> str:
    try:
        return codec.dumps(value)
    except (TypeError, ValueError) as e:
        raise StepError("INVALID_OUTPUT", f"the output of step {name!r} is not JSON: {e}") from e


def step_key(name: str) -> str:
    """The idempotency key of step ``name`` of the current job: ``"<job id>:<name>"``, the
    same on every attempt (``REMUDA_STEP_KEY`` of ``remuda step``, ``ctx.step_key`` in Rust).
    Raises :class:`StepError` outside a task body or for a bad name."""
    _check(name)
    ctx = current_job()
    if ctx is None:
        raise StepError("INVALID_STEP", "remuda.step_key runs inside a task body, while its job runs")
    return f"{ctx.id}:{name}"


def step(name: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Runs ``fn(*args, **kwargs)`` as step ``name`` of the current job until it is recorded,
    at least once (see the module). Returns its output, or the output an earlier attempt
    recorded."""
    _check(name)
    store = _store("remuda.step")
    stored = store.recorded(name)
    if stored is not None:
        return cast(T, _replay(name, fn, stored))
    value = fn(*args, **kwargs)
    text = _encode(name, value)
    recorded = store.record(name, text)
    return value if recorded == text else cast(T, _replay(name, fn, recorded))


async def step_async(name: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """:func:`step` for ``async def`` tasks and functions: the step is read and recorded off
    the event loop."""
    _check(name)
    store = _store("remuda.step_async")
    stored = await asyncio.to_thread(store.recorded, name)
    if stored is not None:
        return cast(T, _replay(name, fn, stored))
    value = await fn(*args, **kwargs)
    text = _encode(name, value)
    recorded = await asyncio.to_thread(store.record, name, text)
    return value if recorded == text else cast(T, _replay(name, fn, recorded))


@dataclass(frozen=True)
class StepOptions:
    """How :func:`step_with` runs a step: ``retries`` tries after the first, ``backoff``
    seconds before the second try (doubling each time, up to ``max_backoff``), and each try's
    ``timeout`` in seconds (``None``: none). Every exception is tried again but a
    :class:`StepError` other than ``STEP_TIMEOUT`` and a :class:`~remuda.TaskFailed` whose
    error says ``retryable=False``; a job asked to stop tries no more."""

    retries: int = 0
    backoff: float = 1.0
    max_backoff: float = 60.0
    timeout: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise InputValueError(f"StepOptions(retries={self.retries!r}): give an int of 0 or more")
        for what, value in (("backoff", self.backoff), ("max_backoff", self.max_backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise InputValueError(f"StepOptions({what}={value!r}): give seconds, 0 or more")
        if self.timeout is not None and (
            isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not self.timeout > 0
        ):
            raise InputValueError(f"StepOptions(timeout={self.timeout!r}): give seconds, more than 0, or None")

    def pause(self, tried: int) -> float:
        """The wait after failed try number ``tried`` (1-based)."""
        return float(min(self.backoff * 2 ** min(tried - 1, 62), self.max_backoff))

    def again(self, error: BaseException, tried: int) -> bool:
        """Whether a try that raised ``error`` is followed by another (a try over its time
        limit is; a step that could not be kept is not)."""
        if tried > self.retries or not isinstance(error, Exception):
            return False
        if isinstance(error, StepError):
            return error.code == "STEP_TIMEOUT"
        return not (isinstance(error, TaskFailed) and error.error.retryable is False)


def _timed_out(name: str, options: StepOptions, tried: int) -> StepError:
    return StepError("STEP_TIMEOUT", f"step {name!r} ran over its time limit of {options.timeout} s (try {tried})")


def _try_sync(name: str, options: StepOptions, tried: int, call: Callable[[], T]) -> T:
    if options.timeout is None:
        return call()
    # in a daemon thread of its own, with the job's context: a try over its limit is no
    # longer waited for, and runs on to its end in that thread (Python cannot stop a thread),
    # which holds up neither the worker's stop nor the interpreter's exit
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            future.set_result(context.run(call))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting side
            future.set_exception(e)

    threading.Thread(target=run, name=f"remuda-step-{name}", daemon=True).start()
    try:
        return future.result(timeout=options.timeout)
    except concurrent.futures.TimeoutError:
        if future.done():
            # the function's own TimeoutError, or it ended just as the wait did
            return future.result()
        raise _timed_out(name, options, tried) from None


def step_with(name: str, options: StepOptions, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """:func:`step` with the step's own retries and time limit (:class:`StepOptions`):
    ``fn`` is tried until it returns, raises what is not tried again, or has been tried
    ``1 + retries`` times; only its outcome is recorded. Inside the attempt, before its error
    reaches the job's retry policy (which would run the whole task again). A plain function
    over its time limit is no longer waited for but runs on in its thread: give it a limit of
    its own where it takes one (a socket's, an HTTP client's)."""
    _check(name)
    store = _store("remuda.step_with")
    stored = store.recorded(name)
    if stored is not None:
        return cast(T, _replay(name, fn, stored))
    ctx = current_job()
    tried = 0
    while True:
        tried += 1
        try:
            value = _try_sync(name, options, tried, lambda: fn(*args, **kwargs))
            break
        except BaseException as e:
            if not options.again(e, tried) or (ctx is not None and ctx.cancelled.wait(options.pause(tried))):
                raise
    text = _encode(name, value)
    recorded = store.record(name, text)
    return value if recorded == text else cast(T, _replay(name, fn, recorded))


async def _within(call: Awaitable[T], timeout: float, timed_out: Callable[[], StepError]) -> T:
    """``call``'s value, or ``timed_out()`` raised once ``timeout`` seconds pass (the call
    cancelled first). Not ``asyncio.wait_for``, whose own TimeoutError cannot be told from
    one the function raises: the function's is its own error."""
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:
        task.cancel()
        raise
    if not done:
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass  # (cancelled, or failed on the way out: the time limit is what it ran into)
        raise timed_out()
    return task.result()


async def step_with_async(
    name: str, options: StepOptions, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """:func:`step_with` for ``async def`` tasks and functions: a try over its time limit is
    cancelled."""
    _check(name)
    store = _store("remuda.step_with_async")
    stored = await asyncio.to_thread(store.recorded, name)
    if stored is not None:
        return cast(T, _replay(name, fn, stored))
    ctx = current_job()
    tried = 0
    while True:
        tried += 1
        try:
            if options.timeout is None:
                value = await fn(*args, **kwargs)
            else:
                value = await _within(fn(*args, **kwargs), options.timeout, lambda: _timed_out(name, options, tried))
            break
        except Exception as e:
            if not options.again(e, tried) or (ctx is not None and ctx.is_cancelled()):
                raise
            await asyncio.sleep(options.pause(tried))
    text = _encode(name, value)
    recorded = await asyncio.to_thread(store.record, name, text)
    return value if recorded == text else cast(T, _replay(name, fn, recorded))
