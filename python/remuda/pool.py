"""The process pool of a Python worker (``--processes N``): N ``spawn``ed processes, each
running one job at a time and fed by a thread of its own.

Unlike :class:`concurrent.futures.ProcessPoolExecutor`, whose every pending and running job
fails when one of its processes dies while the others' bodies run on, a process that dies
(killed, out of memory) here fails only the job it ran, and is replaced. A job asked to stop
(cancelled, past its timeout, or still running when the worker's shutdown ends) has its
process killed and waited for before its outcome is reported: a body never runs beside its
job's next attempt.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any


class ProcessLost(Exception):
    """The process running a job died before it answered."""


class Stopped(Exception):
    """The process running a job was stopped, as the job was asked to stop."""


@dataclass
class _Job:
    kind: str
    args: str
    info_json: str
    future: Future[Any] = field(default_factory=Future)


class _Slot:
    """One process and the job it runs."""

    def __init__(self, pool: ProcessSlots) -> None:
        self.pool = pool
        self.lock = threading.Lock()
        self.process: Any = None
        self.conn: Connection | None = None
        self.current: _Job | None = None
        self.stopping = False

    def start(self) -> None:
        from .worker import _slot_main

        ours, theirs = self.pool.context.Pipe()
        process = self.pool.context.Process(
            target=_slot_main,
            args=(theirs, self.pool.app_path, self.pool.path),
            name="remuda-process",
            daemon=True,
        )
        process.start()
        theirs.close()
        self.process, self.conn = process, ours

    def serve(self) -> None:
        """Runs the jobs it takes until the pool closes."""
        while True:
            job = self.pool.jobs.get()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue
            with self.lock:
                self.current, self.stopping = job, False
            try:
                job.future.set_result(self.run(job))
            except BaseException as e:  # noqa: BLE001 - the job's outcome
                job.future.set_exception(e)
            finally:
                with self.lock:
                    self.current = None

    def run(self, job: _Job) -> Any:
        if self.process is None or not self.process.is_alive():
            self.start()
        process, conn = self.process, self.conn
        assert process is not None and conn is not None
        try:
            conn.send((job.kind, job.args, job.info_json))
            ready = wait([conn, process.sentinel])
            if conn in ready:
                return conn.recv()
        except (EOFError, OSError):
            pass
        # dead: waited for, then replaced by the next job's start
        process.join()
        code = process.exitcode
        conn.close()
        self.process = None
        if self.stopping:
            raise Stopped("the process running it was stopped")
        raise ProcessLost(f"the process running it died (exit code {code})")

    def stop(self, future: Future[Any]) -> bool:
        """Kills the process if it runs the job of `future`."""
        with self.lock:
            if self.current is None or self.current.future is not future:
                return False
            self.stopping = True
            if self.process is not None:
                self.process.kill()
            return True

    def kill(self) -> None:
        with self.lock:
            self.stopping = True
            if self.process is not None and self.process.is_alive():
                self.process.kill()


class ProcessSlots:
    """``count`` processes that import the app at ``app_path`` (with ``path`` as sys.path)."""

    def __init__(self, count: int, app_path: str, path: list[str]) -> None:
        # never fork: the worker's process runs tokio's threads
        self.context = multiprocessing.get_context("spawn")
        self.app_path = app_path
        self.path = path
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.slots = [_Slot(self) for _ in range(count)]
        self.threads = [
            threading.Thread(target=slot.serve, name=f"remuda-process-{i}", daemon=True)
            for i, slot in enumerate(self.slots)
        ]
        for slot in self.slots:
            slot.start()
        for thread in self.threads:
            thread.start()

    def submit(self, kind: str, args: str, info_json: str) -> Future[Any]:
        """Queues a job for the next free process; its future holds the body's outcome."""
        job = _Job(kind, args, info_json)
        self.jobs.put(job)
        return job.future

    def stop(self, future: Future[Any]) -> None:
        """Stops a job: one not started never starts; a running one has its process killed
        (its future then fails with :class:`Stopped`, once the process is gone)."""
        if future.cancel():
            return
        for slot in self.slots:
            if slot.stop(future):
                return

    def close(self) -> None:
        """Kills the processes (the worker has finished or released every job) and waits for
        them, so that none outlives the worker."""
        for _ in self.threads:
            self.jobs.put(None)
        for slot in self.slots:
            slot.kill()
        for thread in self.threads:
            thread.join(timeout=5)
        for slot in self.slots:
            if slot.process is not None:
                slot.process.join(timeout=5)
