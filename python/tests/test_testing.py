"""The testing helpers a team tests its tasks with: eager runs and recorded sends without a
worker, assertions on the jobs waiting in the database, a drain, and the pytest plugin's
fixtures in a project of their own."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

import remuda
from conftest import libpq
from remuda import testing


@dataclass(frozen=True)
class Window:
    start: dt.datetime
    hours: int


class Refused(Exception):
    """An error the app maps to a code."""


def declare(app: remuda.App) -> tuple[Any, ...]:
    @app.task("eager_window_end")
    def window_end(window: Window) -> dt.datetime:
        return window.start + dt.timedelta(hours=window.hours)

    @app.task("eager_refuse", exception_mapper={Refused: "REFUSED"})
    def refuse(why: str) -> None:
        raise Refused(why)

    @app.task("eager_fan_out")
    def fan_out(n: int) -> int:
        for i in range(n):
            window_end.send(Window(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), i))
        return n

    @app.task("eager_whoami")
    async def whoami() -> str:
        await asyncio.sleep(0)
        job = remuda.current_job()
        assert job is not None
        charged = remuda.step("charge", lambda: 1) + remuda.step("charge", lambda: 2)
        job.sleep(3600)  # a durable sleep: an eager run does not wait for it
        return f"{job.kind}#{job.attempt}+{charged}"

    return window_end, refuse, fan_out, whoami


def test_eager_runs_each_send_at_once_as_a_worker_would_and_writes_nothing(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    window_end, refuse, fan_out, whoami = declare(app)
    with testing.eager(app) as sent:
        end = window_end.send(Window(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), 5))
        assert end.get().unwrap() == dt.datetime(2026, 1, 1, 5, tzinfo=dt.timezone.utc), "the result as the task's annotation reads it"
        failed = refuse.send("no")
        result = failed.get()
        assert result.is_err() and result.err is not None
        assert (result.err.code, result.err.message) == ("REFUSED", "no"), "mapped as the worker maps it"
        assert failed.info() is not None and failed.info()["state"] == "failed"
        assert fan_out.send(3).get().unwrap() == 3
        assert [job.args["window"]["hours"] for job in sent.of(window_end)] == [5, 0, 1, 2], "a body's sends run in turn"
        assert whoami.send().get().unwrap() == "eager_whoami#1+2", "an async body runs, current_job() set"
        with pytest.raises(remuda.InputValueError, match="contains the control character"):
            refuse.options(queue="two\nlines").send("refused as a real send is")
        with pytest.raises(remuda.InputTypeError, match="does not fit its annotation: at .start"):
            window_end.send({"start": "not a time", "hours": 1})
    assert db.execute("SELECT count(*) FROM remuda.jobs").fetchone() == (0,), "eager sends write no job"
    with testing.eager(app, propagate=True), pytest.raises(Refused, match="loudly"):
        refuse.send("loudly")


def test_eager_runs_from_inside_a_running_event_loop(app: remuda.App) -> None:
    _, _, _, whoami = declare(app)

    async def main() -> str:
        with testing.eager(app):
            handle = await whoami.options(queue="elsewhere").send_in_async(object())
            return str((await handle.get_async()).unwrap())

    assert asyncio.run(main()) == "eager_whoami#1+2"


def test_recording_keeps_the_sends_and_says_what_was_sent_when_an_assertion_fails(app: remuda.App) -> None:
    window_end, refuse, _, _ = declare(app)
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    with testing.recording(app) as sent:
        handle = window_end.send(Window(noon, 1))
        refuse.options(queue="strict", priority=5).send("no")
        refuse.send_many([refuse.call("a"), refuse.call("b")])
        assert handle.get().is_err(), "recorded, not run"
        sent.assert_enqueued(window_end, {"window": {"start": noon, "hours": 1}})
        sent.assert_enqueued(refuse, {"why": "no"}, queue="strict", priority=5)
        sent.assert_enqueued("eager_refuse", {"why": "b"})
        sent.refute_enqueued(refuse, {"why": "no"}, queue="default")
        with pytest.raises(AssertionError, match=r"no job of eager_refuse with args \{'why': 'c'\}.*sent: eager_window_end\(.*eager_refuse\(\{\"why\": \"no\"\}\)"):
            sent.assert_enqueued(refuse, {"why": "c"})
        with pytest.raises(AssertionError, match="1 job"):
            sent.refute_enqueued(window_end)
    assert [job.state for job in sent.jobs] == ["available"] * 4


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before a worker runs
def test_assert_enqueued_reads_the_waiting_jobs_and_drain_runs_them(app: remuda.App) -> None:
    window_end, refuse, _, _ = declare(app)
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    window_end.send(Window(noon, 1))
    refuse.options(queue="strict", delay=3600).send("later")
    job = testing.assert_enqueued(app, window_end, {"window": {"start": noon}})
    assert job["state"] == "available"
    assert testing.assert_enqueued(app, refuse, {"why": "later"}, queue="strict")["state"] == "scheduled"
    testing.refute_enqueued(app, refuse, {"why": "later"}, queue="default")
    with pytest.raises(AssertionError, match=r"no waiting job of eager_window_end with args \{'window': \{'hours': 2\}\}; waiting of that kind: \[\('eager_window_end'"):
        testing.assert_enqueued(app, window_end, {"window": {"hours": 2}})
    report = testing.drain(app, queues=["default"])
    assert report["completed"] == 1, report
    testing.refute_enqueued(app, window_end)
    assert len(testing.enqueued(app, refuse)) == 1, "a job due later is left waiting"


PROJECT_APP = """
import remuda

app = remuda.App()

@app.task("double")
def double(n: int) -> int:
    return 2 * n
"""

PROJECT_TESTS = """
from typing import Any

import remuda
from remuda import testing
from project_app import double


def test_a_worker_runs_what_is_sent(remuda_app: remuda.App, remuda_worker: Any) -> None:
    assert double.send(21).get(timeout=60).unwrap() == 42


def test_each_test_has_a_database_of_its_own(remuda_app: remuda.App) -> None:
    testing.refute_enqueued(remuda_app, double)
    double.send(1)
    testing.assert_enqueued(remuda_app, double, {"n": 1})


def test_the_next_test_does_not_see_it(remuda_app: remuda.App) -> None:
    testing.refute_enqueued(remuda_app, double)


def test_eager(remuda_eager: testing.Sent) -> None:
    assert double.send(4).get().unwrap() == 8
    remuda_eager.assert_enqueued(double, {"n": 4})
"""


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")
def test_the_pytest_plugin_gives_each_test_a_database_and_the_app_bound_to_it(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "project_app.py").write_text(textwrap.dedent(PROJECT_APP))
    (tmp_path / "test_project.py").write_text(textwrap.dedent(PROJECT_TESTS))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["remuda.pytest_plugin"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\nremuda_app = project_app:app\nfilterwarnings = ignore:no worker is running:RuntimeWarning\n")
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout
    with psycopg.connect(libpq(database_url)) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE %s", (f"{conn.info.dbname}_test_%",)).fetchone()
    assert left == (0,), "every test's database is dropped after it"
    (tmp_path / "pytest.ini").write_text("[pytest]\nremuda_app = project_app\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path), "-k", "own"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "name the app as module:attribute" in done.stdout + done.stderr, done.stdout + done.stderr
