"""The Python worker: remuda's Rust worker runtime in this process, task bodies on a
thread pool (plain functions), one asyncio loop (``async def``), or a pool of processes
(``processes=N``, for CPU-bound plain functions).

One dispatcher thread takes the claimed jobs from Rust in batches and hands each to its
pool; outcomes go back to Rust, which records them in batches. Shutdown, cancellation and
fencing set the job's ``cancelled`` flag (:func:`remuda.current_job`) and cancel async
tasks; the Rust worker releases what does not stop within ``cancel_grace``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from . import _native
from .context import JobContext
from .pool import ProcessLost, ProcessSlots, Stopped
from .running import call_async, call_sync

if TYPE_CHECKING:
    from .app import App
    from .task import Task


def run(
    app: App,
    *,
    queues: list[str] | None = None,
    concurrency: int | None = None,
    processes: int = 0,
    config: str | None = None,
    name: str | None = None,
    app_path: str | None = None,
    stop: threading.Event | None = None,
    once: bool = False,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Runs a worker for ``app``'s tasks until SIGINT or SIGTERM (a second one stops the
    running jobs at once) or until ``stop`` is set: the report (``completed``, ``retried``,
    ``failed``, ``released``: attempts stopped unfinished whose jobs were given back, and
    ``rejected``: outcomes the database refused because the job was no longer this worker's,
    cancelled or rescued while it was cut off). With ``once``, it exits when its queues have no runnable job left (retries
    due within a minute are waited for; ``overrides={"once_wait": "0s"}`` stops at what is
    due), as ``remuda worker --once``. ``overrides``: the binary's other flags
    (``heartbeat_interval``, ``rescue_after``, ``cancel_grace``, ``once_wait`` as
    ``"200ms"``, ``crash_loop_limit``).

    ``config``: a worker config file (``remuda.toml``): every ``[worker]``, ``[retention]``,
    ``[notifications]``, ``[schedules]`` and ``[tasks]`` key of the ``remuda worker`` binary
    is accepted. ``processes``: run plain functions in that many processes (``app_path``,
    ``module:attribute``, says how they import the app).
    """
    if processes and not app_path:
        raise ValueError("processes need app_path='module:app' so that the processes can import the app")
    settings: dict[str, Any] = {
        "queues": queues,
        "concurrency": concurrency,
        "name": name,
        "once": once,
        "processes": processes,
        **(overrides or {}),
        "tasks": [[kind, task.spec()] for kind, task in app.tasks.items()],
        "schedules": [[name, table] for name, table in app.schedules.items()],
    }
    if config is not None:
        with open(config, encoding="utf-8") as f:
            settings["config"] = f.read()
        settings["config_path"] = os.path.abspath(config)
    # the limits the tasks declare, on the queues this worker serves, before it claims
    app.apply_limits(queues)
    native = _native.Worker(app.client, json.dumps(settings))
    dispatcher = Dispatcher(app, native, native.concurrency, processes, app_path)
    pump = threading.Thread(target=dispatcher.serve, name="remuda-dispatcher", daemon=True)
    pump.start()
    if stop is not None:
        threading.Thread(target=_stop_when, args=(stop, native), name="remuda-stop", daemon=True).start()
    try:
        report = dict(json.loads(native.run()))
    finally:
        native.stop()
        pump.join(timeout=5)
        dispatcher.close()
    return report


def _stop_when(stop: threading.Event, native: _native.Worker) -> None:
    stop.wait()
    native.stop()


