"""Send options: what ``send``, ``send_in`` and ``send_many`` take besides the task's
arguments, as the Rust client and the SQL function ``remuda.enqueue`` take them."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

#: Keyword arguments of ``send`` that are options, not task arguments (unless the task
#: function itself has a parameter of that name).
OPTIONS = frozenset(
    {
        "queue",
        "priority",
        "max_attempts",
        "run_at",
        "delay",
        "deadline",
        "timeout",
        "unique_key",
        "unique_by_args",
        "unique_states",
        "unique_period",
        "unique_per_queue",
        "concurrency_key",
        "target_worker",
        "requires",
        "notify",
    }
)

_DURATIONS = ("delay", "timeout", "unique_period")
_TIMES = ("run_at", "deadline")


def seconds(name: str, value: Any) -> float:
    """A duration (seconds or a ``timedelta``) as seconds."""
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"{name} must be seconds or a datetime.timedelta, not {type(value).__name__}")


def when(name: str, value: Any) -> dt.datetime:
    """A time; naive datetimes are refused (they would be read in the server's zone)."""
    if not isinstance(value, dt.datetime):
        raise TypeError(f"{name} must be a datetime.datetime, not {type(value).__name__}")
    if value.tzinfo is None:
        raise ValueError(f"{name} {value} has no time zone: give an aware datetime such as datetime.now(timezone.utc)")
    return value


def normalise(options: dict[str, Any]) -> dict[str, Any]:
    """Options with ``None`` dropped, durations in seconds and times checked."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        if key not in OPTIONS:
            raise TypeError(f"unknown send option {key!r}")
        if key in _DURATIONS:
            value = seconds(key, value)
        elif key in _TIMES:
            value = when(key, value)
        elif key in ("requires", "unique_states"):
            if isinstance(value, str):
                raise TypeError(f"{key} is a list of names, such as ['gpu']")
            value = [str(v) for v in value]
        out[key] = value
    return out


def to_json(options: dict[str, Any]) -> str:
    """Options as the Rust client takes them."""
    return json.dumps({k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in options.items()})


def enqueue_sql(kind: str, args: str, options: dict[str, Any]) -> tuple[str, list[Any]]:
    """The ``SELECT remuda.enqueue(…)`` statement and its parameters (psycopg style)."""
    parts = ["%s", "%s::jsonb"]
    params: list[Any] = [kind, args]
    for key, value in options.items():
        if key in _DURATIONS:
            parts.append(f"{key} => make_interval(secs => %s::float8)")
        elif key == "notify":
            parts.append(f"{key} => %s::jsonb")
            value = json.dumps(value)
        elif key in ("requires", "unique_states"):
            parts.append(f"{key} => %s::text[]")
        elif key in _TIMES:
            parts.append(f"{key} => %s::timestamptz")
        elif key in ("priority", "max_attempts"):
            parts.append(f"{key} => %s::int")
        elif key in ("unique_by_args", "unique_per_queue"):
            parts.append(f"{key} => %s::boolean")
        else:
            parts.append(f"{key} => %s::text")
        params.append(value)
    return f"SELECT remuda.enqueue({', '.join(parts)})", params
