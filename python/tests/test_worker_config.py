"""The Python worker's command line: the binary's config file (command tasks beside Python
ones, mistakes named with the file), --once, and the benchmark's workload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

import remuda
from conftest import HERE


def python_m_remuda(database_url: str | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert database_url is not None, "the app's database"
    env = {**os.environ, "REMUDA_TEST_URL": database_url}
    return subprocess.run([sys.executable, "-m", "remuda", *args], cwd=HERE, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_command_tasks_of_the_config_file_run_beside_python_ones(app: remuda.App, db: psycopg.Connection[Any], tmp_path: Path) -> None:
    config = tmp_path / "remuda.toml"
    config.write_text('[worker]\nconcurrency = 4\n\n[tasks.shout]\ncommand = ["sh", "-c", "cat >/dev/null; echo \'{\\"said\\": \\"HEY\\"}\'"]\n')
    row = db.execute("SELECT remuda.enqueue('shout', '{\"word\": \"hey\"}', max_attempts => 1)").fetchone()
    assert row is not None
    shout = row[0]
    added = app.tasks["add"].send(2, 2)
    done = python_m_remuda(app.database_url, "worker", "tasks:app", "--config", str(config), "--once")
    assert done.returncode == 0, done.stderr
    assert added.get(timeout=5).unwrap() == 4
    result = app.handle(shout).get(timeout=5)
    assert result.unwrap() == {"said": "HEY"}, result


def test_a_mistake_in_the_config_file_is_named_with_the_file(app: remuda.App, tmp_path: Path) -> None:
    config = tmp_path / "remuda.toml"
    config.write_text("[worker]\nconcurency = 4\n")
    refused = python_m_remuda(app.database_url, "worker", "tasks:app", "--config", str(config))
    assert refused.returncode == 2, refused.stderr
    assert str(config) in refused.stderr and "concurency" in refused.stderr


def test_a_bad_setting_without_a_config_file_names_no_file(app: remuda.App, tmp_path: Path) -> None:
    with pytest.raises(remuda.InputValueError) as refused:
        app.run_worker(concurrency=0, once=True)
    message = refused.value.message
    assert message.startswith("invalid worker settings: concurrency is 0"), message
    assert "remuda.toml" not in message, "no config file was given: none is blamed"
    config = tmp_path / "remuda.toml"
    config.write_text("[worker]\nconcurrency = 4\n")
    refused_file = python_m_remuda(app.database_url, "worker", "tasks:app", "--config", str(config), "--concurrency", "0", "--once")
    assert refused_file.returncode == 2, refused_file.stderr
    assert f"{config}: invalid worker config: [worker] concurrency is 0" in refused_file.stderr, refused_file.stderr
    assert "(with the command-line overrides)" in refused_file.stderr, "the flag is named as what to change"


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_once_exits_1_when_a_job_failed(app: remuda.App) -> None:
    app.tasks["broken"].send()
    done = python_m_remuda(app.database_url, "worker", "tasks:app", "--once")
    assert done.returncode == 1, done.stderr
    assert "1 failed" in done.stderr


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_once_wait_says_how_far_ahead_a_retry_is_waited_for(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    handle = app.tasks["retried_later"].send()
    due_only = python_m_remuda(app.database_url, "worker", "tasks:app", "--once", "--once-wait", "0s")
    assert due_only.returncode == 0, due_only.stderr
    row = db.execute("SELECT state::text, attempt FROM remuda.jobs WHERE id = %s", [handle.id]).fetchone()
    assert row == ("scheduled", 1), f"the retry 2 s ahead was not waited for: {row}"
    waited = python_m_remuda(app.database_url, "worker", "tasks:app", "--once", "--once-wait", "10s")
    assert waited.returncode == 1 and "1 failed" in waited.stderr, waited.stderr
    row = db.execute("SELECT state::text, attempt FROM remuda.jobs WHERE id = %s", [handle.id]).fetchone()
    assert row == ("failed", 2), row
    bad = python_m_remuda(app.database_url, "worker", "tasks:app", "--once", "--once-wait", "soon")
    assert bad.returncode == 2 and "once_wait" in bad.stderr, bad.stderr
    again = app.tasks["retried_later"].send()
    app.run_worker(once=True, once_wait=0)
    row = db.execute("SELECT state::text, attempt FROM remuda.jobs WHERE id = %s", [again.id]).fetchone()
    assert row == ("scheduled", 1), f"run_worker(once_wait=0) stops at what is due: {row}"


def test_the_benchmark_drains_every_job_and_measures_pickup(database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "remuda", "bench", "--jobs", "300", "--pickup", "5", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["completed"] == 300
    assert figures["pickup_ms"]["p50"] > 0


def test_limits_declared_on_a_task_are_set_on_its_queue_when_a_worker_starts(
    app: remuda.App, db: psycopg.Connection[Any]
) -> None:
    @app.task("charged", queue="payments", max_running=3, key_limit=1, rate=(100, 2), rate_burst=5, rate_per="key")
    def charged() -> None:
        return None

    @app.task("refunded", queue="payments", key_limit=1)
    def refunded() -> None:
        return None

    with pytest.raises(remuda.InputValueError, match="key_limit=2 on queue 'payments', where another task declares key_limit=1"):

        @app.task("disputed", queue="payments", key_limit=2)
        def disputed() -> None:
            return None

    with pytest.raises(remuda.InputValueError, match="rate_burst or rate_per without a rate"):
        app.task("bursty", rate_burst=5)(charged.fn)
    with pytest.raises(remuda.InputTypeError, match="rate='100/s': give \\(n, seconds\\)"):
        app.task("rated", rate="100/s")(charged.fn)  # type: ignore[call-overload]
    assert db.execute("SELECT count(*) FROM remuda.queues WHERE name = 'payments'").fetchone() == (0,), "set by a worker, not by a declaration"
    report = app.run_worker(queues=["payments"], once=True)
    assert report["completed"] == 0
    row = db.execute(
        "SELECT max_running, key_limit, rate_limit, rate_period_ms, rate_burst, rate_per FROM remuda.queues WHERE name = 'payments'"
    ).fetchone()
    assert row == (3, 1, 100, 2000, 5, "key"), row
