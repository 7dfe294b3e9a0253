"""remuda in a Django project: add ``"remuda.django"`` to ``INSTALLED_APPS`` and name the app
in the settings (``REMUDA_APP = "myproject.tasks:app"``). An app made without a database URL
then works on Django's own database (``DATABASES["default"]``, or ``REMUDA_DATABASE``'s alias),
so that sends from views and ``send_in(connection, …)`` inside ``transaction.atomic()`` go to
the same PostgreSQL; ``python manage.py remuda_worker`` runs its worker with the flags of
``python -m remuda worker``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..app import App

#: the Django database settings that are not libpq's
NOT_LIBPQ = {"pool", "isolation_level", "server_side_binding", "assume_role", "cursor_factory"}


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
    params: dict[str, Any] = {
        "dbname": settings.get("NAME"),
        "user": settings.get("USER"),
        "password": settings.get("PASSWORD"),
        "host": settings.get("HOST"),
        "port": settings.get("PORT"),
    }
    for key, value in dict(settings.get("OPTIONS") or {}).items():
        if key not in NOT_LIBPQ and isinstance(value, (str, int)) and not isinstance(value, bool):
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
    ``"default"``): the app, or ``None`` when the settings name none."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if getattr(settings, "REMUDA_APP", None) is None:
        return None
    found = app()
    if found.database_url is None:
        alias = getattr(settings, "REMUDA_DATABASE", "default")
        try:
            found.database_url = database_url(settings.DATABASES[alias])
        except (KeyError, ValueError) as e:
            raise ImproperlyConfigured(f"REMUDA_DATABASE = {alias!r}: {e}") from None
    return found
