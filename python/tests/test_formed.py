"""Debounced, throttled and batched sends from Python: the options reach the database's rules
(``send`` through the Rust client, ``send_in`` and ``add_to_batch_in`` through
``remuda.enqueue_job`` in the caller's transaction), a send that joins a waiting job returns
its id and says it joined, and a batch task receives its batch's items, typed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest

import remuda
import tasks
from conftest import StartWorker, job_info


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_debounced_send_joins_the_waiting_job_with_the_latest_args(app: remuda.App) -> None:
    add = app.tasks["add"]
    first = add.send(a=1, b=1, unique_key="sum", debounce=3600)
    second = add.send(a=2, b=2, unique_key="sum", debounce=3600, debounce_max=7200)
    assert second.id == first.id
    assert [h.id for h in add.find_by_key("sum")] == [first.id], "found by its key"
    assert add.find_by_key("other") == []
    info = job_info(first)
    assert info["formed"] == {"debounced": 2}
    assert info["args"] == {"a": 2, "b": 2}
    assert info["state"] == "scheduled"


def test_a_throttled_send_in_a_transaction_joins_the_waiting_job(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    add = app.tasks["add"]
    with db.transaction():
        first = add.send_in(db, a=1, b=1, unique_key="sync", throttle=60)
        second = add.send_in(db, a=5, b=5, unique_key="sync", throttle=60, throttle_latest=True)
    assert second.id == first.id
    info = job_info(first)
    assert info["formed"] == {"throttled": 2}
    assert info["args"] == {"a": 5, "b": 5}, "throttle_latest takes the latest"


def test_a_debounce_without_a_unique_key_is_refused_saying_why(app: remuda.App) -> None:
    try:
        app.tasks["add"].send(a=1, b=1, debounce=10)
    except remuda.RemudaError as e:
        assert e.code == "BAD_INPUT", e
        assert "needs a unique key" in e.message, e
    else:
        raise AssertionError("a debounce without a key was sent")


def test_options_that_go_with_another_formation_are_refused_not_dropped(app: remuda.App) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"unique_key": "k", "debounce": 10, "throttle_latest": True}, "throttle_latest is for a throttle"),
        ({"unique_key": "k", "debounce": 10, "debounce_max": 5}, "shorter than the debounce"),
        ({"unique_key": "k", "throttle": 10, "debounce_max": 5}, "debounce_max caps a debounce"),
    ]
    for options, says in cases:
        try:
            app.tasks["add"].options(**options).send(a=1, b=1)
        except remuda.RemudaError as e:
            assert e.code == "BAD_INPUT", e
            assert says in e.message, e
        else:
            raise AssertionError(f"{options} was sent")


def test_a_batch_task_gets_the_list_of_its_batchs_items_typed(app: remuda.App, start_worker: StartWorker) -> None:
    digest = app.tasks["digest"]
    now = dt.datetime.now(dt.timezone.utc)
    handles = [digest.add_to_batch("hourly", tasks.Point(x, 0, now)) for x in (1, 2, 3, 4)]
    assert {h.id for h in handles[:3]} == {handles[0].id}, "three join one batch"
    assert handles[3].id != handles[0].id, "a full batch takes no more"
    assert [h.joined for h in handles] == [False, True, True, False], "each says whether it joined"
    info = job_info(handles[0])
    assert info["state"] == "available"
    assert [p["x"] for p in info["args"]] == [1, 2, 3]
    assert info["formed"]["batched"] == 3
    start_worker()
    assert handles[0].get(timeout=60).unwrap() == 6
    assert job_info(handles[3])["state"] == "scheduled", "the next batch waits for more"


def test_a_batch_item_added_in_a_transaction_joins_only_if_it_commits(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    digest = app.tasks["digest"]
    now = dt.datetime.now(dt.timezone.utc)
    with db.transaction():
        first = digest.add_to_batch_in(db, "tx", tasks.Point(1, 0, now))
        second = digest.add_to_batch_in(db, "tx", tasks.Point(2, 0, now))
    assert (first.joined, second.joined, second.id) == (False, True, first.id)
    with pytest.raises(RuntimeError, match="rolled back"):
        with db.transaction():
            third = digest.add_to_batch_in(db, "tx", tasks.Point(3, 0, now))
            assert third.joined and third.id == first.id
            raise RuntimeError("rolled back")
    info = job_info(first)
    assert [p["x"] for p in info["args"]] == [1, 2], "the rolled-back item is not in the batch"
    assert info["formed"]["batched"] == 2
    with pytest.raises(TypeError, match="does not fit"):
        digest.add_to_batch_in(db, "tx", {"x": "not a point"})


def test_a_send_in_a_transaction_says_when_it_found_the_unique_jobs_holder(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    add = app.tasks["add"]
    first = add.send_in(db, a=1, b=1, unique_key="once-in-sql")
    again = add.send_in(db, a=1, b=1, unique_key="once-in-sql")
    assert (first.duplicate, again.duplicate, again.id) == (False, True, first.id)


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_debounce_declared_on_the_task_forms_its_keyed_sends(database_url: str, db: psycopg.Connection[Any]) -> None:
    app = remuda.App(database_url=database_url)

    @app.task("indexer", debounce=3600, debounce_max=7200)
    def indexer(v: int) -> int:
        return v

    keyed = indexer.options(unique_key="doc")
    first = keyed.send(v=1)
    second = keyed.send(v=2)
    assert (second.id, second.joined) == (first.id, True)
    info = job_info(first)
    assert info["formed"] == {"debounced": 2} and info["args"] == {"v": 2}
    plain = indexer.send(v=3)
    assert plain.id != first.id and not plain.joined, "no key: a plain job"
    with db.transaction():
        in_tx = keyed.send_in(db, v=4)
    assert (in_tx.id, in_tx.joined) == (first.id, True)
    own = indexer.options(throttle=60, unique_key="page").send(v=5)
    assert job_info(own)["formed"] == {"throttled": 1}, "a send's own formation wins"

    with pytest.raises(ValueError, match="give one of them"):

        @app.task("both", debounce=1, throttle=1)
        def both(v: int) -> int:
            return v


def test_a_batch_task_must_take_one_list(database_url: str) -> None:
    app = remuda.App(database_url=database_url)
    with pytest.raises(TypeError, match="one parameter"):

        @app.task("two", batch_size=2, batch_wait=1)
        def two(a: int, b: int) -> int:
            return a + b

    with pytest.raises(ValueError, match="batch_size and batch_wait"):

        @app.task("half", batch_size=2)
        def half(items: list[int]) -> int:
            return len(items)


def test_a_batch_task_is_fed_only_through_add_to_batch_with_items_that_fit(app: remuda.App) -> None:
    digest = app.tasks["digest"]
    with pytest.raises(TypeError, match="add_to_batch"):
        digest.send(points=[])
    with pytest.raises(TypeError, match="does not fit"):
        digest.add_to_batch("hourly", {"x": "not a point"})
    with pytest.raises(TypeError, match="takes no batches"):
        app.tasks["add"].add_to_batch("k", 1)
