"""Arguments and results beyond JSON rebuilt from the annotations; args a task cannot take
refused with its signature; one rule for bad input (a ``RemudaError`` with code
``BAD_INPUT`` that is also a ``TypeError`` or a ``ValueError``, naming the option)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pytest

import remuda
from conftest import StartWorker, job_info
from tasks import Color, Order, Point, Shapes


def test_dates_uuids_decimals_enums_dataclasses_pydantic_and_tuples_round_trip(app: remuda.App, start_worker: StartWorker) -> None:
    when = dt.datetime(2026, 12, 4, 9, 30, 15, 250_000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    point = Point(1, -2, when)
    sent = Shapes(
        when=when,
        day=dt.date(2026, 2, 28),
        id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        amount=Decimal("1234.5600"),
        color=Color.BLUE,
        point=point,
        pair=(7, "seven"),
        order=Order(id=uuid.uuid4(), amount=Decimal("0.10"), placed=dt.date(2026, 1, 1)),
        points=[point, Point(3, 4, when)],
        by_name={"sky": Color.BLUE, "rose": Color.RED},
        wait=dt.timedelta(seconds=90, milliseconds=5),
        tags=frozenset({"a", "b"}),
        maybe=None,
    )
    start_worker()
    fields = {name: getattr(sent, name) for name in sent.__dataclass_fields__}
    handle = app.tasks["shapes"].send(**fields)
    result = handle.get(timeout=30)
    assert result.unwrap() == sent, result
    # stored as plain JSON: the exact decimal as text, the date as ISO 8601
    stored = job_info(handle)["args"]
    assert stored["amount"] == "1234.5600" and stored["when"] == "2026-12-04T09:30:15.250000+01:00"
    assert stored["pair"] == [7, "seven"] and stored["color"] == "blue"
    # a handle made later rebuilds the result as the task's too
    assert app.tasks["shapes"].handle(handle.id).get(timeout=5).unwrap() == sent
    assert isinstance(app.handle(handle.id).get(timeout=5).unwrap(), dict), "an untyped handle gives the JSON"


def test_a_task_returning_a_task_result_gives_its_value_rebuilt(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    assert app.tasks["located"].send(3).get(timeout=30).unwrap() == Point(3, 3, dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    refused = app.tasks["refuse"].send("no").get(timeout=30)
    assert refused.err_value.code == "REFUSED"


def test_unions_keep_plain_json_and_dataclasses_skip_fields_not_in_init() -> None:
    from dataclasses import dataclass, field

    from remuda import codec

    @dataclass
    class Tree:
        name: str
        children: list[Tree]
        size: int = field(init=False, default=0)

    tree = Tree("root", [Tree("leaf", [])])
    decode = codec.decoder_for(Tree)
    assert decode is not None
    assert decode(json.loads(codec.dumps(tree))) == tree, "a dataclass holding itself, init=False skipped"
    either = codec.decoder_for(str | dt.datetime)
    assert either is not None and either("2026-01-01") == "2026-01-01", "text stays text when str is an arm"
    number = codec.decoder_for(int | Decimal)
    assert number is not None and number(5) == 5 and type(number(5)) is int and number("5.10") == Decimal("5.10")
    maybe = codec.decoder_for(Point | None)
    assert maybe is not None and maybe(None) is None


def test_sql_args_a_task_cannot_take_fail_its_job_with_the_signature(
    app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker
) -> None:
    bad: dict[str, object] = {"not an object": [1, 2], "missing b": {"a": 1}, "unknown c": {"a": 1, "b": 2, "c": 3}}
    ids = {why: db.execute("SELECT remuda.enqueue('add', %s::jsonb)", [json.dumps(args)]).fetchone() for why, args in bad.items()}
    wrong_uuid = db.execute("SELECT remuda.enqueue('shapes', %s::jsonb)", [json.dumps({"id": "nope"})]).fetchone()
    start_worker()
    for why, row in ids.items():
        assert row is not None
        result = app.handle(row[0]).get(timeout=30)
        error = result.err_value
        assert error.code == "BAD_ARGS", (why, error)
        assert "task add(a: int, b: int) -> int" in error.message, error.message
        assert job_info(app.handle(row[0]))["attempt"] == 1, "not retried: the same args would fail again"
    assert "no b" in app.handle(ids["missing b"][0]).get(timeout=5).err_value.message  # type: ignore[index]
    assert "takes no c" in app.handle(ids["unknown c"][0]).get(timeout=5).err_value.message  # type: ignore[index]
    assert wrong_uuid is not None
    message = app.handle(wrong_uuid[0]).get(timeout=30).err_value.message
    assert "the args have no" in message, "missing arguments are named before types are read"


def test_a_value_too_large_for_its_type_fails_its_job_with_bad_args(
    app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker
) -> None:
    row = db.execute("SELECT remuda.enqueue('wait_for', %s::jsonb)", [json.dumps({"wait": 1e20})]).fetchone()
    assert row is not None
    start_worker()
    error = app.handle(row[0]).get(timeout=30).err_value
    assert error.code == "BAD_ARGS" and "wait=100000000000000000000 cannot be read" in error.message, error


def test_a_value_the_annotation_cannot_take_names_the_parameter(
    app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker
) -> None:
    args = {
        "when": "not a time", "day": "2026-01-01", "id": str(uuid.uuid4()), "amount": "1", "color": "red",
        "point": {"x": 1, "y": 2, "at": "2026-01-01T00:00:00+00:00"}, "pair": [1, "a"],
        "order": {"id": str(uuid.uuid4()), "amount": "1", "placed": "2026-01-01"}, "points": [], "by_name": {},
        "wait": 1, "tags": [],
    }
    row = db.execute("SELECT remuda.enqueue('shapes', %s::jsonb)", [json.dumps(args)]).fetchone()
    assert row is not None
    start_worker()
    error = app.handle(row[0]).get(timeout=30).err_value
    assert error.code == "BAD_ARGS" and error.retryable is False
    assert "when=\"not a time\"" in error.message and "task shapes(" in error.message, error.message


def test_bad_input_is_a_remuda_error_and_a_type_or_value_error_naming_the_option(app: remuda.App) -> None:
    add = app.tasks["add"]
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: add.options(priority="high"), remuda.InputTypeError, "priority='high': give an int"),  # type: ignore[arg-type]
        (lambda: add.options(max_attempts=0), remuda.InputValueError, "max_attempts=0"),
        (lambda: add.options(delay=-1), remuda.InputValueError, "delay=-1"),
        (lambda: add.options(delay="soon"), remuda.InputTypeError, "delay='soon'"),  # type: ignore[arg-type]
        (lambda: add.options(unique_by_args="yes"), remuda.InputTypeError, "unique_by_args='yes'"),  # type: ignore[arg-type]
        (lambda: add.options(requires="gpu"), remuda.InputTypeError, "requires='gpu'"),
        (lambda: add.options(run_at=dt.datetime(2030, 1, 1)), remuda.InputValueError, "run_at=2030-01-01 00:00:00"),
        (lambda: add.options(bogus=1), remuda.InputTypeError, "unknown send option 'bogus'"),  # type: ignore[call-arg]
        (lambda: add.send(1), remuda.InputTypeError, "task add(a: "),
        (lambda: add.send(1, object()), remuda.InputTypeError, "object is not JSON"),
        (lambda: add.options(unique_states=["nope"]).send(1, 2), remuda.InputValueError, "unique_states"),
    ]
    for call, kind, says in cases:
        with pytest.raises(remuda.RemudaError) as raised:
            call()
        error = raised.value
        assert type(error) is kind, (says, error)
        assert error.code == "BAD_INPUT" and says in error.message, (says, error.message)
        assert isinstance(error, TypeError if kind is remuda.InputTypeError else ValueError)


def test_plain_arguments_a_parameter_refuses_are_refused_at_send(app: remuda.App, db: psycopg.Connection[Any]) -> None:
    add, plot = app.tasks["add"], app.tasks["plot"]
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for bad, why in (("x", "got text"), (1.5, "got the number 1.5"), (True, "got true")):
        with pytest.raises(remuda.InputTypeError) as refused:
            add.send(1, bad)
        message = refused.value.message
        assert f"b={json.dumps(bad)} does not fit its annotation: expected an integer (int), {why}" in message, message
        assert "task add(a: int, b: int) -> int" in message, message
    with pytest.raises(remuda.InputTypeError, match='b="x" does not fit'):
        add.send_many([{"a": 1, "b": 2}, {"a": 1, "b": "x"}])
    with pytest.raises(remuda.InputTypeError, match=r"at \.x: expected an integer \(int\), got text"):
        plot.send(Point("a", 1, at))  # type: ignore[arg-type]
    with pytest.raises(remuda.InputTypeError, match=r"label=5 does not fit its annotation: expected text \(str\)"):
        plot.send(Point(1, 1, at), label=5)
    with pytest.raises(remuda.InputTypeError, match="the batch item does not fit values"):
        app.tasks["sum_batch"].add_to_batch("k", "not an int")
    assert db.execute("SELECT count(*) FROM remuda.jobs").fetchone() == (0,), "nothing refused was written"


def test_plain_arguments_the_worker_cannot_read_fail_their_job_once_with_bad_args(
    app: remuda.App, db: psycopg.Connection[Any], start_worker: StartWorker
) -> None:
    at = "2026-01-01T00:00:00+00:00"
    sent = {
        "b text": ("add", {"a": 1, "b": "x"}, 'b="x" cannot be read as annotated: expected an integer (int), got text'),
        "b fraction": ("add", {"a": 1, "b": 1.5}, "b=1.5 cannot be read as annotated: expected an integer (int), got the number 1.5"),
        "b boolean": ("add", {"a": 1, "b": True}, "b=true cannot be read as annotated: expected an integer (int), got true"),
        "field": ("plot", {"point": {"x": "a", "y": 1, "at": at}}, "at .x: expected an integer (int), got text"),
        "label": ("plot", {"point": {"x": 1, "y": 1, "at": at}, "label": 7}, "label=7 cannot be read as annotated: expected text (str)"),
        "batch item": ("sum_batch", [5, "not an int"], "at [1]: expected an integer (int), got text"),
    }
    rows = {why: db.execute("SELECT remuda.enqueue(%s, %s::jsonb)", [kind, json.dumps(args)]).fetchone() for why, (kind, args, _) in sent.items()}
    start_worker()
    good = app.tasks["plot"].send(Point(2, 0, dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)), scale=3)
    # a send is checked as the worker reads its JSON: a datetime is text to a str parameter
    dated = app.tasks["plot"].send(Point(1, 0, dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)), label=dt.datetime(2026, 1, 1))
    for why, row in rows.items():
        assert row is not None
        handle = app.handle(row[0])
        error = handle.get(timeout=30).err_value
        assert error.code == "BAD_ARGS" and error.retryable is False, (why, error)
        assert sent[why][2] in error.message, (why, error.message)
        assert job_info(handle)["attempt"] == 1, f"{why}: not retried, the same args would fail again"
    assert good.get(timeout=30).unwrap() == 6, "a float parameter takes an integer"
    assert dated.get(timeout=30).unwrap() == 1


def test_task_options_are_checked_at_declaration_with_the_sends_messages(app: remuda.App) -> None:
    def body() -> None:
        return None

    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: app.task("q2", queue=5)(body), remuda.InputTypeError, "task q2: queue=5: give a str"),  # type: ignore[call-overload]
        (lambda: app.task("t2", timeout="30s")(body), remuda.InputTypeError, "task t2: timeout='30s'"),  # type: ignore[call-overload]
        (lambda: app.task("p2", priority="high")(body), remuda.InputTypeError, "task p2: priority='high': give an int"),  # type: ignore[call-overload]
        (lambda: app.task("m2", max_attempts=0)(body), remuda.InputValueError, "task m2: max_attempts=0"),
        (lambda: app.task("")(body), remuda.InputValueError, "give the task a name"),
        (lambda: app.task("e2", exception_mapper={int: "X"})(body), remuda.InputTypeError, "exception_mapper key <class 'int'>"),  # type: ignore[dict-item]
        (lambda: app.task("e3", exception_mapper={TimeoutError: 5})(body), remuda.InputTypeError, "exception_mapper[TimeoutError]=5"),  # type: ignore[dict-item]
    ]
    for declare, error, text in cases:
        with pytest.raises(error) as refused:
            declare()
        assert text in str(refused.value), (text, str(refused.value))
    assert not {"q2", "t2", "p2", "m2", "", "e2", "e3"} & set(app.tasks), "a refused task is not declared"


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # no worker: the job waits
def test_cancel_says_what_happened(app: remuda.App) -> None:
    waiting = app.tasks["add"].options(delay=3600).send(1, 2)
    assert waiting.cancel() == "cancelled", "a waiting job will not run"
    assert waiting.cancel() == "already cancelled"
    assert job_info(waiting)["state"] == "cancelled"


def test_the_unserved_warning_suggests_a_command_that_works_for_any_queue_name(app: remuda.App) -> None:
    @app.task("spaced", queue="my queue")
    def spaced() -> None:
        return None

    with pytest.warns(RuntimeWarning, match=r"--queues 'my queue'\)"):
        spaced.send()


def test_send_checks_the_json_the_worker_reads_and_old_forms_stay_taken() -> None:
    from remuda import codec

    def job(when: str, count: int, maybe: int = None) -> None:  # type: ignore[assignment]
        return None

    check = codec.TaskCodec(job, remuda.task.signature_of(job))
    sent = {"when": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).isoformat(), "count": 5.0, "maybe": None}
    assert check.decode_args("job", dict(sent)) == {"when": "2026-01-01T00:00:00+00:00", "count": 5, "maybe": None}, (
        "a whole number written 5.0 (PostgreSQL's numeric) is an int; an `= None` default takes None"
    )
    with pytest.raises(codec.BadArgs, match="expected an integer"):
        check.decode_args("job", {"when": "x", "count": 5.5})


def test_a_retry_predicate_fails_at_once_what_it_refuses(app: remuda.App, start_worker: StartWorker) -> None:
    start_worker()
    picky = app.tasks["picky"]
    missing, upstream = picky.send(missing=True), picky.send(missing=False)
    refused = missing.get(timeout=30).err_value
    assert refused.retryable is False and job_info(missing)["attempt"] == 1, refused
    assert upstream.get(timeout=30).is_err() and job_info(upstream)["attempt"] == 3, "retried as the policy says"
    with pytest.raises(TypeError, match="when=5: give a function"):
        remuda.RetryPolicy.fixed(1, when=5)  # type: ignore[arg-type]
