"""Tasks through real worker processes: results, errors, retries, exception mapping,
async and process-pool bodies, waits that time out, enqueue in the caller's transaction."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import remuda
from conftest import FAST, StartWorker, job_info


def test_send_runs_and_get_returns_the_typed_result(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    add = app.tasks["add"]
    assert add.send(2, 3).get(timeout=30) == remuda.TaskResult(ok=5)
    handle = add.send(a=40, b=2)
    result = handle.get(timeout=30)
    assert result.is_ok() and result.unwrap() == 42
    assert job_info(handle)["state"] == "completed"
    assert isinstance(add, remuda.SyncTask)
    assert add(1, 1) == 2, "a task is still a function"


def test_errors_retries_and_mapped_exceptions(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    flaky = app.tasks["flaky"]
    retried = flaky.send(succeed_on=3)
    assert retried.get(timeout=30).unwrap() == 3, "UPSTREAM is in retry_on: retried to attempt 3"
    errors = job_info(retried)["errors"]
    assert [e["code"] for e in errors] == ["UPSTREAM", "UPSTREAM"]

    mapped = flaky.send(succeed_on=1, bad=True).get(timeout=30)
    assert mapped.is_err() and mapped.err_value.code == "BAD_INPUT"
    assert "bad is set" in mapped.err_value.message
    assert mapped.err_value.data["exception"] == "ValueError"

    exhausted = flaky.send(succeed_on=9)
    result = exhausted.get(timeout=30)
    assert result.err_value.code == "UPSTREAM"
    assert job_info(exhausted)["attempt"] == 3, "max_attempts of the policy"

    unhandled = app.tasks["broken"].send().get(timeout=30)
    assert unhandled.err_value.code == "UNHANDLED_EXCEPTION"
    assert "KeyError" in unhandled.err_value.data["traceback"]

    refused = app.tasks["refuse"].send(why="no stock").get(timeout=30)
    assert refused.err == remuda.TaskError("REFUSED", "no stock", {"why": "no stock"})
    with pytest.raises(remuda.TaskFailed):
        refused.unwrap()


def test_async_tasks_run_on_the_event_loop(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker("--queues", "async")
    results = [app.tasks["double"].send(x=i) for i in range(20)]
    assert [h.get(timeout=30).unwrap() for h in results] == [2 * i for i in range(20)]


async def _get_async(handle: remuda.TaskHandle[Any]) -> remuda.TaskResult[Any]:
    return await handle.get_async(timeout=30)


def test_get_async_awaits_the_result(app: remuda.App, start_worker: StartWorker) -> None:
    import asyncio

    start_worker()
    handle = app.tasks["add"].send(1, 2)
    assert asyncio.run(_get_async(handle)).unwrap() == 3


def test_plain_functions_run_in_a_process_pool(app: remuda.App, start_worker: StartWorker) -> None:
    worker = start_worker("--queues", "cpu", "--processes", "2")
    pids = {app.tasks["pid"].send().get(timeout=60).unwrap() for _ in range(6)}
    assert worker.process.pid not in pids, "run in the pool's processes, not the worker's"
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 2
    worker.stop()
    assert "leaked" not in worker.stderr(), worker.stderr()


def test_a_process_that_dies_fails_its_job_and_the_pool_is_replaced(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker("--queues", "cpu", "--processes", "1")
    died = app.tasks["die"].send().get(timeout=60)
    assert died.err_value.code == "WORKER_PROCESS_LOST", died
    assert app.tasks["pid"].send().get(timeout=60).is_ok(), "a new pool runs the next job"


def _notes(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()]  # type: ignore[misc]


def test_a_dead_pool_process_fails_only_its_own_job_and_nothing_runs_twice(app: remuda.App, start_worker: StartWorker, tmp_path: Path) -> None:
    start_worker("--queues", "cpu", "--processes", "2")
    steady, victim = tmp_path / "steady", tmp_path / "victim"
    kept = app.tasks["tally"].send(path=str(steady), seconds=3)
    lost = app.tasks["tally_once"].send(path=str(victim), seconds=60)
    deadline = time.monotonic() + 60
    while not (_notes(steady) and _notes(victim)):
        assert time.monotonic() < deadline, "both jobs start, each in a process of the pool"
        time.sleep(0.05)
    (victim_pid, _), = _notes(victim)
    os.kill(victim_pid, signal.SIGKILL)
    assert lost.get(timeout=60).err_value.code == "WORKER_PROCESS_LOST"
    result = kept.get(timeout=60)
    assert result.unwrap() == 1, "the other job was not failed, and ended in its first attempt"
    assert len(_notes(steady)) == 1, f"it ran once: {_notes(steady)}"
    assert app.tasks["pid"].send().get(timeout=60).is_ok(), "the dead process was replaced"


def test_a_pool_body_past_its_timeout_is_stopped_before_its_next_attempt(app: remuda.App, start_worker: StartWorker, tmp_path: Path) -> None:
    start_worker("--queues", "cpu", "--processes", "2")
    notes = tmp_path / "overrun"
    result = app.tasks["overrun"].send(path=str(notes), seconds=4).get(timeout=60)
    assert result.err_value.code == "TIMEOUT", result
    time.sleep(4.5)
    seen = _notes(notes)
    assert [attempt for _, attempt in seen] == [1, 2], f"each attempt began once: {seen}"
    assert seen[0][0] != seen[1][0], "the first attempt's process was replaced"


def test_get_of_a_job_or_run_that_does_not_exist_is_a_not_found_result(app: remuda.App) -> None:
    app.client  # migrated
    missing = app.handle(987654321).get(timeout=1)
    assert missing.err_value.code == "NOT_FOUND", missing
    assert "987654321" in missing.err_value.message
    run = app.workflow_handle(987654321).get(timeout=1)
    assert run.err_value.code == "NOT_FOUND", run


def test_a_sqlalchemy_style_url_with_a_driver_is_accepted(database_url: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from urllib.parse import urlencode

    p = conninfo_to_dict(database_url)
    # a Unix-socket host goes in the query, as libpq reads it there
    query = urlencode({k: p[k] for k in ("host", "port", "user") if p.get(k)})
    url = f"postgresql+psycopg:///{p['dbname']}?{query}"
    app = remuda.App(url)
    assert app.database_url == url.replace("+psycopg", "", 1)
    assert app.handle(1).info() is None, "it connects"


def test_an_error_said_not_retryable_ends_the_job_and_comes_back_so(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    handle = app.tasks["refuse_for_good"].send()
    result = handle.get(timeout=60)
    assert result.err_value.code == "GONE"
    assert result.err_value.retryable is False, result.err
    assert job_info(handle)["attempt"] == 1, "no retry"


def test_an_apps_retry_policy_and_exception_mapper_apply_to_its_tasks(database_url: str) -> None:
    from remuda.context import JobContext
    from remuda.running import call_sync

    class Gone(Exception):
        pass

    app = remuda.App(database_url, retry=remuda.RetryPolicy.none(), exception_mapper={LookupError: "MISSING", Gone: "GONE"})

    @app.task("lookup")
    def lookup(key: str) -> int:
        return {"a": 1}[key]

    @app.task("vanish", exception_mapper={Gone: "VANISHED"}, retry=remuda.RetryPolicy.fixed(1, max_attempts=3))
    def vanish() -> None:
        raise Gone("it went")

    assert app.tasks["lookup"].retry == remuda.RetryPolicy.none()
    assert app.tasks["vanish"].retry.max_attempts == 3, "a task's own policy wins"
    ctx = JobContext.from_info({"id": 1, "kind": "lookup", "queue": "default", "attempt": 1, "max_attempts": 1, "worker_id": "w"})
    status, payload = call_sync(app.tasks["lookup"], '{"key": "b"}', ctx)
    assert (status, json.loads(payload)["code"]) == ("err", "MISSING"), "the app's mapper, by base class"
    status, payload = call_sync(app.tasks["vanish"], "{}", ctx)
    assert json.loads(payload)["code"] == "VANISHED", "the task's mapper wins"
    assert remuda.App(database_url).retry == remuda.RetryPolicy(), "by default 25 attempts, exponential"


def test_sending_a_kind_no_worker_runs_warns_once(app: remuda.App) -> None:
    import warnings

    with pytest.warns(RuntimeWarning, match="no worker is running"):
        app.tasks["add"].send(1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app.tasks["add"].send(2, 3)  # said once per kind and queue


def test_sending_a_kind_a_worker_runs_does_not_warn(app: remuda.App, start_worker: StartWorker) -> None:
    import warnings

    start_worker()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert app.tasks["add"].send(1, 2).get(timeout=30).unwrap() == 3


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_get_times_out_with_wait_timeout(app: remuda.App) -> None:
    handle = app.tasks["add"].options(queue="nobody-serves-this").send(1, 1)
    result = handle.get(timeout=0.3)
    assert result.err_value.code == "WAIT_TIMEOUT"
    assert handle.get(timeout_ms=100).err_value.error_code == "WAIT_TIMEOUT"
    assert job_info(handle)["state"] == "available", "the job is still waiting"


def test_send_in_a_rolled_back_transaction_leaves_no_job(app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker) -> None:
    add = app.tasks["add"]
    with pytest.raises(RuntimeError):
        with db.transaction():
            add.send_in(db, 1, 2)
            raise RuntimeError("roll back")
    row = db.execute("SELECT count(*) FROM remuda.jobs").fetchone()
    assert row is not None and row[0] == 0
    with db.transaction():
        handle = add.options(priority=3, delay=dt.timedelta(milliseconds=1)).send_in(db, 5, 6)
    start_worker()
    assert handle.get(timeout=30).unwrap() == 11
    assert job_info(handle)["priority"] == 3


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_send_options_and_bad_input_are_checked(app: remuda.App) -> None:
    add = app.tasks["add"]
    first = add.send(1, 2, unique_key="once", queue="held")
    again = add.options(unique_key="once", queue="held").send(1, 2)
    assert again.duplicate and again.id == first.id
    later = add.options(run_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).send(1, 2)
    assert job_info(later)["state"] == "scheduled"
    with pytest.raises(remuda.RemudaError) as refused:
        add.options(max_attempts=0).send(1, 2)
    assert refused.value.code == "BAD_INPUT" and "max_attempts" in refused.value.message
    with pytest.raises(ValueError, match="time zone"):
        add.options(run_at=dt.datetime(2030, 1, 1)).send(1, 2)
    with pytest.raises(TypeError, match="unexpected keyword|got an unexpected"):
        add.send(1, 2, c=3)
    with pytest.raises(TypeError, match="not JSON"):
        add.send(1, object())
    with pytest.raises(TypeError, match="missing a required argument"):
        add.send(1)
    with pytest.raises(ValueError, match="needs a name"):

        @app.task
        def nested() -> None: ...

    with pytest.raises(TypeError, match="positional-only"):

        @app.task("positional")
        def positional(a: int, /) -> None: ...

    @app.task("spread")
    def spread(**options: int) -> int:
        return sum(options.values())

    assert spread.bind((), {"a": 1, "b": 2}) == {"a": 1, "b": 2}, "**kwargs are spread into the args"
    assert app.tasks["add"].send_many([{"a": i, "b": i} for i in range(100)]) == 100
    add = app.tasks["add"]
    assert add.send_many([add.call(1, 2), add.call(a=3, b=4)]) == 2, "typed calls"
    with pytest.raises(TypeError, match="missing a required argument"):
        add.send_many([add.call(1)])


@pytest.mark.filterwarnings("ignore:no live worker runs:RuntimeWarning")
def test_pending_async_waits_hold_no_thread_so_a_finished_job_is_not_delayed(app: remuda.App, start_worker: StartWorker) -> None:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    start_worker()
    add = app.tasks["add"]
    never = add.options(queue="nobody").send(1, 2)

    async def main() -> remuda.TaskResult[Any]:
        # one thread for everything run off the loop: a wait holding it would hold all
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        threads = threading.active_count()
        pending = [asyncio.create_task(never.get_async(timeout=30)) for _ in range(8)]
        await asyncio.sleep(0.2)
        assert threading.active_count() == threads, "no thread per wait"
        finished = add.send(2, 3)
        try:
            return await asyncio.wait_for(finished.get_async(timeout=20), 15)
        finally:
            for task in pending:
                task.cancel()

    assert asyncio.run(main()).unwrap() == 5


DEFAULT_PROMOTION = FAST.replace('promote_interval = "100ms"', 'promote_interval = "1s"')


def test_a_retry_after_under_a_second_runs_after_its_delay_not_the_next_promotion(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker(settings=DEFAULT_PROMOTION)
    handle = app.tasks["flaky"].send(succeed_on=3)
    assert handle.get(timeout=30).unwrap() == 3
    info = job_info(handle)
    starts = [dt.datetime.fromisoformat(e["started_at"]) for e in info["errors"]] + [dt.datetime.fromisoformat(info["started_at"])]
    ends = [dt.datetime.fromisoformat(e["at"]) for e in info["errors"]]
    gaps = [(start - end).total_seconds() for end, start in zip(ends, starts[1:])]
    # fixed(0.05): each retry after 50 ms, not at the promotion's next tick a second apart
    assert len(gaps) == 2 and all(0.04 <= g < 0.3 for g in gaps), gaps
