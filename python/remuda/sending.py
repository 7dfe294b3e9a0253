"""Send options: what ``send``, ``send_in`` and ``send_many`` take besides the task's
arguments, as the Rust client and the SQL function ``remuda.enqueue`` take them."""

from __future__ import annotations

import datetime as dt
import json
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypedDict

from .errors import InputTypeError, InputValueError


class SendOptions(TypedDict, total=False):
    """What ``send`` takes besides the task's arguments (``task.options(…)``), as the Rust
    client and the SQL function ``remuda.enqueue`` take them: durations in seconds or a
    ``timedelta``, times as aware ``datetime``."""

    queue: str
    priority: int
    max_attempts: int
    run_at: dt.datetime
    delay: float | dt.timedelta
    deadline: dt.datetime
    timeout: float | dt.timedelta
    unique_key: str
    unique_by_args: bool
    unique_states: Sequence[str]
    unique_period: float | dt.timedelta
    unique_per_queue: bool
    concurrency_key: str
    group: str
    traceparent: str
    tracestate: str
    target_worker: str
    requires: Sequence[str]
    notify: dict[str, Any]
    debounce: float | dt.timedelta
    debounce_max: float | dt.timedelta
    throttle: float | dt.timedelta
    throttle_latest: bool


#: Keyword arguments of ``send`` that are options, not task arguments (unless the task
#: function itself has a parameter of that name).
OPTIONS = frozenset(SendOptions.__annotations__)

_DURATIONS = ("delay", "timeout", "unique_period", "debounce", "debounce_max", "throttle")
_TIMES = ("run_at", "deadline")
_TEXTS = ("queue", "unique_key", "concurrency_key", "group", "traceparent", "tracestate", "target_worker")
_INTS = ("priority", "max_attempts")
_FLAGS = ("unique_by_args", "unique_per_queue", "throttle_latest")
_NAMES = ("requires", "unique_states")
_I32 = 2**31 - 1
#: the job states a unique key can be held in
STATES = ("scheduled", "available", "running", "completed", "failed", "cancelled", "expired")


def seconds(name: str, value: Any) -> float:
    """A duration (seconds or a ``timedelta``) as seconds, 0 or more."""
    if isinstance(value, dt.timedelta):
        secs = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        secs = float(value)
    else:
        raise InputTypeError(f"{name}={value!r}: give seconds (a number) or a datetime.timedelta, not {type(value).__name__}")
    if not secs >= 0 or secs == float("inf"):
        raise InputValueError(f"{name}={value!r}: give a finite number of seconds, 0 or more")
    return secs


def when(name: str, value: Any) -> dt.datetime:
    """A time; naive datetimes are refused (they would be read in the server's zone)."""
    if not isinstance(value, dt.datetime):
        raise InputTypeError(f"{name}={value!r}: give a datetime.datetime, not {type(value).__name__}")
    if value.tzinfo is None:
        raise InputValueError(f"{name}={value}: the time has no time zone; give an aware datetime such as datetime.now(timezone.utc)")
    return value


