"""Running one task body and encoding its outcome as the Rust worker takes it: ``("ok",
output JSON)`` or ``("err", {"code", "message", "data", "retryable"})``."""

from __future__ import annotations

import json
import traceback
import typing
from typing import TYPE_CHECKING, Any

from .context import JobContext, _enter, _leave
from .result import TaskError, TaskResult

if TYPE_CHECKING:
    from .app import Task

Outcome = tuple[str, str]


def prepare(task: Task[Any], args: dict[str, Any]) -> dict[str, Any]:
    """Args for the call: a tagged result passed by ``args_from`` becomes a
    :class:`TaskResult` where the parameter is annotated as one."""
    for name, param in task.signature.parameters.items():
        value = args.get(name)
        if isinstance(value, dict) and _wants_result(param.annotation, task.fn):
            args[name] = TaskResult.from_json(value)
    return args


def _wants_result(annotation: Any, fn: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split("[", 1)[0].strip().endswith("TaskResult")
    return annotation is TaskResult or typing.get_origin(annotation) is TaskResult


def call_sync(task: Task[Any], args_json: str, ctx: JobContext) -> Outcome:
    """Runs a plain function."""
    token = _enter(ctx)
    try:
        args = prepare(task, json.loads(args_json))
        return encode(task, task.fn(**args))
    except BaseException as e:  # noqa: BLE001 - every failure becomes the job's error
        return failure(task, e)
    finally:
        _leave(token)


async def call_async(task: Task[Any], args_json: str, ctx: JobContext) -> Outcome:
    """Runs an ``async def`` function on the worker's event loop."""
    token = _enter(ctx)
    try:
        args = prepare(task, json.loads(args_json))
        return encode(task, await task.fn(**args))
    except BaseException as e:  # noqa: BLE001 - cancellation included: the worker decides
        return failure(task, e)
    finally:
        _leave(token)


def encode(task: Task[Any], value: Any) -> Outcome:
    """A return value as an outcome: a :class:`TaskResult` as it says, anything else ok."""
    if isinstance(value, TaskResult):
        if value.is_err():
            return "err", json.dumps(value.err.to_json(), default=str)  # type: ignore[union-attr]
        value = value.ok
    try:
        return "ok", json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        error = TaskError("UNSERIALIZABLE_RESULT", f"task {task.name} returned a value that is not JSON: {e}", retryable=False)
        return "err", json.dumps(error.to_json())


def failure(task: Task[Any], e: BaseException) -> Outcome:
    """An exception as an error: the mapped code (by class, most specific first), else
    ``UNHANDLED_EXCEPTION``; its type and traceback in ``data``."""
    code = "UNHANDLED_EXCEPTION"
    for cls in type(e).__mro__:
        if cls in task.exception_mapper:
            code = task.exception_mapper[cls]
            break
    if type(e).__name__ == "CancelledError":
        code = "CANCELLED"
    data = {"exception": type(e).__name__, "traceback": "".join(traceback.format_exception(e))}
    error = TaskError(code, str(e) or type(e).__name__, data)
    return "err", json.dumps(error.to_json(), default=str)
