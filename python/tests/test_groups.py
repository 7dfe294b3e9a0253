"""Groups from Python: ``group=`` reaches the job whichever way it is sent (``send`` through
the Rust client, ``send_in`` through ``remuda.enqueue``, ``send_many`` by COPY), and a group
that does not fit is refused saying why."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import remuda
from conftest import job_info


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_a_group_reaches_the_job_however_it_is_sent(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    add = app.tasks["add"]
    sent = add.send(a=1, b=1, group="acme")
    assert job_info(sent)["group"] == "acme"
    with db.transaction():
        in_tx = add.options(group="globex").send_in(db, a=2, b=2)
    assert job_info(in_tx)["group"] == "globex"
    add.send_many([{"a": 3, "b": 3}], group="initech")
    row = db.execute("SELECT count(*) FROM remuda.jobs WHERE group_key = 'initech'").fetchone()
    assert row is not None and row[0] == 1


def test_an_empty_group_is_refused_saying_why(app: remuda.App) -> None:
    try:
        app.tasks["add"].send(a=1, b=1, group="")
    except remuda.RemudaError as e:
        assert e.code == "BAD_INPUT", e
        assert "group" in e.message, e
    else:
        raise AssertionError("an empty group was sent")
