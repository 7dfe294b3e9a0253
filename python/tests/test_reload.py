"""``python -m remuda worker … --reload``: the development worker runs the code as it is
after each edit, waits out an edit that breaks the import, and stops with its worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import remuda

APP = """
import os

import remuda

app = remuda.App(os.environ["REMUDA_TEST_URL"])


@app.task("code_version")
def code_version() -> str:
    return "{version}"
"""


class Lines:
    """A process's stderr, read as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert process.stderr is not None
        self.thread = threading.Thread(target=self.read, args=(process,), daemon=True)
        self.thread.start()

    def read(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, count: int = 1, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(text in line for line in self.lines) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never said {count} time(s): {''.join(self.lines)}")


def edit(path: Path, text: str) -> None:
    """Writes ``text``, its modification time moved on so that the change shows whatever
    the file system's time resolution."""
    before = path.stat().st_mtime if path.exists() else 0.0
    path.write_text(text)
    later = max(time.time(), before + 2)
    os.utime(path, (later, later))


@pytest.mark.filterwarnings("ignore:no live worker runs:RuntimeWarning")
def test_the_reloading_worker_runs_the_code_as_edited_and_outlives_a_broken_edit(database_url: str, tmp_path: Path) -> None:
    module = tmp_path / "reloaded_app.py"
    edit(module, APP.format(version="v1"))
    sender = remuda.App(database_url)

    @sender.task("code_version")
    def code_version() -> str:
        return "sent from the test: never run here"

    env = {**os.environ, "REMUDA_TEST_URL": database_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "remuda", "worker", "reloaded_app:app", "--reload", "--heartbeat-interval", "200ms"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    err = Lines(process)
    try:
        err.wait_for("remuda worker: running code_version")
        assert code_version.send().get(timeout=60).unwrap() == "v1"

        edit(module, APP.format(version="v2"))
        err.wait_for("reloaded_app.py changed: restarting the worker")
        err.wait_for("remuda worker: running code_version", count=2)
        assert code_version.send().get(timeout=60).unwrap() == "v2", "the code as edited"

        edit(module, "def broken(:\n")
        err.wait_for("the worker exited with 2: it starts again when a file changes")
        edit(module, APP.format(version="v3"))
        err.wait_for("remuda worker: running code_version", count=3)
        assert code_version.send().get(timeout=60).unwrap() == "v3", "the edit after a broken one is run"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    err.thread.join(timeout=10)
    assert code == 0, "".join(err.lines)
    assert sum("stopped;" in line for line in err.lines) == 3, "each worker stopped as a worker stops: " + "".join(err.lines)


def test_an_import_failing_inside_the_app_module_is_said_with_where(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "needs_missing.py").write_text("import remuda\nimport not_installed_anywhere\n\napp = remuda.App()\n")
    env = {**os.environ, "REMUDA_TEST_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "remuda", "worker", "needs_missing:app", "--once"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "importing needs_missing failed" in done.stderr and 'needs_missing.py", line 2' in done.stderr, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "remuda", "worker", "no_such_module:app", "--once"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "error: No module named 'no_such_module'" in done.stderr, done.stderr


def test_reload_refuses_once_and_a_missing_directory(database_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "REMUDA_TEST_URL": database_url}
    for args, said in (
        (["--reload", "--once"], "--reload restarts the worker until it is stopped: it does not go with --once"),
        (["--reload", "--reload-dir", "nowhere"], "--reload-dir " + str(tmp_path / "nowhere") + ": not a directory"),
        (["--reload-dir", "."], "--reload-dir goes with --reload"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "remuda", "worker", "tasks:app", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert said in done.stderr, done.stderr