def normalise(options: dict[str, Any]) -> dict[str, Any]:
    """Options with ``None`` dropped, each checked (its type, its range) with a message
    naming it, durations in seconds."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        out[key] = _option(key, value)
    if "run_at" in out and "delay" in out:
        raise InputValueError("run_at and delay both given: give one of them")
    return out


def _option(key: str, value: Any) -> Any:
    if key not in OPTIONS:
        raise InputTypeError(f"unknown send option {key!r}: the options are {', '.join(sorted(OPTIONS))}")
    if key in _DURATIONS:
        return seconds(key, value)
    if key in _TIMES:
        return when(key, value)
    if key in _TEXTS:
        if not isinstance(value, str):
            raise InputTypeError(f"{key}={value!r}: give a str, not {type(value).__name__}")
        return value
    if key in _INTS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputTypeError(f"{key}={value!r}: give an int, not {type(value).__name__}")
        low = 1 if key == "max_attempts" else -_I32 - 1
        if not low <= value <= _I32:
            raise InputValueError(f"{key}={value}: give an int from {low} to {_I32}")
        return value
    if key in _FLAGS:
        if not isinstance(value, bool):
            raise InputTypeError(f"{key}={value!r}: give True or False, not {type(value).__name__}")
        return value
    if key in _NAMES:
        if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
            raise InputTypeError(f"{key}={value!r}: give a list of names, such as ['gpu']")
        if key == "unique_states" and not set(value) <= set(STATES):
            unknown = sorted(set(value) - set(STATES))
            raise InputValueError(f"unique_states={list(value)!r}: {', '.join(unknown)} is not a job state ({', '.join(STATES)})")
        return list(value)
    if not isinstance(value, dict):
        raise InputTypeError(f"notify={value!r}: give a dict such as {{'webhook': 'https://…'}}")
    return value


def to_json(options: dict[str, Any]) -> str:
    """Options as the Rust client takes them."""
    return json.dumps({k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in options.items()})


def grouped(options: dict[str, Any]) -> dict[str, Any]:
    """Options with the fair-share group the job works for: its own ``group``, else the
    running task's (a tenant's work keeps its group as it fans out)."""
    if "group" in options:
        return options
    from .context import current_job

    job = current_job()
    if job is None or job.group is None:
        return options
    return {**options, "group": job.group}


def traced(options: dict[str, Any]) -> dict[str, Any]:
    """Options with the W3C trace context the job continues: its own ``traceparent``, else the
    current OpenTelemetry span's (when the ``opentelemetry`` API is installed and a span is
    active), else the running task's (a task's sends continue its trace)."""
    if "traceparent" in options:
        return options
    found = _otel_trace() or _task_trace()
    if found is None:
        return options
    traceparent, tracestate = found
    out = {**options, "traceparent": traceparent}
    if tracestate:
        out["tracestate"] = tracestate
    return out


def _otel_trace() -> tuple[str, str | None] | None:
    try:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    traceparent = carrier.get("traceparent")
    return (traceparent, carrier.get("tracestate")) if traceparent else None


#: what the span of a send is told once the job is written: its id
Sent = Callable[[int], None]


@contextmanager
def send_span(tracer_provider: Any, queue: str, count: int, options: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Sent]]:
    """The span of an enqueue (kind ``PRODUCER``, ``send <queue>``, the OpenTelemetry
    messaging conventions' attributes) when the ``opentelemetry`` API is installed, made by
    ``tracer_provider`` (``None``: the global one) under the context the jobs continue (their
    ``traceparent``, else the active span, else the running task's). Yields the options with
    the span's context as the jobs' trace (so their attempts descend from it or link to it),
    and what tells the span the one job's id. A ``traceparent`` that is not valid is passed on
    as given, to be refused with the reason."""
    try:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        yield traced(options), _unused
        return
    w3c = TraceContextTextMapPropagator()
    parent: Any = None
    given = "traceparent" in options
    if "tracestate" in options and not (given and _well_formed(options["traceparent"], options["tracestate"])):
        # (refused as given, with the reason, by the enqueue)
        yield options, _unused
        return
    if given or not trace.get_current_span().get_span_context().is_valid:
        found = (options["traceparent"], options.get("tracestate")) if given else _task_trace()
        if found is not None:
            if given and not _well_formed(found[0], found[1]):
                yield options, _unused
                return
            given_carrier = {"traceparent": str(found[0]), **({"tracestate": str(found[1])} if found[1] else {})}
            parent = w3c.extract(given_carrier)
            if not trace.get_current_span(parent).get_span_context().is_valid:
                yield options, _unused
                return
    attributes: dict[str, str | int] = {
        "messaging.system": "remuda",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": queue,
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    tracer = trace.get_tracer("remuda", tracer_provider=tracer_provider)
    with tracer.start_as_current_span(f"send {queue}", context=parent, kind=trace.SpanKind.PRODUCER, attributes=attributes) as span:
        carrier: dict[str, str] = {}
        w3c.inject(carrier)
        out = {k: v for k, v in options.items() if k not in ("traceparent", "tracestate")}
        if "traceparent" in carrier:
            out["traceparent"] = carrier["traceparent"]
            if carrier.get("tracestate"):
                out["tracestate"] = carrier["tracestate"]

        def sent(id: int) -> None:
            if count == 1:
                span.set_attribute("messaging.message.id", str(id))
                span.set_attribute("remuda.job.id", id)

        yield out, sent


def _unused(id: int) -> None:
    """(no span to tell)"""


_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def _well_formed(traceparent: Any, tracestate: Any) -> bool:
    """Whether a context given is one the enqueue takes as it is (version 00, lowercase hex,
    ids not all zeros; a ``tracestate`` of at most 512 bytes of printable ASCII): only then
    is it a span's parent, anything else goes on to be refused with its reason."""
    if not isinstance(traceparent, str) or not isinstance(tracestate, (str, type(None))):
        return False
    found = _TRACEPARENT.fullmatch(traceparent)
    if found is None or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return False
    return tracestate is None or (len(tracestate) <= 512 and all(" " <= c <= "~" for c in tracestate))


def _task_trace() -> tuple[str, str | None] | None:
    from .context import current_job

    job = current_job()
    if job is None or not job.traceparent:
        return None
    return job.traceparent, job.tracestate


def enqueue_sql(kind: str, args: str, options: dict[str, Any]) -> tuple[str, list[Any]]:
    """The statement that enqueues through ``remuda.enqueue_job`` (``remuda.enqueue``'s
    parameters, answering ``id, joined, duplicate``) and its parameters (psycopg style)."""
    parts = ["%s", "%s::jsonb"]
    params: list[Any] = [kind, args]
    for key, value in options.items():
        if key == "group":
            # `group` is a reserved word in SQL: remuda.enqueue names it group_key
            key = "group_key"
        if key in _DURATIONS or key == "batch_wait":
            parts.append(f"{key} => make_interval(secs => %s::float8)")
        elif key == "notify":
            parts.append(f"{key} => %s::jsonb")
            value = json.dumps(value)
        elif key in ("requires", "unique_states"):
            parts.append(f"{key} => %s::text[]")
        elif key in _TIMES:
            parts.append(f"{key} => %s::timestamptz")
        elif key in ("priority", "max_attempts", "batch_size"):
            parts.append(f"{key} => %s::int")
        elif key in _FLAGS:
            parts.append(f"{key} => %s::boolean")
        else:
            parts.append(f"{key} => %s::text")
        params.append(value)
    return f"SELECT e.id, e.joined, e.duplicate FROM remuda.enqueue_job({', '.join(parts)}) e", params
