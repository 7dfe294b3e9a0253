"""Durable steps in Python: ``remuda.step`` runs its function once per job, across a SIGKILL
of the worker (thread pool, process pool, async), and a replayed step comes back as the type
its function returns; a step that raises is not recorded, and runs again with the same
idempotency key (``remuda.step_key``); outside a task it says so."""

from __future__ import annotations

import time
from typing import Any
from pathlib import Path

import pytest

import remuda
from conftest import StartWorker, job_info


def _charge_once_across_a_kill(app: remuda.App, start_worker: StartWorker, tmp_path: Path, kind: str, *args: str) -> None:
    log, ready = tmp_path / "charges.log", tmp_path / "ready"
    doomed = start_worker(*args)
    handle = app.tasks[kind].send(log=str(log), ready=str(ready))
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "the first attempt charged"
        time.sleep(0.05)
    doomed.process.kill()
    doomed.process.wait(10)
    start_worker(*args)  # rescues the job; its attempt finds the step recorded
    result = handle.get(timeout=60)
    charges = log.read_text().splitlines()
    assert len(charges) == 1, f"charged once: {charges}"
    pid = int(charges[0].split()[1])
    assert result.unwrap() == f"ch_{pid}", "the recorded charge, not a new one"
    info = job_info(handle)
    assert info["attempt"] == 2
    steps = info["steps"]
    assert [(s["name"], s["attempt"]) for s in steps] == [("charge", 1)], steps
    assert steps[0]["output"] == {"id": f"ch_{pid}", "pid": pid}


def test_a_step_runs_once_across_a_sigkill_of_its_worker(app: remuda.App, start_worker: StartWorker, tmp_path: Path) -> None:
    _charge_once_across_a_kill(app, start_worker, tmp_path, "charge_step")


def test_a_step_in_a_process_of_the_pool_runs_once_across_a_sigkill_of_its_worker(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    _charge_once_across_a_kill(app, start_worker, tmp_path, "charge_step_cpu", "--queues", "cpu", "--processes", "1")


def test_an_async_step_runs_once_across_a_sigkill_of_its_worker(app: remuda.App, start_worker: StartWorker, tmp_path: Path) -> None:
    _charge_once_across_a_kill(app, start_worker, tmp_path, "charge_step_async", "--queues", "async")


def test_a_step_that_raises_is_not_recorded_and_runs_again_with_the_same_key(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    start_worker()
    log = tmp_path / "runs"
    handle = app.tasks["flaky_step"].send(log=str(log))
    assert handle.get(timeout=60).unwrap() == 2
    assert log.read_text().splitlines() == [f"run {handle.id}:send"] * 2
    steps = job_info(handle)["steps"]
    assert [(s["name"], s["attempt"], s["output"]) for s in steps] == [("send", 2, 2)]


def test_a_step_with_retries_is_tried_again_in_its_attempt_and_records_only_its_outcome(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path
) -> None:
    start_worker("--queues", "default,async")
    log = tmp_path / "tries"
    handle = app.tasks["quote"].send(log=str(log))
    assert handle.get(timeout=60).unwrap() == 42
    assert len(log.read_text().splitlines()) == 3, "tried three times in one attempt"
    info = job_info(handle)
    assert info["attempt"] == 1
    assert [(s["name"], s["output"]) for s in info["steps"]] == [("quote", 42)]
    # a try over its time limit is cancelled and fails the step
    slow = app.tasks["slow_quote"].send(seconds=30).get(timeout=60)
    assert slow.err_value.code == "STEP_TIMEOUT", slow
    # the function's own TimeoutError is its own error, not the step's time limit
    own = app.tasks["slow_quote"].send(seconds=0, own_timeout=True).get(timeout=60)
    assert own.err_value.code != "STEP_TIMEOUT", own
    assert "own time ran out" in own.err_value.message, own


@pytest.mark.parametrize(
    ("kind", "args"),
    [("doze", ("--queues", "default")), ("doze_async", ("--queues", "async")), ("doze_cpu", ("--queues", "cpu", "--processes", "1"))],
)
def test_a_durable_sleep_gives_the_job_back_and_goes_on_after_it_without_an_attempt(
    app: remuda.App, start_worker: StartWorker, tmp_path: Path, kind: str, args: tuple[str, ...]
) -> None:
    start_worker(*args)
    log = tmp_path / "runs"
    started = time.monotonic()
    handle = app.tasks[kind].send(log=str(log), seconds=1.5)
    assert handle.get(timeout=60).unwrap() == "woke"
    assert time.monotonic() - started >= 1.5
    assert len(log.read_text().splitlines()) == 2, "run again once, after the sleep"
    info = job_info(handle)
    assert info["attempt"] == 1, "a sleep spends no attempt"
    assert info["errors"] == []
    assert [s["name"] for s in info["steps"]] == ["sleep-1"]


def test_a_durable_sleep_outside_a_task_or_of_a_bad_length_says_so() -> None:
    with pytest.raises(remuda.RemudaError) as outside:
        remuda.job()
    assert outside.value.code == "NO_JOB"
    ctx = remuda.JobContext(id=1, kind="k", queue="q", attempt=1, max_attempts=1, worker_id="w")
    with pytest.raises(ValueError, match="give seconds"):
        ctx.sleep(-1)
    with pytest.raises(remuda.RemudaError, match="inside a task body"):
        ctx.sleep(1)


def test_step_options_out_of_range_are_refused_saying_what_to_give() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"retries": -1}, "retries=-1"),
        ({"retries": True}, "retries=True"),
        ({"backoff": -0.5}, "backoff=-0.5"),
        ({"timeout": 0}, "timeout=0"),
    ]
    for bad, says in cases:
        with pytest.raises(ValueError, match=says):
            remuda.StepOptions(**bad)


def test_a_step_outside_a_task_says_so() -> None:
    with pytest.raises(remuda.StepError) as raised:
        remuda.step("charge", lambda: 1)
    assert raised.value.code == "INVALID_STEP"
    assert "inside a task" in raised.value.message
    with pytest.raises(remuda.StepError) as raised:
        remuda.step_key("charge")
    assert "inside a task" in raised.value.message
    with pytest.raises(remuda.RemudaError) as outside:
        remuda.job()
    assert outside.value.code == "NO_JOB" and "current_job() answers None" in outside.value.message
    assert remuda.current_job() is None


def test_a_step_name_with_a_control_character_or_the_sleeps_prefix_is_refused() -> None:
    for bad in ("a\tb", "a\nb", "nul\0", "c1\x85", "sleep-1", "", "x" * 201):
        with pytest.raises(remuda.StepError) as raised:
            remuda.step(bad, lambda: 1)
        assert raised.value.code == "INVALID_STEP", bad
        assert "control characters" in raised.value.message, raised.value.message
