"""remuda in a Django project: add ``"remuda.django"`` to ``INSTALLED_APPS`` and name the app
in the settings (``REMUDA_APP = "myproject.tasks:app"``). An app made without a database URL
then works on Django's own database (``DATABASES["default"]``, or ``REMUDA_DATABASE``'s alias),
so that sends from views and ``send_in(connection, …)`` inside ``transaction.atomic()`` go to
the same PostgreSQL; ``python manage.py remuda_worker`` runs its worker with the flags of
``python -m remuda worker``."""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..app import App

#: where libpq looks for the server's socket when no host is given
SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
#: the Django database settings that are not libpq's (psycopg's own: left out)
NOT_LIBPQ = {"pool", "isolation_level", "server_side_binding", "assume_role", "cursor_factory", "prepare_threshold", "client_encoding"}
#: the libpq parameters remuda's connections take from ``OPTIONS``
TAKEN = {
    "sslmode", "sslrootcert", "connect_timeout", "application_name", "options", "keepalives",
    "keepalives_idle", "keepalives_interval", "keepalives_retries", "tcp_user_timeout",
    "target_session_attrs", "channel_binding", "hostaddr",
}


def quoted(value: Any) -> str:
    """A value as a libpq connection string takes it."""
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def database_url(settings: Mapping[str, Any]) -> str:
    """A Django ``DATABASES`` entry as a libpq connection string (PostgreSQL only:
    ``ValueError`` naming the engine otherwise)."""
    engine = str(settings.get("ENGINE", ""))
    if not engine.endswith(("postgresql", "postgis", "postgresql_psycopg2")):
        raise ValueError(f"remuda works on PostgreSQL: this database's ENGINE is {engine!r}")
    # (an empty HOST or USER means, to libpq, the local socket and the login user: said
    # here, as remuda's connections do not guess them)
    params: dict[str, Any] = {
        "dbname": settings.get("NAME"),
        "user": settings.get("USER") or getpass.getuser(),
        "password": settings.get("PASSWORD"),
        "host": settings.get("HOST") or next((d for d in SOCKET_DIRS if os.path.isdir(d)), "localhost"),
        "port": settings.get("PORT"),
    }
    unknown = sorted(k for k in dict(settings.get("OPTIONS") or {}) if k not in TAKEN and k not in NOT_LIBPQ)
    if unknown:
        raise ValueError(
            f"OPTIONS {', '.join(unknown)}: remuda's connections do not take them (they take {', '.join(sorted(TAKEN))}); "
            "give remuda.App a database_url of its own"
        )
    for key, value in dict(settings.get("OPTIONS") or {}).items():
        if key in TAKEN:
            params[key] = value
    return " ".join(f"{key}={quoted(value)}" for key, value in params.items() if value not in (None, ""))


def app() -> App:
    """The app ``settings.REMUDA_APP`` names (``module:attribute``)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    from ..app import App
    from ..worker import load_app

    path = getattr(settings, "REMUDA_APP", None)
    if not isinstance(path, str) or ":" not in path:
        raise ImproperlyConfigured(f"REMUDA_APP = {path!r}: name the remuda app as module:attribute (REMUDA_APP = 'myproject.tasks:app')")
    found = load_app(path)
    if not isinstance(found, App):
        raise ImproperlyConfigured(f"REMUDA_APP = {path!r} is not a remuda.App but {found!r}")
    return found


def bind() -> App | None:
    """Points ``settings.REMUDA_APP``, if it was made without a database URL (nor
    ``$DATABASE_URL``), at Django's database (``settings.REMUDA_DATABASE``, default
    ``"default"``): the app, or ``None`` when the settings name none. The connection's
    settings are read when the app first connects, not now: under Django's test runner,
    that is its test database. A setting remuda cannot use is refused now."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if getattr(settings, "REMUDA_APP", None) is None:
        return None
    found = app()
    if found.database_url is None:
        alias = getattr(settings, "REMUDA_DATABASE", "default")
        try:
            database_url(settings.DATABASES[alias])
        except (KeyError, ValueError) as e:
            raise ImproperlyConfigured(f"REMUDA_DATABASE = {alias!r}: {e}") from None
        found.find_database = lambda: _current(alias)
    return found


def _current(alias: str) -> str:
    """The URL of Django's database ``alias`` as its connection is set now."""
    from django.db import connections

    return database_url(connections[alias].settings_dict)
