"""A body asked to stop knows why (``current_job().stop_reason``), and one that saw a stop
was cut short: its job is given back for another worker without spending an attempt, never
completed with its partial result. Each stop of a worker's report counts a job once."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import remuda
from conftest import StartWorker, job_info, wait_state


def report(stderr: str) -> dict[str, int]:
    """The counts of the worker's stop report."""
    line = re.search(r"stopped; (\d+) completed, (\d+) retried, (\d+) failed, (\d+) released", stderr)
    assert line is not None, stderr
    completed, retried, failed, released = (int(n) for n in line.groups())
    return {"completed": completed, "retried": retried, "failed": failed, "released": released}


def test_a_body_that_saw_the_shutdown_is_given_back_and_runs_again_on_the_same_attempt(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    marker = tmp_path / "reason"
    first = start_worker()
    job = app.tasks["patient"].send(marker=str(marker))
    wait_state(job, "running")
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0, first.stderr()
    assert marker.read_text() == "shutdown"
    info = job_info(job)
    assert info["state"] == "available", "the partial result was not stored"
    assert info["attempt"] == 0, "the attempt was not spent"
    assert report(first.stderr()) == {"completed": 0, "retried": 0, "failed": 0, "released": 1}
    start_worker()
    assert job.get(timeout=30).unwrap() == "done on attempt 1 after shutdown"


def test_an_async_body_cancelled_by_the_shutdown_is_given_back_even_when_it_returns(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    marker = tmp_path / "reason"
    first = start_worker()
    job = app.tasks["patient_async"].send(marker=str(marker))
    wait_state(job, "running")
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0, first.stderr()
    assert marker.read_text() == "shutdown"
    assert job_info(job)["state"] == "available"
    assert report(first.stderr())["released"] == 1
    start_worker()
    assert job.get(timeout=30).unwrap() == "done on attempt 1 after shutdown"


def test_an_async_body_cleaning_up_after_the_shutdown_still_holds_its_job_until_it_ends(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    marker = tmp_path / "state"
    first = start_worker()
    job = app.tasks["tidy_async"].send(marker=str(marker))
    wait_state(job, "running")
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0, first.stderr()
    assert marker.read_text() == "running", "not given back before its clean-up ended"
    assert job_info(job)["state"] == "available"


def test_a_cancelled_body_reads_cancel_and_its_job_stays_cancelled(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    marker = tmp_path / "reason"
    worker = start_worker()
    job = app.tasks["patient"].send(marker=str(marker))
    wait_state(job, "running")
    assert job.cancel() == "stopping"
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.read_text() == "cancel"
    assert job.get(timeout=10).err_value.code == "CANCELLED"
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert report(worker.stderr())["released"] == 0, "a cancelled job is not given back"


def test_a_body_past_its_timeout_reads_timeout_and_the_attempt_fails(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    marker = tmp_path / "reason"
    start_worker()
    job = app.tasks["patient_timed"].send(marker=str(marker))
    assert job.get(timeout=30).unwrap() == "done on attempt 2 after timeout"
    errors = job_info(job)["errors"]
    assert [e["code"] for e in errors] == ["TIMEOUT"]


def test_a_body_that_finishes_without_looking_completes_during_the_shutdown(
    app: remuda.App, start_worker: StartWorker
) -> None:
    worker = start_worker()
    job = app.tasks["sleepy"].options(max_attempts=1).send(seconds=1.0)
    wait_state(job, "running")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.stderr()
    assert job.get(timeout=5).unwrap() == "slept on attempt 1"
    assert report(worker.stderr()) == {"completed": 1, "retried": 0, "failed": 0, "released": 0}
