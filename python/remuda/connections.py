"""The caller's own database connection, whichever library holds it, for sends that commit
with the caller's transaction (``send_in``, ``send_in_async``, ``add_to_batch_in``).

Taken, each running the statement on the connection (so inside its open transaction):

==========================================  ==============================================
sync (``send_in``)                          async (``send_in_async``)
==========================================  ==============================================
psycopg 3 ``Connection`` or ``Cursor``      psycopg 3 ``AsyncConnection`` or ``AsyncCursor``
SQLAlchemy ``Connection`` or ``Session``    SQLAlchemy ``AsyncConnection`` or
(its driver's connection: psycopg 3 or 2)   ``AsyncSession`` (driver psycopg 3)
Django's ``django.db.connection`` (or       —
``connections[alias]``)
psycopg2 connection or cursor               —
==========================================  ==============================================

Anything else is refused with ``BAD_INPUT`` naming what was given and what is taken; a sync
send given an async connection (or the reverse) is told which to call.
"""

from __future__ import annotations

from typing import Any

from .errors import InputTypeError

TAKEN = (
    "a psycopg 3 connection or cursor, a SQLAlchemy Connection or Session, "
    "a Django connection (django.db.connection) or a psycopg2 connection or cursor"
)
TAKEN_ASYNC = "a psycopg 3 AsyncConnection or AsyncCursor, or a SQLAlchemy AsyncConnection or AsyncSession (driver psycopg)"


def _named(conn: Any) -> tuple[str, str]:
    kind = type(conn)
    return kind.__module__.split(".", 1)[0], kind.__name__


def _shown(conn: Any) -> str:
    kind = type(conn)
    return f"{kind.__module__}.{kind.__qualname__}"


def fetch_one(conn: Any, statement: str, params: list[Any]) -> tuple[Any, ...]:
    """Runs ``statement`` (``%s`` parameters) on the caller's connection, in its open
    transaction; the one row it answers."""
    library, name = _named(conn)
    if library == "sqlalchemy":
        conn = _sqlalchemy_driver(conn, name)
        library, name = _named(conn)
    if library == "psycopg" and name.startswith("Async"):
        raise InputTypeError(f"send_in was given {_shown(conn)}: an async connection is taken by send_in_async (await it)")
    if library in ("psycopg", "psycopg2", "django") and callable(getattr(conn, "cursor", None)):
        with conn.cursor() as cursor:
            cursor.execute(statement, params)
            return _row(cursor.fetchone())
    if library in ("psycopg", "psycopg2", "django") and hasattr(conn, "fetchone"):
        conn.execute(statement, params)
        return _row(conn.fetchone())
    raise InputTypeError(f"send_in was given {_shown(conn)}: it takes {TAKEN}")


async def fetch_one_async(conn: Any, statement: str, params: list[Any]) -> tuple[Any, ...]:
    """:func:`fetch_one` for an async connection."""
    library, name = _named(conn)
    if library == "sqlalchemy":
        if name not in ("AsyncConnection", "AsyncSession"):
            raise InputTypeError(f"send_in_async was given {_shown(conn)}: it takes {TAKEN_ASYNC}")
        if name == "AsyncSession":
            # the Connection of the session's transaction (begun if it was not)
            conn = await conn.connection()
        elif not conn.in_transaction():
            # begun as a statement of its own would begin it, so that its commit commits
            await conn.begin()
        raw = await conn.get_raw_connection()
        conn = raw.driver_connection
        library, name = _named(conn)
    if library == "psycopg" and name.startswith("Async") and name.endswith("Connection"):
        cursor = await conn.execute(statement, params)
        return _row(await cursor.fetchone())
    if library == "psycopg" and name.startswith("Async") and name.endswith("Cursor"):
        await conn.execute(statement, params)
        return _row(await conn.fetchone())
    if library == "psycopg" or library in ("psycopg2", "django"):
        raise InputTypeError(f"send_in_async was given {_shown(conn)}: a sync connection is taken by send_in")
    raise InputTypeError(f"send_in_async was given {_shown(conn)}: it takes {TAKEN_ASYNC}")


def _sqlalchemy_driver(conn: Any, name: str) -> Any:
    """The driver connection under a SQLAlchemy ``Connection`` or ``Session``, inside the
    transaction SQLAlchemy commits: a statement run on the driver directly would not begin
    one, and ``commit()`` of a connection with none commits nothing."""
    if name.startswith("Async"):
        raise InputTypeError(f"send_in was given {_shown(conn)}: an async connection is taken by send_in_async (await it)")
    if name == "Session" or (name != "Connection" and callable(getattr(conn, "connection", None)) and hasattr(conn, "begin_nested")):
        # the Connection of the session's transaction (begun if it was not)
        conn = conn.connection()
    elif name != "Connection":
        raise InputTypeError(f"send_in was given {_shown(conn)}: it takes {TAKEN} (an Engine's: engine.begin() or engine.connect())")
    if not conn.in_transaction():
        conn.begin()
    return conn.connection.driver_connection


def _row(row: Any) -> tuple[Any, ...]:
    if row is None:
        raise InputTypeError("the connection answered no row: is it a cursor of another statement?")
    # a dict row (psycopg's dict_row, psycopg2's RealDictCursor) in its columns' order
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)
