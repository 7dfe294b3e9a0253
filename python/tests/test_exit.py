"""A program that ends as soon as its awaited result arrives exits cleanly: the client's
thread that delivered the result may still be in Python when the interpreter is torn down."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import remuda

PROGRAM = """
import asyncio
import os
import time

import remuda
from remuda import task as task_module

delivered = task_module.resolver


def slow_resolver(future):
    resolve = delivered(future)

    def slow(text, error):
        resolve(text, error)
        # still in Python on the client's thread, the GIL let go, while the program ends:
        # the interpreter waits for it (else the thread is stopped here, or the process
        # aborts as it leaves Python)
        time.sleep(0.5)
        with open(os.environ["MARK"], "w") as mark:
            mark.write("the callback finished")

    return slow


task_module.resolver = slow_resolver
app = remuda.App(os.environ["REMUDA_TEST_URL"])
handle = app.handle(int(os.environ["JOB_ID"]))


async def main() -> int:
    return (await handle.get_async(timeout=30)).unwrap()


print(asyncio.run(main()))
"""


@pytest.mark.filterwarnings("ignore:no worker is running:RuntimeWarning")  # sent before the worker runs
def test_a_program_ending_right_after_get_async_lets_the_delivering_thread_finish(app: remuda.App, database_url: str, tmp_path: Path) -> None:
    handle = app.tasks["add"].send(a=2, b=3)
    app.run_worker(once=True)
    mark = tmp_path / "mark"
    env = {**os.environ, "REMUDA_TEST_URL": database_url, "JOB_ID": str(handle.id), "MARK": str(mark)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM)], env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "5"), done.stderr
    assert "Fatal Python error" not in done.stderr, done.stderr
    assert mark.exists(), "the thread that delivered the result was stopped in the middle of its call"
