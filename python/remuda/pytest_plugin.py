"""pytest fixtures for an app's tests, each on a database of its own.

Enable them in ``conftest.py`` (``pytest_plugins = ["remuda.pytest_plugin"]``) and name the
app in pytest's configuration (``remuda_app = "myapp.tasks:app"`` under
``[tool.pytest.ini_options]``), or override the ``remuda_app`` fixture:

- ``remuda_database_url``: a database created and migrated for the test on the server of
  ``$REMUDA_TEST_DATABASE_URL``, else ``$DATABASE_URL``, else the one the ``remuda`` binary
  finds; dropped after it.
- ``remuda_app``: the app, bound to that database for the test (:func:`remuda.testing.bound`).
- ``remuda_worker``: a worker of the app running in this process for the test, so that
  ``send(…).get()`` returns; stopped after it.
- ``remuda_eager`` and ``remuda_recording``: :func:`remuda.testing.eager` and
  :func:`remuda.testing.recording` on the app for the test (no worker, and no database
  unless the test reads it).
"""

from __future__ import annotations

import importlib
import os
import threading
import uuid
from typing import Iterator

import pytest

from . import _native, testing
from .app import App


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("remuda_app", "the remuda App the fixtures bind, as module:attribute (myapp.tasks:app)")


@pytest.fixture
def remuda_database_url() -> Iterator[str]:
    base = os.environ.get("REMUDA_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL") or _native.database_url()
    suffix = f"test_{uuid.uuid4().hex[:12]}"
    url = _native.scratch_database(base, suffix)
    try:
        yield url
    finally:
        _native.drop_scratch_database(base, suffix)


@pytest.fixture
def remuda_app(request: pytest.FixtureRequest, remuda_database_url: str) -> Iterator[App]:
    path = str(request.config.getini("remuda_app") or "")
    if ":" not in path:
        raise pytest.UsageError(
            f"remuda_app = {path!r}: name the app as module:attribute (remuda_app = 'myapp.tasks:app' in pytest's "
            "configuration), or override the remuda_app fixture"
        )
    module, _, attribute = path.partition(":")
    app = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(app, App):
        raise pytest.UsageError(f"remuda_app = {path!r} is not a remuda.App but {app!r}")
    with testing.bound(app, remuda_database_url):
        yield app


@pytest.fixture
def remuda_worker(remuda_app: App) -> Iterator[threading.Thread]:
    stop = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            remuda_app.run_worker(stop=stop)
        except BaseException as e:  # noqa: BLE001 - said when the test ends
            failed.append(e)

    thread = threading.Thread(target=run, name="remuda-test-worker", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=60)
    if failed:
        raise failed[0]


@pytest.fixture
def remuda_eager(remuda_app: App) -> Iterator[testing.Sent]:
    with testing.eager(remuda_app) as sent:
        yield sent


@pytest.fixture
def remuda_recording(remuda_app: App) -> Iterator[testing.Sent]:
    with testing.recording(remuda_app) as sent:
        yield sent

