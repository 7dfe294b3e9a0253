"""The SQL function from plain psycopg and from a trigger, run by a Python worker."""

from __future__ import annotations

import json

import remuda


def test_the_sql_function_enqueues_from_psycopg_and_from_a_trigger(app, db, start_worker):
    row = db.execute("SELECT remuda.enqueue('add', %s::jsonb, priority => -1)", [json.dumps({"a": 1, "b": 2})]).fetchone()
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


def test_the_sql_function_refuses_bad_input_with_its_reason(db):
    import psycopg

    try:
        db.execute("SELECT remuda.enqueue('add', '{}', max_attempts => 0)")
    except psycopg.errors.InvalidParameterValue as e:
        assert "max_attempts must be at least 1" in str(e)
    else:
        raise AssertionError("refused")
    assert isinstance(remuda.RemudaError("BAD_INPUT", "x"), Exception)
