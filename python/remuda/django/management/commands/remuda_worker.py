"""``python manage.py remuda_worker [--queues a,b] [--concurrency N] [--once] […]``: the
worker of ``settings.REMUDA_APP`` on Django's database, with every flag of
``python -m remuda worker`` (``--reload`` included)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Run a remuda worker for settings.REMUDA_APP (the flags of python -m remuda worker)"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("flags", nargs=argparse.REMAINDER, help="flags of python -m remuda worker (--queues, --concurrency, --once, --reload, …)")

    def run_from_argv(self, argv: list[str]) -> None:
        # the worker's flags go to its own parser (Django's would refuse them; it also
        # answers --help); Django's --settings and --pythonpath were applied before Django
        # was set up, and go on to a relaunch (--reload)
        flags, django = split_django_options(argv[2:])
        self.work(flags, django)

    def handle(self, *args: Any, **options: Any) -> None:
        self.work(list(options.get("flags") or []), [])

    def work(self, flags: list[str], django: list[str]) -> None:
        from ... import bind
        from ....__main__ import main

        app = bind()
        if app is None:
            raise CommandError("set REMUDA_APP = 'myproject.tasks:app' in the settings: the remuda app whose tasks this worker runs")
        # the worker's processes (--processes) set Django up before they import the app, and
        # --reload starts this command again, not python -m remuda
        os.environ["REMUDA_DJANGO_SETUP"] = "1"
        # (manage.py again if that is how it ran; else Django's own command line)
        script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0].endswith(".py") and os.path.basename(sys.argv[0]) != "__main__.py" else None
        program = [sys.executable, script] if script else [sys.executable, "-m", "django"]
        relaunch = [*program, "remuda_worker", *django]
        sys.exit(main(["worker", str(settings.REMUDA_APP), *flags], relaunch=relaunch))


#: Django's options of every command that take a value, and those that take none
DJANGO_VALUED = ("--settings", "--pythonpath")
DJANGO_FLAGS = ("--traceback", "--no-color", "--force-color", "--skip-checks")


def split_django_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """The worker's flags, and Django's own options (kept for a relaunch), apart."""
    flags: list[str] = []
    django: list[str] = []
    taking = False
    for arg in argv:
        if taking:
            django.append(arg)
            taking = False
        elif arg in DJANGO_VALUED:
            django.append(arg)
            taking = True
        elif arg.startswith(tuple(f"{o}=" for o in DJANGO_VALUED)):
            django.append(arg)
        elif arg in DJANGO_FLAGS:
            continue
        else:
            flags.append(arg)
    return flags, django
