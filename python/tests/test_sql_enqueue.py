"""The SQL function from plain psycopg and from a trigger, run by a Python worker."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

import remuda
from conftest import StartWorker


def test_the_sql_function_enqueues_from_psycopg_and_from_a_trigger(app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker) -> None:
    row = db.execute("SELECT remuda.enqueue('add', %s::jsonb, priority => -1)", [json.dumps({"a": 1, "b": 2})]).fetchone()
    assert row is not None
    direct = app.handle(row[0])
    db.execute(
        """
        CREATE TABLE orders (id serial PRIMARY KEY, amount int NOT NULL);
        CREATE FUNCTION order_placed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM remuda.enqueue('add', jsonb_build_object('a', NEW.amount, 'b', 1000),
                                   unique_key => 'order-' || NEW.id);
            RETURN NEW;
        END $$;
        CREATE TRIGGER order_placed AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION order_placed();
        """
    )
    db.execute("INSERT INTO orders (amount) VALUES (7), (8)")
    start_worker()
    assert direct.get(timeout=30).unwrap() == 3
    ids = [r[0] for r in db.execute("SELECT id FROM remuda.jobs WHERE unique_key LIKE 'order-%%' ORDER BY id")]
    assert [app.handle(i).get(timeout=30).unwrap() for i in ids] == [1007, 1008]


def test_the_sql_function_refuses_bad_input_with_its_reason(db: psycopg.Connection[Any]) -> None:
    try:
        db.execute("SELECT remuda.enqueue('add', '{}', max_attempts => 0)")
    except psycopg.errors.InvalidParameterValue as e:
        assert "max_attempts must be at least 1" in str(e)
    else:
        raise AssertionError("refused")
    row = db.execute("SELECT count(*) FROM remuda.jobs").fetchone()
    assert row is not None and row[0] == 0


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before any worker runs
def test_send_in_writes_the_row_send_writes_with_every_option(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    import datetime as dt

    add = app.tasks["add"]
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    options = remuda.SendOptions(
        queue="q",
        priority=4,
        max_attempts=2,
        run_at=when,
        deadline=when + dt.timedelta(hours=1),
        timeout=1.5,
        unique_key="k",
        unique_states=["scheduled", "available", "running", "failed"],
        unique_period=dt.timedelta(days=1),
        unique_per_queue=True,
        concurrency_key="c",
        target_worker="w",
        requires=["gpu", "a,b"],
        notify={"webhook": "https://hooks.example.com/x", "on": ["failed"]},
    )
    elsewhere: remuda.SendOptions = {**options, "queue": "q2"}
    by_send = add.options(**options).send(1, 2)
    with db.transaction():
        by_sql = add.options(**elsewhere).send_in(db, 1, 2)
    columns = "to_jsonb(j) - 'id' - 'created_at' - 'queue' - 'unique_queue'"
    rows = {r[0]: r[1] for r in db.execute(f"SELECT id, {columns} FROM remuda.jobs j")}
    assert rows[by_send.id] == rows[by_sql.id]
    assert rows[by_send.id]["timeout_ms"] == 1500 and rows[by_send.id]["requires"] == ["gpu", "a,b"]
