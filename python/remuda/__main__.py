"""``python -m remuda worker myapp.tasks:app [--queues a,b] [--concurrency N] [--processes P]
[--config remuda.toml] [--name NAME]``: runs a worker for an app's tasks."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from . import _native
from .errors import RemudaError
from .worker import load_app, run


def main(argv: list[str] | None = None, relaunch: list[str] | None = None) -> int:
    """The command line: the exit code (2 for bad input, 4 for the database). A worker that
    ran ends the process itself once it has printed its report. ``relaunch``: how
    ``--reload`` starts the worker again, its flags after it (``manage.py remuda_worker``;
    by default ``python -m remuda worker APP``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["__remuda-supervise"]:
        # the supervisor of a command task of the config file (it never returns)
        _native.supervise(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m remuda", description="remuda for Python")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run a worker for an app's tasks")
    worker.add_argument("app", help="the app, as module:attribute (myapp.tasks:app)")
    worker.add_argument("--queues", help="queues to claim from, comma-separated (default: the tasks' queues)")
    worker.add_argument("--concurrency", type=int, help="jobs run at once")
    worker.add_argument("--processes", type=int, default=0, help="run plain functions in this many processes")
    worker.add_argument("--config", help="a worker config file (remuda.toml): every key of `remuda worker`")
    worker.add_argument("--name", help="the worker's name in `remuda workers`")
    worker.add_argument("--once", action="store_true", help="exit when the queues are drained (exit 1 if a job failed)")
    worker.add_argument("--once-wait", help="with --once: how far ahead a scheduled retry is still waited for (default 60s; 0s: only what is due)")
    worker.add_argument("--heartbeat-interval", help="override [worker].heartbeat_interval (200ms, 5s)")
    worker.add_argument("--rescue-after", help="override [worker].rescue_after")
    worker.add_argument("--cancel-grace", help="override [worker].cancel_grace")
    worker.add_argument("--crash-loop-limit", type=int, help="override [worker].crash_loop_limit")
    worker.add_argument("--reload", action="store_true", help="development: restart the worker when a .py file under the current directory (or --reload-dir) changes")
    worker.add_argument("--reload-dir", action="append", default=[], metavar="DIR", help="with --reload: a directory to watch (repeatable; default the current one)")
    worker.add_argument("-v", "--verbose", action="count", default=0, help="more log lines on stderr: -v a line per job start and end, -vv debug")
    bench = commands.add_parser("bench", help="drain no-op Python tasks and measure pickup latency")
    bench.add_argument("--jobs", type=int, default=20000, help="jobs enqueued in bulk, then drained")
    bench.add_argument("--concurrency", type=int, default=100, help="jobs run at once")
    bench.add_argument("--pickup", type=int, default=100, help="jobs sent one at a time, 20 ms apart, to an idle worker")
    bench.add_argument("--async", dest="use_async", action="store_true", help="async def tasks instead of plain functions")
    bench.add_argument("--processes", type=int, default=0, help="run the tasks in this many processes")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.command == "bench":
        from .bench import main as bench_main

        return bench_main(args)
    if args.reload or args.reload_dir:
        return reload(args, argv, relaunch)
    sys.path.insert(0, os.getcwd())
    try:
        app = load_app(args.app)
        queues = [q.strip() for q in args.queues.split(",") if q.strip()] if args.queues else None
        print(f"remuda worker: running {', '.join(app.tasks) or 'no tasks'} (Ctrl-C to stop; twice to stop at once)", file=sys.stderr)
        # what the worker does (and, on a stop, what it waits for) is said as the binary says it
        _native.log_worker(min(args.verbose, 2))
        report = run(app, queues=queues, concurrency=args.concurrency, processes=args.processes, config=args.config, name=args.name, app_path=args.app, once=args.once, overrides=overrides(args))
    except (ValueError, TypeError, ImportError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RemudaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 4 if e.code in ("DATABASE", "SCHEMA") else 2
    print(
        f"remuda worker {report['worker_id']}: stopped; {report['completed']} completed, {report['retried']} retried, "
        f"{report['failed']} failed, {report['released']} released",
        file=sys.stderr,
    )
    # a batch run that lost jobs must not look like success to the script that ran it
    code = 1 if args.once and report["failed"] > 0 else 0
    # the worker has released what did not finish: a body that ignored its flag must not
    # keep the process alive
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def reload(args: argparse.Namespace, argv: list[str], relaunch: list[str] | None) -> int:
    """``--reload``: the worker in a child process, restarted when the code changes."""
    from .reloading import Reloader

    if args.once:
        print("error: --reload restarts the worker until it is stopped: it does not go with --once", file=sys.stderr)
        return 2
    if not args.reload:
        print("error: --reload-dir goes with --reload", file=sys.stderr)
        return 2
    dirs = [Path(d).resolve() for d in args.reload_dir] or [Path.cwd()]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        print(f"error: --reload-dir {', '.join(missing)}: not a directory", file=sys.stderr)
        return 2
    child: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--reload":
            continue
        elif arg == "--reload-dir":
            skip = True
        elif not arg.startswith("--reload-dir="):
            child.append(arg)
    # (argv is "worker", the app, then the flags)
    command = [sys.executable, "-m", "remuda", *child] if relaunch is None else [*relaunch, *child[2:]]
    return Reloader(command, dirs).serve()


def overrides(args: argparse.Namespace) -> dict[str, object]:
    """The flags that override the config file's ``[worker]`` table."""
    names = ("heartbeat_interval", "rescue_after", "cancel_grace", "crash_loop_limit", "once_wait")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


if __name__ == "__main__":
    sys.exit(main())
