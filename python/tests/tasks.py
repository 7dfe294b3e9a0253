"""The tasks the tests run, declared on an app per test database (``make_app``); a worker
process imports ``tasks:app``, made from ``$REMUDA_TEST_URL``."""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import os
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from typing import Any

import pydantic

import remuda
from remuda import RetryPolicy, TaskError, TaskResult


class Upstream(Exception):
    """A failure worth retrying."""


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Point:
    x: int
    y: int
    at: dt.datetime


class Order(pydantic.BaseModel):
    id: uuid.UUID
    amount: Decimal
    placed: dt.date


@dataclass(frozen=True)
class Shapes:
    """Every type beyond JSON that a task takes and returns, rebuilt on both sides."""

    when: dt.datetime
    day: dt.date
    id: uuid.UUID
    amount: Decimal
    color: Color
    point: Point
    pair: tuple[int, str]
    order: Order
    points: list[Point]
    by_name: dict[str, Color]
    wait: dt.timedelta
    tags: frozenset[str]
    maybe: Point | None


@dataclass(frozen=True)
class Charge:
    """What a payment step returns: rebuilt as itself when a later attempt replays it."""

    id: str
    pid: int


def charge_card(log: str) -> Charge:
    """The side effect a step guards: one line in ``log`` per charge made."""
    with open(log, "a") as charges:
        charges.write(f"charged {os.getpid()}\n")
    return Charge(id=f"ch_{os.getpid()}", pid=os.getpid())


def charge_then_hang(log: str, ready: str) -> str:
    """Charges once per job; the first attempt then says so in ``ready`` and hangs until its
    worker is killed."""
    job = remuda.current_job()
    assert job is not None
    charge = remuda.step("charge", charge_card, log)
    assert isinstance(charge, Charge), charge
    if job.attempt == 1:
        Path(ready).write_text("charged")
        time.sleep(60)
    return charge.id


def note_and_work(path: str, seconds: float) -> int:
    """Notes the run (its process and attempt) in ``path``, then works for ``seconds``."""
    job = remuda.current_job()
    assert job is not None
    with open(path, "a") as notes:
        notes.write(f"{os.getpid()} {job.attempt}\n")
    time.sleep(seconds)
    return job.attempt


