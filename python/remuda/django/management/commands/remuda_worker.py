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
        # every flag goes to the worker's own parser (Django's would refuse them), which
        # also answers --help; Django is set up by now
        self.work(argv[2:])

    def handle(self, *args: Any, **options: Any) -> None:
        self.work(list(options.get("flags") or []))

    def work(self, flags: list[str]) -> None:
        from ... import bind
        from ....__main__ import main

        app = bind()
        if app is None:
            raise CommandError("set REMUDA_APP = 'myproject.tasks:app' in the settings: the remuda app whose tasks this worker runs")
        # the worker's processes (--processes) set Django up before they import the app, and
        # --reload starts this command again, not python -m remuda
        os.environ["REMUDA_DJANGO_SETUP"] = "1"
        relaunch = [sys.executable, os.path.abspath(sys.argv[0]), "remuda_worker"]
        sys.exit(main(["worker", str(settings.REMUDA_APP), *flags], relaunch=relaunch))
