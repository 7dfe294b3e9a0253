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


def test_cancel_reaches_a_running_body_sync_and_async(app, start_worker):
    start_worker()
    sync_job = app.tasks["sleepy"].send(seconds=60)
    async_job = app.tasks["nap"].send(seconds=60)
    wait_state(sync_job, "running")
    wait_state(async_job, "running")
    assert sync_job.cancel() == "running"
    assert async_job.cancel() == "running"
    assert sync_job.get(timeout=10).err.code == "CANCELLED"
    assert async_job.get(timeout=10).err.code == "CANCELLED"


def test_sigkill_jobs_are_rescued_by_another_worker(app, start_worker):
    doomed = start_worker()
    job = app.tasks["sleepy"].send(seconds=1)
    wait_state(job, "running")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    start_worker()
    assert job.get(timeout=60).unwrap() == "slept on attempt 2"
    assert [e["code"] for e in job.info()["errors"]] == ["WORKER_LOST"]