def make_app(database_url: str) -> remuda.App:
    app = remuda.App(database_url=database_url)

    @app.task("add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(
        "flaky",
        retry=RetryPolicy.fixed(0.05, max_attempts=3, retry_on=["UPSTREAM"]),
        exception_mapper={Upstream: "UPSTREAM", ValueError: "BAD_INPUT"},
    )
    def flaky(succeed_on: int, bad: bool = False) -> int:
        job = remuda.current_job()
        assert job is not None
        if bad:
            raise ValueError("bad is set")
        if job.attempt < succeed_on:
            raise Upstream(f"attempt {job.attempt} failed")
        return job.attempt

    @app.task("picky", retry=RetryPolicy.fixed(0.05, max_attempts=3, when=lambda e: not isinstance(e, KeyError)))
    def picky(missing: bool) -> None:
        if missing:
            raise KeyError("no such key: retrying will not find it")
        raise Upstream("the upstream timed out")

    @app.task("retried_later", retry=RetryPolicy.fixed(2, max_attempts=2))
    def retried_later() -> None:
        raise Upstream("not yet")

    @app.task("broken", retry=RetryPolicy.none())
    def broken() -> None:
        nothing: dict[str, None] = {}
        return nothing["missing"]

    @app.task("refuse", retry=RetryPolicy.none())
    def refuse(why: str) -> TaskResult[int]:
        return TaskResult(err=TaskError("REFUSED", why, {"why": why}))

    @app.task("refuse_for_good", retry=RetryPolicy.fixed(0.05, max_attempts=5))
    def refuse_for_good() -> TaskResult[int]:
        return TaskResult(err=TaskError("GONE", "the order no longer exists", retryable=False))

    @app.task("double", queue="async")
    async def double(x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    @app.task("pid", queue="cpu")
    def pid() -> int:
        return os.getpid()

    @app.task("die", queue="cpu", retry=RetryPolicy.none())
    def die() -> None:
        os._exit(3)

    @app.task("tally", queue="cpu", retry=RetryPolicy.fixed(0.1, max_attempts=3))
    def tally(path: str, seconds: float) -> int:
        return note_and_work(path, seconds)

    @app.task("overrun", queue="cpu", timeout=1.0, retry=RetryPolicy.fixed(0.1, max_attempts=2))
    def overrun(path: str, seconds: float) -> int:
        attempt = note_and_work(path, seconds)
        with open(path, "a") as notes:
            notes.write(f"{os.getpid()} {-attempt}\n")
        return attempt

    @app.task("tally_once", queue="cpu", retry=RetryPolicy.none())
    def tally_once(path: str, seconds: float) -> int:
        return note_and_work(path, seconds)

    @app.task("relay")
    def relay() -> dict[str, Any]:
        job = remuda.current_job()
        assert job is not None
        child = add.send(a=1, b=2)
        return {"traceparent": job.traceparent, "tracestate": job.tracestate, "child": child.id}

    @app.task("fan_group")
    def fan_group() -> dict[str, Any]:
        job = remuda.current_job()
        assert job is not None
        child = add.send(a=1, b=2)
        own = add.options(group="other").send(a=1, b=2)
        run = app.workflow("one_add", [add.node(1, 2)]).start()
        return {"group": job.group, "child": child.id, "own": own.id, "run": run.id}

    @app.task("listing")
    def listing(n: int) -> dict[str, list[int]]:
        return {"items": list(range(1, n + 1))}

    @app.task("square")
    def square(item: int, index: int) -> int:
        return item * item

    @app.task("cube")
    def cube(item: int) -> int:
        return item * item * item

    @app.task("placed")
    def placed(item: int, index: int) -> list[int]:
        return [index, item]

    @app.task("total", retry=RetryPolicy.none())
    def total(values: TaskResult[list[int]]) -> int:
        return sum(values.unwrap())

    @app.task("combine")
    def combine(x: TaskResult[int], y: TaskResult[int]) -> int:
        return x.unwrap() + y.unwrap()

    @app.task("sleepy", retry=RetryPolicy.fixed(0.1, max_attempts=5))
    def sleepy(seconds: float, marker: str | None = None) -> str:
        job = remuda.current_job()
        assert job is not None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if job.is_cancelled():
                if marker:
                    Path(marker).write_text("saw the flag")
                return "stopped early"
            time.sleep(0.02)
        return f"slept on attempt {job.attempt}"

    @app.task("stuck", timeout=0.3, retry=RetryPolicy.none())
    def stuck(marker: str) -> str:
        return sleepy(30, marker)

    @app.task("nap", queue="async")
    async def nap(seconds: float, marker: str | None = None) -> str:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if marker:
                Path(marker).write_text("cancelled")
            raise
        return "woke"

    @app.task("shapes", retry=RetryPolicy.none())
    def shapes(
        when: dt.datetime,
        day: dt.date,
        id: uuid.UUID,
        amount: Decimal,
        color: Color,
        point: Point,
        pair: tuple[int, str],
        order: Order,
        points: list[Point],
        by_name: dict[str, Color],
        wait: dt.timedelta,
        tags: frozenset[str],
        maybe: Point | None = None,
    ) -> Shapes:
        # each argument arrives as its annotation says, or the job fails
        values: list[tuple[object, type]] = [
            (when, dt.datetime), (day, dt.date), (id, uuid.UUID), (amount, Decimal), (color, Color), (point, Point),
            (pair, tuple), (order, Order), (wait, dt.timedelta), (tags, frozenset),
            *((p, Point) for p in points), *((c, Color) for c in by_name.values()),
        ]
        for value, kind in values:
            if not isinstance(value, kind):
                raise TypeError(f"{value!r} is not a {kind.__name__}")
        return Shapes(when, day, id, amount, color, point, pair, order, points, by_name, wait, tags, maybe)

    @app.task("wait_for", retry=RetryPolicy.fixed(0.05, max_attempts=3))
    def wait_for(wait: dt.timedelta) -> float:
        return wait.total_seconds()

    @app.task("tidy_async", queue="async", retry=RetryPolicy.fixed(0.1, max_attempts=3))
    async def tidy_async(marker: str) -> str:
        job = remuda.current_job()
        assert job is not None
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            # a clean-up that takes a while: the job is still this worker's meanwhile
            await asyncio.sleep(0.3)
            info = app.handle(job.id).info()
            Path(marker).write_text(str(info["state"]) if info else "gone")
            raise
        return "slept a minute"

    @app.task("located")
    def located(x: int) -> TaskResult[Point]:
        return TaskResult(ok=Point(x, x, dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)))

    @app.task("patient", retry=RetryPolicy.fixed(0.1, max_attempts=3))
    def patient(marker: str) -> str:
        return wait_for_stop(marker)

    @app.task("charge_step")
    def charge_step(log: str, ready: str) -> str:
        return charge_then_hang(log, ready)

    @app.task("charge_step_cpu", queue="cpu")
    def charge_step_cpu(log: str, ready: str) -> str:
        return charge_then_hang(log, ready)

    @app.task("charge_step_async", queue="async")
    async def charge_step_async(log: str, ready: str) -> str:
        job = remuda.current_job()
        assert job is not None

        async def charge() -> Charge:
            return charge_card(log)

        made = await remuda.step_async("charge", charge)
        assert isinstance(made, Charge), made
        if job.attempt == 1:
            Path(ready).write_text("charged")
            await asyncio.sleep(60)
        return made.id

    @app.task("doze", retry=RetryPolicy.none())
    def doze(log: str, seconds: float) -> str:
        with open(log, "a") as runs:
            runs.write("run\n")
        remuda.job().sleep(seconds)
        return "woke"

    @app.task("doze_async", queue="async", retry=RetryPolicy.none())
    async def doze_async(log: str, seconds: float) -> str:
        with open(log, "a") as runs:
            runs.write("run\n")
        await remuda.job().sleep_async(dt.timedelta(seconds=seconds))
        return "woke"

    @app.task("doze_cpu", queue="cpu", retry=RetryPolicy.none())
    def doze_cpu(log: str, seconds: float) -> str:
        with open(log, "a") as runs:
            runs.write("run\n")
        remuda.job().sleep(seconds)
        return "woke"

    @app.task("quote", retry=RetryPolicy.none())
    def quote(log: str) -> int:
        def ask() -> int:
            with open(log, "a") as tries:
                tries.write("try\n")
            if len(Path(log).read_text().splitlines()) < 3:
                raise Upstream("the quote service is busy")
            return 42

        return remuda.step_with("quote", remuda.StepOptions(retries=3, backoff=0.01), ask)

    @app.task("slow_quote", queue="async", retry=RetryPolicy.none())
    async def slow_quote(seconds: float, own_timeout: bool = False) -> int:
        async def ask() -> int:
            if own_timeout:
                raise TimeoutError("the quote service's own time ran out")
            await asyncio.sleep(seconds)
            return 1

        return await remuda.step_with_async("quote", remuda.StepOptions(timeout=0.05), ask)

    @app.task("flaky_step", retry=RetryPolicy.fixed(0.05, max_attempts=3))
    def flaky_step(log: str) -> int:
        job = remuda.job()  # typed as there: no check needed

        def send() -> int:
            with open(log, "a") as runs:
                runs.write(f"run {remuda.step_key('send')}\n")
            if job.attempt == 1:
                raise Upstream("the mail server did not answer")
            return job.attempt

        return remuda.step("send", send)

    @app.task("plot", retry=RetryPolicy.fixed(0.05, max_attempts=3))
    def plot(point: Point, label: str = "", scale: float = 1.0) -> float:
        assert isinstance(point.x, int) and isinstance(label, str), (point, label)
        return point.x * scale

    @app.task("sum_batch", batch_size=2, batch_wait=3600, retry=RetryPolicy.fixed(0.05, max_attempts=3))
    def sum_batch(values: list[int]) -> int:
        return sum(values)

    @app.task("digest", batch_size=3, batch_wait=3600)
    def digest(points: list[Point]) -> int:
        assert all(isinstance(p, Point) for p in points), points
        return sum(p.x for p in points)

    @app.task("patient_timed", timeout=0.5, retry=RetryPolicy.fixed(0.1, max_attempts=2))
    def patient_timed(marker: str) -> str:
        return wait_for_stop(marker)

    @app.task("patient_async", queue="async", retry=RetryPolicy.fixed(0.1, max_attempts=3))
    async def patient_async(marker: str) -> str:
        job = remuda.current_job()
        assert job is not None
        path = Path(marker)
        if path.exists():
            return f"done on attempt {job.attempt} after {path.read_text()}"
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            path.write_text(str(job.stop_reason))
            return "partial"
        return "slept a minute"

    return app


def wait_for_stop(marker: str) -> str:
    """The first run waits for its stop and notes its reason in ``marker`` (returning a
    partial result); a later run finishes at once, saying what stopped the first."""
    job = remuda.current_job()
    assert job is not None
    path = Path(marker)
    if path.exists():
        return f"done on attempt {job.attempt} after {path.read_text()}"
    reason = job.stop_reason
    while reason is None:
        time.sleep(0.02)
        reason = job.stop_reason
    path.write_text(reason)
    return "partial"


app = make_app(os.environ["REMUDA_TEST_URL"]) if "REMUDA_TEST_URL" in os.environ else None
