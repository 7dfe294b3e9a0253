"""``python -m remuda bench``: the workload of ``remuda bench`` with Python task bodies. N
no-op jobs enqueued in bulk, then drained by a Python worker (start-up included); then the
pickup latency of single sends to an idle worker (``started_at - created_at``, 20 ms apart).
It works in a scratch database beside yours (``<database>_pybench``, dropped afterwards)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

from . import _native
from .app import App
from .worker import run

SUFFIX = "pybench"


def make_app(url: str) -> App:
    """The benchmark's app: a no-op task, plain and async."""
    app = App(url, migrate=False)

    @app.task("pybench.noop", queue="bench")
    def noop(i: int) -> None:
        return None

    @app.task("pybench.anoop", queue="bench")
    async def anoop(i: int) -> None:
        return None

    return app


def measure(url: str, jobs: int, concurrency: int, pickup: int, use_async: bool, processes: int) -> dict[str, Any]:
    """The figures of one run on a migrated scratch database."""
    app = make_app(url)
    task = app.tasks["pybench.anoop" if use_async else "pybench.noop"]
    path = "remuda.bench:BENCH_APP" if processes else None
    started = time.perf_counter()
    for start in range(0, jobs, 50_000):
        task.send_many([{"i": i} for i in range(start, min(jobs, start + 50_000))])
    enqueue_secs = time.perf_counter() - started
    started = time.perf_counter()
    report = run(app, concurrency=concurrency, once=True, processes=processes, app_path=path)
    drain_secs = time.perf_counter() - started
    latencies = pickups(app, task, pickup, concurrency)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "async": use_async,
        "processes": processes,
        "enqueue_jobs_per_sec": round(jobs / enqueue_secs),
        "drain_seconds": round(drain_secs, 3),
        "drain_jobs_per_sec": round(jobs / drain_secs),
        "completed": report["completed"],
        "pickup_ms": {
            "p50": round(statistics.median(latencies), 2) if latencies else None,
            "p99": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 2) if latencies else None,
        },
    }


def pickups(app: App, task: Any, n: int, concurrency: int) -> list[float]:
    """Enqueue-to-start latencies (ms) of ``n`` jobs sent one at a time to an idle worker."""
    if n <= 0:
        return []
    stop = threading.Event()
    worker = threading.Thread(target=run, args=(app,), kwargs={"concurrency": concurrency, "stop": stop}, daemon=True)
    worker.start()
    time.sleep(0.5)
    handles = []
    for i in range(n):
        handles.append(task.send(i=-i - 1))
        time.sleep(0.02)
    latencies = []
    for handle in handles:
        handle.get(timeout=60)
        info = handle.info() or {}
        latencies.append((_time(info["started_at"]) - _time(info["created_at"])).total_seconds() * 1000)
    stop.set()
    worker.join(timeout=30)
    return sorted(latencies)


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def main(args: argparse.Namespace) -> int:
    """Runs the benchmark and prints its figures."""
    global BENCH_APP
    base = os.environ.get("DATABASE_URL") or _native.database_url()
    url = _native.scratch_database(base, SUFFIX)
    os.environ["REMUDA_PYBENCH_URL"] = url
    BENCH_APP = make_app(url)
    try:
        figures = measure(url, args.jobs, args.concurrency, args.pickup, args.use_async, args.processes)
    finally:
        _native.drop_scratch_database(base, SUFFIX)
    if args.json:
        print(json.dumps(figures))
        return 0
    kind = "async" if args.use_async else ("process-pool" if args.processes else "thread-pool")
    print(f"remuda bench (Python, {kind} no-op tasks): {args.jobs} jobs, concurrency {args.concurrency}", file=sys.stderr)
    print(f"  enqueue (COPY)     {figures['enqueue_jobs_per_sec']:>10} jobs/s")
    print(f"  drain              {figures['drain_jobs_per_sec']:>10} jobs/s   ({figures['drain_seconds']} s, worker start-up included)")
    p = figures["pickup_ms"]
    print(f"  pickup when idle   p50 {p['p50']} ms, p99 {p['p99']} ms ({args.pickup} jobs sent one at a time)")
    return 0


#: The app the benchmark's worker processes import (``--processes``).
BENCH_APP: Any = make_app(os.environ["REMUDA_PYBENCH_URL"]) if "REMUDA_PYBENCH_URL" in os.environ else None
