"""remuda in a Django project: the app bound to Django's database by ``remuda.django``, sends
inside ``transaction.atomic()`` that commit or roll back with it, and ``manage.py
remuda_worker`` running tasks that use Django's ORM connection, in processes too."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from conftest import libpq

SETTINGS = """
SECRET_KEY = "not a secret"
INSTALLED_APPS = ["remuda.django"]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": {name!r}, "USER": {user!r}, "HOST": {host!r}, "PORT": {port!r}}}}}
REMUDA_APP = "djtasks:app"
USE_TZ = True
"""

TASKS = """
import remuda

app = remuda.App()  # no URL: remuda.django binds it to Django's database


@app.task("dj_double")
def dj_double(n: int) -> int:
    from django.apps import apps
    from django.db import connection

    apps.check_apps_ready()  # Django set up in this process, as models need it
    with connection.cursor() as cursor:  # the ORM's connection, set up in this process
        cursor.execute("SELECT %s::int * 2", [n])
        return int(cursor.fetchone()[0])
"""

MANAGE = """
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsettings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
"""

SENDS = """
from django.db import connection, transaction

from djtasks import app, dj_double

with transaction.atomic():
    dj_double.send_in(connection, 21)
try:
    with transaction.atomic():
        dj_double.send_in(connection, 99)
        raise RuntimeError("the view failed")
except RuntimeError:
    pass
transaction.on_commit(lambda: dj_double.send(5))
print("sent to", app.database_url)
"""


def test_a_django_project_sends_in_its_transactions_and_runs_the_worker_with_manage_py(
    database_url: str, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    params = conninfo_to_dict(libpq(database_url))
    # an empty HOST and USER, as many Django settings have: the local socket, the login user
    host = "" if params.get("host") == "/var/run/postgresql" else params.get("host", "")
    user = "" if params.get("user") == getpass.getuser() else params.get("user", "")
    (tmp_path / "djsettings.py").write_text(textwrap.dedent(SETTINGS).format(name=params["dbname"], user=user, host=host, port=str(params.get("port", ""))))
    (tmp_path / "djtasks.py").write_text(textwrap.dedent(TASKS))
    (tmp_path / "manage.py").write_text(textwrap.dedent(MANAGE))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REMUDA_TEST_URL")}
    env["PYTHONPATH"] = str(tmp_path)

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)

    sent = manage("shell", "-c", textwrap.dedent(SENDS))
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert f"dbname='{params['dbname']}'" in sent.stdout, "the app works on Django's database: " + sent.stdout
    rows = db.execute("SELECT args->>'n' FROM remuda.jobs WHERE kind = 'dj_double' ORDER BY id").fetchall()
    assert rows == [("21",), ("5",)], "the send rolled back with its transaction is not there"

    worked = manage("remuda_worker", "--once", "--processes", "1")
    assert worked.returncode == 0, worked.stdout + worked.stderr
    results = db.execute("SELECT state::text, result FROM remuda.jobs WHERE kind = 'dj_double' ORDER BY id").fetchall()
    assert results == [("completed", {"ok": 42}), ("completed", {"ok": 10})], worked.stderr

    settings = (tmp_path / "djsettings.py").read_text()
    (tmp_path / "djsettings.py").write_text(settings.replace('"PORT"', '"OPTIONS": {"service": "mine"}, "PORT"'))
    refused = manage("remuda_worker", "--once")
    assert refused.returncode != 0
    assert "REMUDA_DATABASE = 'default': OPTIONS service: remuda's connections do not take them" in refused.stderr, refused.stderr

    (tmp_path / "djsettings.py").write_text('SECRET_KEY = "x"\nINSTALLED_APPS = ["remuda.django"]\nREMUDA_APP = "djtasks"\n')
    refused = manage("remuda_worker", "--once")
    assert refused.returncode != 0
    assert "REMUDA_APP = 'djtasks': name the remuda app as module:attribute" in refused.stderr, refused.stderr
