"""The W3C trace context from Python: ``traceparent=`` (or the active OpenTelemetry span, or
the running task's) is the trace a job continues; the task reads its attempt's context in
``current_job()``, and what it sends continues it; a malformed one is refused saying why."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import remuda
from conftest import StartWorker, job_info, wait_state

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_task_sees_its_attempts_trace_and_its_sends_continue_it(app: remuda.App, start_worker: StartWorker) -> None:
    handle = app.tasks["relay"].send(traceparent=TP, tracestate="vendor=abc")
    assert job_info(handle)["trace"] == {"traceparent": TP, "tracestate": "vendor=abc"}
    start_worker()
    done = wait_state(handle, "completed")
    out = done["result"]["ok"]
    trace_id = TP.split("-")[1]
    version, seen_trace, span, flags = out["traceparent"].split("-")
    assert (version, seen_trace, flags) == ("00", trace_id, "01")
    assert span != TP.split("-")[2], "the attempt runs under a span of its own"
    assert out["tracestate"] == "vendor=abc"
    child_info = job_info(remuda.TaskHandle(app, out["child"], False))
    assert child_info["trace"]["traceparent"] == out["traceparent"], "the send inside continues the trace"


def test_send_in_keeps_the_trace_and_a_malformed_one_is_refused(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    with db.transaction():
        handle = app.tasks["add"].options(traceparent=TP).send_in(db, a=1, b=1)
    assert job_info(handle)["trace"] == {"traceparent": TP}
    for bad in ("00-abc", TP.upper()):
        try:
            app.tasks["add"].send(a=1, b=1, traceparent=bad)
        except remuda.RemudaError as e:
            assert e.code == "BAD_INPUT", e
            assert "traceparent" in e.message, e
        else:
            raise AssertionError(f"{bad!r} was sent")


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_send_inside_an_opentelemetry_span_continues_it(app: remuda.App) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("remuda-tests")
    with tracer.start_as_current_span("request") as span:
        handle = app.tasks["add"].send(a=1, b=1)
        context = span.get_span_context()
    traceparent = job_info(handle)["trace"]["traceparent"]
    assert traceparent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    outside = app.tasks["add"].send(a=2, b=2)
    assert job_info(outside)["trace"] is None, "no span, no trace"


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_send_is_a_producer_span_under_its_caller_and_its_job_carries_the_span(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    app.tracer_provider = provider
    add = app.tasks["add"]
    with provider.get_tracer("tests").start_as_current_span("request") as request:
        handle = add.send(a=1, b=1)
    given = add.send(a=1, b=2, traceparent=TP)
    with db.transaction():
        inside = add.send_in(db, a=1, b=3)
    assert add.send_many([{"a": 1, "b": 4}, {"a": 1, "b": 5}]) == 2
    sends = [s for s in exported.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert [s.name for s in sends] == ["send default"] * 4, sends
    first, second, third, many = sends
    assert first.parent is not None and first.parent.span_id == request.get_span_context().span_id
    assert first.context is not None and first.context.trace_id == request.get_span_context().trace_id
    attributes = dict(first.attributes or {})
    assert attributes["messaging.system"] == "remuda"
    assert attributes["messaging.operation.type"] == "send"
    assert attributes["messaging.destination.name"] == "default"
    assert attributes["messaging.message.id"] == str(handle.id)
    trace_id = f"{first.context.trace_id:032x}"
    assert job_info(handle)["trace"]["traceparent"] == f"00-{trace_id}-{first.context.span_id:016x}-{int(first.context.trace_flags):02x}"
    # an explicit context is the span's parent; in a transaction, the same
    assert second.parent is not None and f"{second.parent.span_id:016x}" == TP.split("-")[2]
    assert second.context is not None and job_info(given)["trace"]["traceparent"].split("-")[2] == f"{second.context.span_id:016x}"
    assert third.context is not None and job_info(inside)["trace"]["traceparent"].split("-")[2] == f"{third.context.span_id:016x}"
    assert third.parent is None, "no caller: the send starts a trace"
    assert dict(many.attributes or {})["messaging.batch.message_count"] == 2
    # a malformed context makes no span and is refused as before, whatever OpenTelemetry
    # would make of it
    with pytest.raises(remuda.RemudaError, match="traceparent"):
        add.send(a=1, b=1, traceparent="00-abc")
    with pytest.raises(remuda.RemudaError, match="traceparent"):
        add.send(a=1, b=1, traceparent="01" + TP[2:])
    with pytest.raises(remuda.RemudaError, match="tracestate"):
        add.send(a=1, b=1, tracestate="vendor=abc")
    with pytest.raises(remuda.RemudaError, match="tracestate"):
        add.send(a=1, b=1, traceparent=TP, tracestate="bad\tstate")
    assert len([s for s in exported.get_finished_spans() if s.kind == SpanKind.PRODUCER]) == 4
