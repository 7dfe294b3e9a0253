"""Shutdown, cancellation and death of a Python worker: SIGTERM lets a job finish or gives
it back, cancel reaches the body's flag, SIGKILL's jobs are rescued by another worker."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import remuda
from conftest import StartWorker, job_info, wait_state


def test_sigterm_lets_short_jobs_finish_and_stops_long_ones(app: remuda.App, start_worker: StartWorker) -> None:
    worker = start_worker()
    sleepy = app.tasks["sleepy"]
    short = sleepy.send(seconds=0.5)
    long = sleepy.send(seconds=60)
    wait_state(short, "running")
    wait_state(long, "running")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.stderr()
    assert short.get(timeout=5).unwrap() == "slept on attempt 1", "finished within shutdown_timeout"
    info = job_info(long)
    # the long one saw its flag and returned early: cut short, so given back unfinished
    assert info["state"] == "available", info
    assert "stopped;" in worker.stderr()
    assert "waiting up to" in worker.stderr(), "the stop says what it waits for"


def wait_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # created before it is written: an empty file is not its text yet
        text = path.read_text() if path.exists() else ""
        if text:
            return text
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def test_cancel_reaches_a_running_body_sync_and_async(app: remuda.App, start_worker: StartWorker, tmp_path: Path) -> None:
    start_worker()
    sync_marker, async_marker = tmp_path / "sync", tmp_path / "async"
    sync_job = app.tasks["sleepy"].send(seconds=60, marker=str(sync_marker))
    async_job = app.tasks["nap"].send(seconds=60, marker=str(async_marker))
    wait_state(sync_job, "running")
    wait_state(async_job, "running")
    assert sync_job.cancel() == "stopping"
    assert async_job.cancel() == "stopping"
    assert wait_file(sync_marker) == "saw the flag", "the flag reached the thread"
    assert wait_file(async_marker) == "cancelled", "the coroutine was cancelled"
    assert sync_job.get(timeout=10).err_value.code == "CANCELLED"
    assert async_job.get(timeout=10).err_value.code == "CANCELLED"


def test_a_timeout_fails_the_attempt_and_stops_the_body(app: remuda.App, start_worker: StartWorker, tmp_path: Path) -> None:
    start_worker()
    marker = tmp_path / "stuck"
    result = app.tasks["stuck"].send(marker=str(marker)).get(timeout=30)
    assert result.err_value.code == "TIMEOUT", result
    assert wait_file(marker) == "saw the flag", "the body was told to stop"


def test_sigint_stops_the_worker_gracefully_with_its_report(app: remuda.App, start_worker: StartWorker) -> None:
    worker = start_worker()
    assert app.tasks["add"].send(1, 1).get(timeout=30).unwrap() == 2
    worker.signal(signal.SIGINT)
    assert worker.wait(30) == 0, worker.stderr()
    log = worker.stderr()
    assert "stopped; 1 completed" in log and "Traceback" not in log, log


def test_sigkill_jobs_are_rescued_by_another_worker(app: remuda.App, start_worker: StartWorker) -> None:
    doomed = start_worker()
    job = app.tasks["sleepy"].send(seconds=1)
    wait_state(job, "running")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    start_worker()
    assert job.get(timeout=60).unwrap() == "slept on attempt 2"
    assert [e["code"] for e in job_info(job)["errors"]] == ["WORKER_LOST"]
