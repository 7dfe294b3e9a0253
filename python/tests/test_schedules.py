"""Schedules declared in code (``@app.schedule``): checked where they are declared, declared
by the worker as it starts, fired by it, and kept apart from the config file's."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import remuda


def test_a_schedule_declared_in_code_is_declared_by_the_worker_and_fires_with_its_args(
    app: remuda.App, db: psycopg.Connection[Any]
) -> None:
    @app.schedule(every=dt.timedelta(seconds=1), args={"a": 2, "b": 3}, overlap="skip")
    @app.task("summed", queue="sums")
    def summed(a: int, b: int) -> int:
        return a + b

    @app.schedule("0 3 * * *", tz="Europe/Berlin", name="nightly_sum", args={"a": 1, "b": 1}, priority=5)
    @app.schedule(daily="04:30", name="early_sum", args={"a": 0, "b": 0}, queue="other")
    @app.task("nightly")
    def nightly(a: int, b: int) -> int:
        return a * b

    assert db.execute("SELECT count(*) FROM remuda.schedules").fetchone() == (0,), "declared by a worker, not by the decorator"
    stop = threading.Event()
    reports: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: reports.append(app.run_worker(queues=["sums"], stop=stop)))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        done: list[tuple[Any, ...]] = []
        while time.monotonic() < deadline and len(done) < 2:
            done = db.execute("SELECT result FROM remuda.jobs WHERE kind = 'summed' AND state = 'completed'").fetchall()
            time.sleep(0.1)
    finally:
        stop.set()
        worker.join(timeout=30)
    assert not worker.is_alive(), "the worker stops when told"
    assert len(done) >= 2, f"a schedule of every second fired {len(done)} completed jobs in 30 s"
    assert all(row == ({"ok": 5},) for row in done), done
    rows = db.execute("SELECT name, kind, queue, pattern, tz, args, priority, overlap FROM remuda.schedules ORDER BY name").fetchall()
    assert rows == [
        ("early_sum", "nightly", "other", "daily 04:30", "UTC", {"a": 0, "b": 0}, 0, "allow"),
        ("nightly_sum", "nightly", "default", "0 3 * * *", "Europe/Berlin", {"a": 1, "b": 1}, 5, "allow"),
        ("summed", "summed", "sums", "every 1s", "UTC", {"a": 2, "b": 3}, 0, "skip"),
    ], rows


def test_a_schedule_is_refused_where_it_is_declared_when_its_jobs_could_not_run(app: remuda.App) -> None:
    @app.task("reindex")
    def reindex(rev: int) -> int:
        return rev

    with pytest.raises(remuda.InputValueError, match="schedule reindex: cron: .*"):
        app.schedule("61 * * * *", args={"rev": 1})(reindex)
    with pytest.raises(remuda.InputTypeError, match=r"schedule reindex: give exactly one of .* \(given: cron=, daily=\)"):
        app.schedule("0 3 * * *", daily="03:00", args={"rev": 1})(reindex)
    with pytest.raises(remuda.InputTypeError, match=r"schedule reindex: give exactly one of .* \(given: none\)"):
        app.schedule(args={"rev": 1})(reindex)
    with pytest.raises(remuda.InputTypeError, match="schedule reindex: .*the args have no rev"):
        app.schedule("0 3 * * *")(reindex)
    with pytest.raises(remuda.InputTypeError, match='schedule reindex: .*rev="x" cannot be read as annotated'):
        app.schedule("0 3 * * *", args={"rev": "x"})(reindex)
    with pytest.raises(remuda.InputValueError, match="schedule reindex: every: .*whole seconds"):
        app.schedule(every=1.5, args={"rev": 1})(reindex)
    with pytest.raises(remuda.InputTypeError, match="schedule reindex: priority='high': give an int, not str"):
        app.schedule("0 3 * * *", args={"rev": 1}, priority="high")(reindex)  # type: ignore[arg-type]
    with pytest.raises(remuda.InputTypeError, match="schedule reindex: max_attempts=True: give an int, not bool"):
        app.schedule("0 3 * * *", args={"rev": 1}, max_attempts=True)(reindex)
    with pytest.raises(remuda.InputValueError, match="schedule reindex: tz: .*Mars/Olympus"):
        app.schedule("0 3 * * *", args={"rev": 1}, tz="Mars/Olympus")(reindex)
    with pytest.raises(remuda.InputValueError, match="schedule reindex: unknown variant `sometimes`|schedule reindex: overlap: .*sometimes"):
        app.schedule("0 3 * * *", args={"rev": 1}, overlap="sometimes")(reindex)  # type: ignore[arg-type]
    with pytest.raises(remuda.InputTypeError, match="@app.schedule decorates a task, not .*: put it above @app.task"):

        @app.schedule("0 3 * * *")  # type: ignore[type-var]
        def plain() -> None:
            return None

    app.schedule("0 3 * * *", args={"rev": 1})(reindex)
    with pytest.raises(remuda.InputValueError, match="schedule reindex is declared twice .*give each schedule its own name="):
        app.schedule(daily="03:00", args={"rev": 2})(reindex)
    assert list(app.schedules) == ["reindex"], "only the schedule that was accepted is kept"


def test_a_schedule_declared_both_in_code_and_in_the_config_file_is_refused(app: remuda.App, tmp_path: Path) -> None:
    @app.schedule("0 3 * * *", name="nightly")
    @app.task("report")
    def report() -> None:
        return None

    config = tmp_path / "remuda.toml"
    config.write_text('[schedules.nightly]\nkind = "report"\ndaily = "03:00"\n')
    with pytest.raises(remuda.InputValueError, match=r"schedule nightly is declared both in code and in the config file's \[schedules.nightly\]"):
        app.run_worker(config=str(config), once=True)
