"""Running one task body and encoding its outcome as the Rust worker takes it: ``("ok",
output JSON)`` or ``("err", {"code", "message", "data", "retryable"})``."""

from __future__ import annotations

import asyncio
import builtins
import json
import traceback
from typing import TYPE_CHECKING, Any, cast

from . import codec
from .context import JobContext, Sleeping, _enter, _leave
from .result import TaskError, TaskResult
from .steps import StepError

if TYPE_CHECKING:
    from .task import Task

Outcome = tuple[str, str]


def prepare(task: Task[Any, Any], args_json: str, ctx: JobContext) -> dict[str, Any]:
    """The job's args as the function takes them: bound to its parameters and rebuilt from
    their annotations (:mod:`remuda.codec`; a tagged result passed by ``args_from`` becomes a
    :class:`TaskResult` where the parameter is annotated as one). An element of a map node
    is given its ``index`` only if the function takes one."""
    args = json.loads(args_json)
    if task.batch is not None:
        # a batch's args are the list of its items: the task's one parameter
        args = {task.batch[2]: args}
    elif ctx.workflow is not None and "index" in ctx.workflow and isinstance(args, dict):
        if not task.codec.open and "index" not in task.codec.names:
            cast("dict[str, Any]", args).pop("index", None)
    return task.codec.decode_args(task.name, args)


def call_sync(task: Task[Any, Any], args_json: str, ctx: JobContext) -> Outcome:
    """Runs a plain function."""
    token = _enter(ctx)
    try:
        args = prepare(task, args_json, ctx)
        outcome = encode(task, task.fn(**args))
    except BaseException as e:  # noqa: BLE001 - every failure becomes the job's error
        outcome = failure(task, e)
    finally:
        _leave(token)
    return stopped(ctx) or outcome


async def call_async(task: Task[Any, Any], args_json: str, ctx: JobContext) -> Outcome:
    """Runs an ``async def`` function on the worker's event loop."""
    token = _enter(ctx)
    try:
        args = prepare(task, args_json, ctx)
        outcome = encode(task, await task.fn(**args))
    except asyncio.CancelledError as e:
        # a cancelled task saw its stop; a cancel from elsewhere is its error
        ctx.is_cancelled()
        outcome = failure(task, e)
    except BaseException as e:  # noqa: BLE001 - every failure becomes the job's error
        outcome = failure(task, e)
    finally:
        _leave(token)
    return stopped(ctx) or outcome


def stopped(ctx: JobContext) -> Outcome | None:
    """``("stopped", reason)`` when the body saw the stop it was asked for: the worker gives
    its job back unfinished, whatever the body returned."""
    if ctx.saw_stop():
        return "stopped", ctx.stop_reason or "shutdown"
    return None


def encode(task: Task[Any, Any], value: Any) -> Outcome:
    """A return value as an outcome: a :class:`TaskResult` as it says, anything else ok."""
    if isinstance(value, TaskResult):
        if value.is_err():
            return "err", json.dumps(value.err.to_json(), default=str)  # type: ignore[union-attr]
        value = value.ok
    try:
        return "ok", codec.dumps(value)
    except (TypeError, ValueError) as e:
        error = TaskError("UNSERIALIZABLE_RESULT", f"task {task.name} returned a value that is not JSON: {e}", retryable=False)
        return "err", json.dumps(error.to_json())


def failure(task: Task[Any, Any], e: BaseException) -> Outcome:
    """An exception as an error: the mapped code (by class, most specific first), else
    ``UNHANDLED_EXCEPTION``; its type and traceback in ``data``."""
    if isinstance(e, Sleeping):
        # a durable sleep with time left: the job waits for it, no attempt spent
        return "snooze", repr(e.seconds)
    group = getattr(builtins, "BaseExceptionGroup", None)
    if group is not None and isinstance(e, group):
        # a sleep inside a task group comes out wrapped (asyncio.TaskGroup)
        sleeping, rest = getattr(e, "split")(Sleeping)
        if sleeping is not None and rest is None:
            seconds = [s.seconds for s in _leaves(sleeping) if isinstance(s, Sleeping)]
            return "snooze", repr(max(seconds, default=0.0))
    if isinstance(e, codec.BadArgs):
        return "err", json.dumps(TaskError("BAD_ARGS", str(e), retryable=False).to_json())
    if isinstance(e, StepError):
        # a step that could not be recorded: its code; a misfit or bad name is never retried
        permanent = e.code in ("INVALID_STEP", "STEP_OUTPUT", "INVALID_OUTPUT", "STEP_TOO_LARGE", "STEP_LIMIT")
        return "err", json.dumps(TaskError(e.code, e.message, retryable=False if permanent else None).to_json())
    code = "UNHANDLED_EXCEPTION"
    for cls in type(e).__mro__:
        if cls in task.exception_mapper:
            code = task.exception_mapper[cls]
            break
    if type(e).__name__ == "CancelledError":
        code = "CANCELLED"
    data: dict[str, Any] = {"exception": type(e).__name__, "traceback": "".join(traceback.format_exception(e))}
    retryable: bool | None = None
    if task.retry.when is not None and code != "CANCELLED":
        try:
            # the policy's predicate: False fails the job now, whatever its attempts left
            retryable = None if task.retry.when(e) else False
        except Exception as raised:  # noqa: BLE001 - a predicate's own failure leaves it to the policy
            data["retry_when_raised"] = repr(raised)
    error = TaskError(code, str(e) or type(e).__name__, data, retryable=retryable)
    return "err", json.dumps(error.to_json(), default=str)


def _leaves(e: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds, its nested groups opened."""
    inner = getattr(e, "exceptions", None)
    if inner is None:
        return [e]
    return [leaf for one in inner for leaf in _leaves(one)]
