"""Schedules declared in code (``@app.schedule("0 3 * * *")`` above ``@app.task``): each
is the ``[schedules.NAME]`` table of a worker config file, with the same keys, checked by
the same code when declared, and declared (created, or replaced when changed) by every
worker of the app as it starts. Whichever worker leads maintenance fires it, exactly once
per time: there is no scheduler process."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any, Literal

from . import _native, sending
from .codec import BadArgs
from .errors import InputTypeError, InputValueError

if TYPE_CHECKING:
    from .task import Task

CatchUp = Literal["skip", "all", "none"]
Overlap = Literal["allow", "skip"]


def interval(value: str | float | dt.timedelta) -> str:
    """``every=`` as the config takes it: text as given (``"30s"``), seconds or a
    ``timedelta`` as whole seconds (a fraction is passed on as milliseconds, which the
    schedule's own check refuses, saying so)."""
    if isinstance(value, str):
        return value
    ms = round(sending.seconds("every", value) * 1000)
    if ms <= 0:
        raise InputValueError(f"every={value!r}: give an interval of a second or more")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def hour_mark(value: int | dict[str, int]) -> dict[str, int]:
    """``hourly=15`` (the minute) or ``hourly={"minute": 15, "second": 30}``."""
    if isinstance(value, dict):
        return value
    return {"minute": value}


def checked_args(task: Task[Any, Any], name: str, args: dict[str, Any]) -> Any:
    """The args a schedule fires its task with, as JSON, checked against the task's
    signature as the worker will read them: a schedule whose jobs could only fail is
    refused where it is declared."""
    if not isinstance(args, dict):
        raise InputTypeError(f"schedule {name}: args={args!r}: give the task's arguments as a dict by parameter name")
    if task.batch is not None:
        raise InputTypeError(f"schedule {name}: task {task.name} takes batches (add_to_batch): a schedule cannot feed it")
    value = json.loads(task.codec.encode_args(task.name, args))
    try:
        task.codec.decode_args(task.name, value)
    except BadArgs as e:
        raise InputTypeError(f"schedule {name}: {e}") from None
    return value


#: the keys given as plain values, and the type each takes
TYPED = {"cron": str, "priority": int, "max_attempts": int, "catch_up_limit": int, "tz": str, "catch_up": str, "overlap": str, "queue": str, "group": str, "daily": str}


def table(task: Task[Any, Any], name: str, pattern: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The ``[schedules.NAME]`` table of ``task``'s schedule, checked as a worker would
    check it (``InputValueError`` saying which key is wrong)."""
    for key, value in {**pattern, **options}.items():
        wanted = TYPED.get(key)
        if value is not None and wanted is not None and (type(value) is not wanted):
            raise InputTypeError(f"schedule {name}: {key}={value!r}: give {'an int' if wanted is int else 'a str'}, not {type(value).__name__}")
    given = {key: value for key, value in pattern.items() if value is not None}
    if len(given) != 1:
        keys = ", ".join(f"{k}=" for k in given) or "none"
        raise InputTypeError(
            f"schedule {name}: give exactly one of a cron expression, every=, hourly=, daily=, weekly= or monthly= (given: {keys})"
        )
    section: dict[str, Any] = {"kind": task.name, **given}
    if "every" in section:
        section["every"] = interval(section["every"])
    if "hourly" in section:
        section["hourly"] = hour_mark(section["hourly"])
    section["args"] = checked_args(task, name, options.pop("args") or {})
    section.update({key: value for key, value in options.items() if value is not None})
    try:
        text = json.dumps(section)
    except (TypeError, ValueError) as e:
        raise InputTypeError(f"schedule {name}: {e}") from None
    _native.check_schedule(name, text, task.queue)
    return section