class Dispatcher:
    """Takes jobs from the Rust worker and runs them on the right pool."""

    def __init__(self, app: App, native: Any, threads: int, processes: int, app_path: str | None) -> None:
        self.app = app
        self.native = native
        self.threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="remuda-task")
        self.loop = asyncio.new_event_loop()
        self.loop_thread = threading.Thread(target=self.loop.run_forever, name="remuda-asyncio", daemon=True)
        self.loop_thread.start()
        self.process_count = processes
        self.app_path = app_path
        self.processes = ProcessSlots(processes, app_path, sys.path) if processes and app_path else None
        # by the run's token: a job released and claimed again keeps its id and attempt; the
        # pool it runs on ("thread", "async" or "process")
        self.running: dict[int, tuple[JobContext, Future[Any], str]] = {}
        # the asyncio task of each async run, by token (read and written on the loop only)
        self.async_tasks: dict[int, asyncio.Task[Any]] = {}
        self.lock = threading.Lock()

    def serve(self) -> None:
        """Takes batches until the worker stops."""
        while True:
            batch = self.native.take(512, 0.5)
            if batch is None:
                return
            for message in batch:
                if message[0] == "run":
                    self.start(*message[1:])
                else:
                    self.cancel(message[1], message[2])

    def start(self, token: int, kind: str, args: str, info_json: str, done: Any, steps: Any) -> None:
        """Starts one job on its pool; a job that cannot start is answered at once (the
        dispatcher never dies of one). ``steps`` is the run's native step store; a body in a
        process of the pool reaches it through the run's step socket instead."""
        try:
            ctx = JobContext.from_info(json.loads(info_json))
            ctx.steps = steps
            task = self.app.tasks.get(kind)
            if task is None:
                done("err", json.dumps({"code": "UNKNOWN_KIND", "message": f"no Python task {kind!r} in this app"}))
                return
            future: Future[Any]
            if task.is_async:
                pool = "async"
                future = asyncio.run_coroutine_threadsafe(self.run_async(token, task, args, ctx), self.loop)
            elif self.processes is not None:
                pool = "process"
                future = self.processes.submit(kind, args, with_step_socket(info_json, steps))
            else:
                pool = "thread"
                future = self.threads.submit(call_sync, task, args, ctx)
        except Exception as e:  # noqa: BLE001 - reported as the job's error
            done("err", json.dumps({"code": "WORKER_ERROR", "message": f"the job could not start: {type(e).__name__}: {e}"}))
            return
        with self.lock:
            self.running[token] = (ctx, future, pool)
        future.add_done_callback(lambda f: self.finish(token, f, done))

    async def run_async(self, token: int, task: Task[Any, Any], args: str, ctx: JobContext) -> tuple[str, str]:
        """An async run on the loop, its task known by token so that a stop cancels it
        there: the outcome is said once the body has ended, never before."""
        if ctx.cancelled.asked():
            return "stopped", ctx.cancelled.reason
        current = asyncio.current_task()
        if current is not None:
            self.async_tasks[token] = current
        try:
            return await call_async(task, args, ctx)
        finally:
            self.async_tasks.pop(token, None)

    def cancel_async(self, token: int) -> None:
        """Cancels an async run's task (on the loop)."""
        running = self.async_tasks.get(token)
        if running is not None:
            running.cancel()

    def finish(self, token: int, future: Future[Any], done: Any) -> None:
        """Reports a run's outcome to Rust."""
        with self.lock:
            entry = self.running.pop(token, None)
        if future.cancelled():
            # cancelled on a stop before it started
            if entry is not None and entry[0].cancelled.asked():
                done("stopped", entry[0].stop_reason or "shutdown")
            else:
                done("err", json.dumps({"code": "CANCELLED", "message": "the task was cancelled before it ended"}))
            return
        error = future.exception()
        if isinstance(error, ProcessLost):
            done("err", json.dumps({"code": "WORKER_PROCESS_LOST", "message": f"a process of the pool died: {error}"}))
        elif isinstance(error, Stopped):
            done("err", json.dumps({"code": "CANCELLED", "message": f"the task was stopped: {error}"}))
        elif error is not None:
            done("err", json.dumps({"code": "WORKER_ERROR", "message": f"{type(error).__name__}: {error}"}))
        else:
            status, payload = future.result()
            done(status, payload)

    def cancel(self, token: int, reason: str) -> None:
        """Asks a run to stop: its flag, and a cancellation (an async task is cancelled on
        its loop and says its outcome when it has ended; a body not yet started never
        starts; a body in a process of the pool, which cannot see the flag, has its process
        killed before the outcome is said)."""
        with self.lock:
            entry = self.running.get(token)
        if entry is None:
            return
        ctx, future, pool = entry
        ctx.stop(reason)
        if pool == "async":
            self.loop.call_soon_threadsafe(self.cancel_async, token)
        elif pool == "process" and self.processes is not None:
            self.processes.stop(future)
        else:
            future.cancel()

    def close(self) -> None:
        """Stops the pools (the worker has released what did not finish)."""
        with self.lock:
            running = list(self.running.values())
        for ctx, _, _ in running:
            ctx.stop("shutdown")
        self.threads.shutdown(wait=False, cancel_futures=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self.processes is not None:
            # the worker has finished or released every job: a process still running a body
            # must not go on beside its job's next run (they ignore SIGTERM)
            self.processes.close()


_child_app: Any = None


def load_app(path: str) -> App:
    """``module:attribute`` imported: the app."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} is not module:attribute (such as myapp.tasks:app)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        # the app's module itself not found: said as is; an import inside it that failed is
        # said with where it failed, as any other error of its code
        if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise
        said = "".join(traceback.format_exception(e)).rstrip()
        raise ValueError(f"importing {module_name} failed:\n{said}") from None
    except Exception as e:
        # the module's own code failed (a syntax error after an edit): said with where it failed
        said = "".join(traceback.format_exception(e)).rstrip()
        raise ValueError(f"importing {module_name} failed:\n{said}") from None
    try:
        return getattr(module, attribute)  # type: ignore[no-any-return]
    except AttributeError:
        raise ValueError(f"module {module_name} has no attribute {attribute!r}") from None


def _child_init(app_path: str, path: list[str]) -> None:
    global _child_app
    # the parent worker decides about signals: Ctrl-C, and a service manager's SIGTERM to
    # the whole group, reach the processes too; the worker lets their jobs finish or stops them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # and a process never outlives its worker (killed, or ended without a word)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), name="remuda-parent", daemon=True).start()
    sys.path[:] = path
    if os.environ.get("REMUDA_DJANGO_SETUP") == "1":
        # a worker of manage.py remuda_worker: the app's modules may use Django's models
        import django

        django.setup()
    _child_app = load_app(app_path)


def _exit_with(sentinel: int) -> None:
    from multiprocessing.connection import wait

    wait([sentinel])
    os._exit(1)


def with_step_socket(info_json: str, steps: Any) -> str:
    """The job description for a process of the pool: with the run's step socket, which
    the worker serves from here (opened only for such runs)."""
    info = json.loads(info_json)
    info["step_socket"] = steps.serve()
    return json.dumps(info)


def _child_run(kind: str, args: str, info_json: str) -> tuple[str, str]:
    ctx = JobContext.from_info(json.loads(info_json))
    return call_sync(_child_app.tasks[kind], args, ctx)


def _slot_main(conn: Any, app_path: str, path: list[str]) -> None:
    """A process of the pool: imports the app, then runs each job it is sent and answers
    its outcome, until its worker closes the pipe."""
    _child_init(app_path, path)
    while True:
        try:
            kind, args, info_json = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(_child_run(kind, args, info_json))
