"""``send_in`` and ``send_in_async`` on the connections Python teams hold (psycopg 3 and 2,
SQLAlchemy's Connection and Session, sync and async, Django's connection): the job exists if
and only if the caller's transaction commits; anything else is refused with ``BAD_INPUT``
naming what was given and what is taken."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import psycopg
import pytest
import sqlalchemy
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

import remuda
from conftest import libpq

# libraries without type information, held as Any so that the test stays strictly typed
psycopg2: Any = importlib.import_module("psycopg2")


class Undone(Exception):
    """Raised inside a transaction to roll it back."""


def exists(db: psycopg.Connection[Any], handle: remuda.TaskHandle[Any]) -> bool:
    return db.execute("SELECT count(*) FROM remuda.jobs WHERE id = %s", [handle.id]).fetchone() == (1,)


def test_a_sqlalchemy_connection_or_session_sends_with_its_transaction(
    app: remuda.App, database_url: str, db: psycopg.Connection[Any]
) -> None:
    add = app.tasks["add"]
    engine = sqlalchemy.create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(libpq(database_url)))
    try:
        with engine.begin() as conn:
            kept = add.send_in(conn, 1, 2)
        gone: list[remuda.TaskHandle[int]] = []
        with pytest.raises(Undone):
            with engine.begin() as conn:
                gone.append(add.options(priority=3).send_in(conn, 3, 4))
                raise Undone
        with Session(engine) as session, session.begin():
            in_session = add.send_in(session, 5, 6)
        with engine.connect() as conn:
            # no transaction begun by SQLAlchemy before the send: its commit commits the job
            committed = add.send_in(conn, 7, 8)
            conn.commit()
        with engine.connect() as conn:
            gone.append(add.send_in(conn, 9, 10))  # closed without a commit: rolled back
        with pytest.raises(remuda.InputTypeError, match="an Engine's: engine.begin"):
            add.send_in(engine, 1, 2)
    finally:
        engine.dispose()
    assert exists(db, kept) and exists(db, in_session) and exists(db, committed)
    assert len(gone) == 2 and not any(exists(db, g) for g in gone), "rolled back with the caller's transaction"


def test_a_psycopg_connection_with_dict_rows_sends(app: remuda.App, database_url: str, db: psycopg.Connection[Any]) -> None:
    with psycopg.Connection[dict[str, Any]].connect(libpq(database_url), row_factory=dict_row) as conn:
        handle = app.tasks["add"].send_in(conn, 1, 2)
    assert exists(db, handle)


def test_a_psycopg2_connection_or_cursor_sends_with_its_transaction(
    app: remuda.App, database_url: str, db: psycopg.Connection[Any]
) -> None:
    add = app.tasks["add"]
    conn = psycopg2.connect(libpq(database_url))
    try:
        kept = add.send_in(conn, 1, 2)
        with conn.cursor() as cursor:
            by_cursor = add.send_in(cursor, 3, 4)
        conn.commit()
        gone = add.send_in(conn, 5, 6)
        conn.rollback()
    finally:
        conn.close()
    assert exists(db, kept) and exists(db, by_cursor)
    assert not exists(db, gone)


def test_a_django_connection_sends_with_its_atomic_block(app: remuda.App, database_url: str, db: psycopg.Connection[Any]) -> None:
    django: Any = importlib.import_module("django")
    settings: Any = importlib.import_module("django.conf").settings
    params = conninfo_to_dict(libpq(database_url))
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": params.get("dbname"),
                "HOST": params.get("host", ""),
                "PORT": params.get("port", ""),
                "USER": params.get("user", ""),
            }
        }
    )
    django.setup()
    db_module: Any = importlib.import_module("django.db")
    connection, transaction = db_module.connection, db_module.transaction

    add = app.tasks["add"]
    gone: list[remuda.TaskHandle[int]] = []
    try:
        with transaction.atomic():
            kept = add.send_in(connection, 1, 2)
        with pytest.raises(Undone):
            with transaction.atomic():
                gone.append(add.send_in(connection, 3, 4))
                raise Undone
    finally:
        connection.close()
    assert exists(db, kept)
    assert len(gone) == 1 and not exists(db, gone[0])


def test_async_connections_send_with_their_transaction(app: remuda.App, database_url: str, db: psycopg.Connection[Any]) -> None:
    add = app.tasks["add"]

    async def scenario() -> list[remuda.TaskHandle[int]]:
        handles: list[remuda.TaskHandle[int]] = []
        async with await psycopg.AsyncConnection.connect(libpq(database_url)) as conn:
            async with conn.transaction():
                handles.append(await add.send_in_async(conn, 1, 2))
                async with conn.cursor() as cursor:
                    handles.append(await add.options(priority=2).send_in_async(cursor, 3, 4))
            with pytest.raises(Undone):
                async with conn.transaction():
                    handles.append(await add.send_in_async(conn, 5, 6))
                    raise Undone
        engine = create_async_engine(
            "postgresql+psycopg://", async_creator=lambda: psycopg.AsyncConnection.connect(libpq(database_url))
        )
        try:
            async with engine.begin() as conn:
                handles.append(await add.send_in_async(conn, 7, 8))
            async with engine.connect() as conn:
                handles.append(await add.send_in_async(conn, 11, 12))
                await conn.commit()
            async with AsyncSession(engine) as session, session.begin():
                handles.append(await add.send_in_async(session, 9, 10))
        finally:
            await engine.dispose()
        return handles

    sent = asyncio.run(scenario())
    assert [exists(db, h) for h in sent] == [True, True, False, True, True, True], "the rolled back one is gone"


def test_anything_else_is_refused_naming_what_was_given_and_what_is_taken(app: remuda.App, database_url: str) -> None:
    add = app.tasks["add"]
    with pytest.raises(remuda.InputTypeError) as refused:
        add.send_in(object(), 1, 2)
    assert refused.value.code == "BAD_INPUT"
    assert "builtins.object" in refused.value.message and "a psycopg 3 connection or cursor" in refused.value.message

    async def async_given_to_sync() -> str:
        async with await psycopg.AsyncConnection.connect(libpq(database_url)) as conn:
            with pytest.raises(remuda.InputTypeError) as refused:
                add.send_in(conn, 1, 2)
            return refused.value.message

    assert "is taken by send_in_async" in asyncio.run(async_given_to_sync())
    with psycopg.connect(libpq(database_url)) as conn:
        with pytest.raises(remuda.InputTypeError, match="is taken by send_in"):
            asyncio.run(add.send_in_async(conn, 1, 2))
    with pytest.raises(remuda.InputTypeError, match="builtins.str"):
        asyncio.run(add.send_in_async("postgresql://", 1, 2))
