"""``python -m remuda worker myapp.tasks:app --reload``: a development worker that restarts
when the code changes. The worker runs as a child process (``python -m remuda worker``, or
``manage.py remuda_worker``, with the same arguments); this process looks at the modification times of the ``.py`` files under
the watched directories (the current one by default) every ``interval`` seconds, and when
one changed, stops the worker as SIGTERM does (running jobs finish within the shutdown
timeout, a second SIGTERM after ``grace`` seconds stops them) and starts it again. A worker
that exits on its own (an import error after an edit) is started again at the next change.
SIGINT, SIGTERM or SIGHUP to this process stops the worker and then this process (a second
one stops its running jobs at once), and the worker never outlives this process.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

#: directories never watched: they hold no code of the app's own
SKIPPED = {".git", ".hg", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", "site-packages"}


def snapshot(dirs: Iterable[Path]) -> dict[str, float]:
    """The ``.py`` files under ``dirs`` and when each was last modified."""
    seen: dict[str, float] = {}
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if d not in SKIPPED and not d.startswith(".")]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    try:
                        seen[path] = os.stat(path).st_mtime
                    except OSError:
                        continue  # gone between the listing and the look
    return seen


def changed(before: dict[str, float], after: dict[str, float]) -> str | None:
    """A file added, removed or modified between two snapshots, if any."""
    for path in sorted(before.keys() | after.keys()):
        if before.get(path) != after.get(path):
            return path
    return None


class Reloader:
    """The worker child and its restarts."""

    def __init__(self, command: list[str], dirs: list[Path], interval: float = 0.5, grace: float = 60.0) -> None:
        #: how the worker is started (``python -m remuda worker …`` without ``--reload``)
        self.command = command
        self.dirs = dirs
        self.interval = interval
        self.grace = grace
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.signals = 0

    def start(self) -> None:
        # (a session of its own: a Ctrl-C reaches this process only, which stops the worker
        # with one SIGTERM; two signals would stop its running jobs at once)
        self.child = subprocess.Popen(self.command, start_new_session=True, preexec_fn=_die_with_parent)

    def stop_child(self) -> int | None:
        """Stops the worker as SIGTERM does (its running jobs finish within its shutdown
        timeout), and at once after ``grace`` seconds or on a second signal: its exit code,
        128 + the signal's number when a signal ended it."""
        child, self.child = self.child, None
        if child is None:
            return None
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                return child.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGTERM)  # a second one stops the running jobs at once
                try:
                    return child.wait(timeout=self.grace)
                except subprocess.TimeoutExpired:
                    child.kill()
        code = child.wait()
        return 128 - code if code < 0 else code

    def serve(self) -> int:
        """Runs until SIGINT, SIGTERM or SIGHUP: the worker's last exit code."""

        def stop(signum: int, frame: object) -> None:
            self.signals += 1
            self.stopping = True
            child = self.child
            if self.signals > 1 and child is not None and child.poll() is None:
                child.send_signal(signal.SIGTERM)  # a second one: the running jobs stop at once

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        dirs = ", ".join(str(d) for d in self.dirs)
        print(f"remuda worker --reload: restarting the worker when a .py file under {dirs} changes", file=sys.stderr, flush=True)
        try:
            self.watch()
        finally:
            code = self.stop_child()
        return 0 if code is None else code

    def watch(self) -> None:
        """Starts the worker, and again after each change, until asked to stop."""
        files = snapshot(self.dirs)
        self.start()
        said_exit = False
        while not self.stopping:
            time.sleep(self.interval)
            if self.child is not None and self.child.poll() is not None and not said_exit:
                print(
                    f"remuda worker --reload: the worker exited with {self.child.returncode}: it starts again when a file changes",
                    file=sys.stderr,
                    flush=True,
                )
                said_exit = True
            now = snapshot(self.dirs)
            path = changed(files, now)
            if path is None or self.stopping:
                continue
            files = now
            print(f"remuda worker --reload: {path} changed: restarting the worker", file=sys.stderr, flush=True)
            self.stop_child()
            if not self.stopping:
                self.start()
            said_exit = False


def _die_with_parent() -> None:
    """In the worker's process before it runs (Linux): SIGTERM when this process dies, so a
    reloader killed outright leaves no worker with old code behind."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the worker outlives a reloader killed with SIGKILL
