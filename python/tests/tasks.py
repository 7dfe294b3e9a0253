"""The tasks the tests run, declared on an app per test database (``make_app``); a worker
process imports ``tasks:app``, made from ``$REMUDA_TEST_URL``."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import remuda
from remuda import RetryPolicy, TaskError, TaskResult


class Upstream(Exception):
    """A failure worth retrying."""


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

    @app.task("broken", retry=RetryPolicy.none())
    def broken() -> None:
        return {}["missing"]  # type: ignore[no-any-return]

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

    @app.task("listing")
    def listing(n: int) -> dict[str, list[int]]:
        return {"items": list(range(1, n + 1))}

    @app.task("square")
    def square(item: int, index: int) -> int:
        return item * item

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

    return app


app = make_app(os.environ["REMUDA_TEST_URL"]) if "REMUDA_TEST_URL" in os.environ else None
