"""Debounced and throttled sends from Python: the options reach the database's rules
(``send`` through the Rust client, ``send_in`` through ``remuda.enqueue``), and a send that
joins a waiting job returns its id."""

from __future__ import annotations

from typing import Any

import psycopg

import remuda
from conftest import job_info


def test_a_debounced_send_joins_the_waiting_job_with_the_latest_args(app: remuda.App) -> None:
    add = app.tasks["add"]
    first = add.send(a=1, b=1, unique_key="sum", debounce=3600)
    second = add.send(a=2, b=2, unique_key="sum", debounce=3600, debounce_max=7200)
    assert second.id == first.id
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
