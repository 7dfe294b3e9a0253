"""Shutdown, cancellation and death of a Python worker: SIGTERM lets a job finish or gives
it back, cancel reaches the body's flag, SIGKILL's jobs are rescued by another worker."""

from __future__ import annotations

import signal
import time

import remuda


def wait_state(handle, state, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = handle.info()
        if info["state"] == state:
            return info
        time.sleep(0.05)
    raise AssertionError(f"job {handle.id} never reached {state}: {handle.info()}")


def test_sigterm_lets_short_jobs_finish_and_stops_long_ones(app, start_worker):
    worker = start_worker()
    sleepy = app.tasks["sleepy"]
    short = sleepy.send(seconds=0.5)
    long = sleepy.send(seconds=60)
    wait_state(short, "running")
    wait_state(long, "running")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.stderr()
    assert short.get(timeout=5).unwrap() == "slept on attempt 1", "finished within shutdown_timeout"
    info = long.info()
    # the flag stopped the long one: it returned early (completed) or was given back
    assert info["state"] in ("completed", "available"), info
    if info["state"] == "completed":
        assert long.get(timeout=1).unwrap() == "stopped early"
    assert "stopped;" in worker.stderr()
    assert "waiting up to" in worker.stderr(), "the stop says what it waits for"


def wait_file(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def test_cancel_reaches_a_running_body_sync_and_async(app, start_worker, tmp_path):
    start_worker()
    sync_marker, async_marker = tmp_path / "sync", tmp_path / "async"
    sync_job = app.tasks["sleepy"].send(seconds=60, marker=str(sync_marker))
    async_job = app.tasks["nap"].send(seconds=60, marker=str(async_marker))
    wait_state(sync_job, "running")
    wait_state(async_job, "running")
    assert sync_job.cancel() == "running"
    assert async_job.cancel() == "running"
    assert wait_file(sync_marker) == "saw the flag", "the flag reached the thread"
    assert wait_file(async_marker) == "cancelled", "the coroutine was cancelled"
    assert sync_job.get(timeout=10).err.code == "CANCELLED"
    assert async_job.get(timeout=10).err.code == "CANCELLED"


def test_a_timeout_fails_the_attempt_and_stops_the_body(app, start_worker, tmp_path):
    start_worker()
    marker = tmp_path / "stuck"
    result = app.tasks["stuck"].send(marker=str(marker)).get(timeout=30)
    assert result.err.code == "TIMEOUT", result
    assert wait_file(marker) == "saw the flag", "the body was told to stop"


def test_sigint_stops_the_worker_gracefully_with_its_report(app, start_worker):
    worker = start_worker()
    assert app.tasks["add"].send(1, 1).get(timeout=30).unwrap() == 2
    worker.signal(signal.SIGINT)
    assert worker.wait(30) == 0, worker.stderr()
    log = worker.stderr()
    assert "stopped; 1 completed" in log and "Traceback" not in log, log


def test_sigkill_jobs_are_rescued_by_another_worker(app, start_worker):
    doomed = start_worker()
    job = app.tasks["sleepy"].send(seconds=1)
    wait_state(job, "running")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    start_worker()
    assert job.get(timeout=60).unwrap() == "slept on attempt 2"
    assert [e["code"] for e in job.info()["errors"]] == ["WORKER_LOST"]
