"""remuda from Python in one file: tasks, sends, typed results, retries, an async task and
a workflow, with a worker running in this process.

    pip install ./python && python python/examples/quickstart.py

The database is $DATABASE_URL, else the one the `remuda` binary finds (a local server, else
a private cluster started from the local PostgreSQL binaries).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass

import remuda

app = remuda.App()


@dataclass
class Image:
    """A task's result: stored as JSON, rebuilt as the dataclass where it is read."""

    path: str
    width: int
    attempt: int


class Upstream(Exception):
    """The image service hiccuped: worth another attempt."""


@app.task(
    "resize",
    queue="media",
    retry=remuda.RetryPolicy.exponential(base=0.05, max_attempts=5, retry_on=["UPSTREAM"]),
    exception_mapper={Upstream: "UPSTREAM", ValueError: "BAD_INPUT"},
)
def resize(path: str, width: int) -> Image:
    if width <= 0:
        raise ValueError(f"width {width} must be positive")
    if random.random() < 0.1:
        raise Upstream("the image service timed out")
    job = remuda.current_job()
    return Image(path, width, job.attempt if job else 1)


@app.task("describe")
async def describe(image: remuda.TaskResult[Image]) -> str:
    await asyncio.sleep(0.01)
    cover = image.unwrap()
    return f"{cover.path} at {cover.width}px"


def main() -> None:
    stop = threading.Event()
    worker = threading.Thread(target=app.run_worker, kwargs={"stop": stop, "concurrency": 32})
    worker.start()
    try:
        started = time.monotonic()
        handles = [resize.send(path=f"img{i}.jpg", width=640) for i in range(200)]
        results = [h.get(timeout=60) for h in handles]
        retried = sum(1 for r in results if r.is_ok() and r.unwrap().attempt > 1)
        print(f"200 resizes: {sum(r.is_ok() for r in results)} ok ({retried} after a retry) in {time.monotonic() - started:.2f}s")
        bad = resize.send(path="x.jpg", width=0).get(timeout=30)
        print(f"a bad width: {bad.err_value.code}: {bad.err_value.message}")

        image = resize.node(path="cover.jpg", width=1200)
        text = describe.node(args_from={"image": image})
        run = app.workflow("cover", [image, text], output=text).start()
        print(f"workflow run {run.id}: {run.get(timeout=60).unwrap()}")
    finally:
        stop.set()
        worker.join()


if __name__ == "__main__":
    main()
