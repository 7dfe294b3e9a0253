"""A database of its own per test (created from ``$DATABASE_URL``, dropped after), the test
app connected to it, and worker processes (``python -m remuda worker``) that are always
stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Protocol

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import remuda

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import tasks  # noqa: E402


def base_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("DATABASE_URL is not set: run the tests through scripts/test")
    return url


def job_info(handle: remuda.TaskHandle[Any]) -> dict[str, Any]:
    """The job as stored (it exists)."""
    info = handle.info()
    assert info is not None, f"there is no job {handle.id}"
    return info


def wait_state(handle: remuda.TaskHandle[Any], state: str, timeout: float = 30.0) -> dict[str, Any]:
    """The job once it is in ``state`` (polled; a failure after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = job_info(handle)
        if info["state"] == state:
            return info
        time.sleep(0.05)
    raise AssertionError(f"job {handle.id} never reached {state}: {handle.info()}")


def libpq(url: str) -> str:
    """The URL as libpq takes it (without remuda's own parameters)."""
    params = conninfo_to_dict(url)
    params.pop("pooler", None)
    return make_conninfo("", **params)


@pytest.fixture
def database_url() -> Iterator[str]:
    base = base_url()
    name = f"remuda_py_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq(base), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = conninfo_to_dict(base)
    params["dbname"] = name
    url = make_conninfo("", **params)
    try:
        yield url
    finally:
        with psycopg.connect(libpq(base), autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def app(database_url: str) -> remuda.App:
    return tasks.make_app(database_url)


@pytest.fixture
def db(database_url: str, app: remuda.App) -> Iterator[psycopg.Connection[Any]]:
    app.client  # migrated before the test looks
    with psycopg.connect(libpq(database_url), autocommit=True) as conn:
        yield conn


FAST = """
[worker]
heartbeat_interval = "200ms"
rescue_after = "1500ms"
maintenance_interval = "200ms"
promote_interval = "100ms"
poll_interval = "500ms"
shutdown_timeout = "5s"
cancel_grace = "500ms"
"""


class WorkerProcess:
    """``python -m remuda worker tasks:app`` in a process of its own."""

    def __init__(self, database_url: str, tmp: Path, *args: str, settings: str = FAST) -> None:
        config = tmp / f"worker-{uuid.uuid4().hex[:6]}.toml"
        config.write_text(settings)
        env = {**os.environ, "REMUDA_TEST_URL": database_url}
        self.log = tmp / f"{config.stem}.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "remuda", "worker", "tasks:app", "--config", str(config), *args],
                cwd=HERE,
                env=env,
                stderr=log,
            )
        self.database_url = database_url

    def wait_registered(self, timeout: float = 30) -> None:
        """Until the worker is in ``remuda.workers``."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(libpq(self.database_url), autocommit=True) as conn:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise AssertionError(f"the worker exited: {self.stderr()}")
                row = conn.execute("SELECT count(*) FROM remuda.workers WHERE pid = %s", [self.process.pid]).fetchone()
                if row and row[0] > 0:
                    return
                time.sleep(0.05)
        raise AssertionError("the worker did not register")

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float = 30) -> int:
        return self.process.wait(timeout)

    def stderr(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class StartWorker(Protocol):
    """The ``start_worker`` fixture: starts ``python -m remuda worker tasks:app`` with these
    arguments and the worker config ``settings`` (``FAST`` by default), and waits until it
    is registered."""

    def __call__(self, *args: str, settings: str = FAST) -> WorkerProcess: ...


@pytest.fixture
def start_worker(database_url: str, app: remuda.App, tmp_path: Path) -> Iterator[StartWorker]:
    app.client  # the schema exists before workers start
    started: list[WorkerProcess] = []

    def start(*args: str, settings: str = FAST) -> WorkerProcess:
        worker = WorkerProcess(database_url, tmp_path, *args, settings=settings)
        started.append(worker)
        worker.wait_registered()
        return worker

    yield start
    for worker in started:
        worker.stop()
