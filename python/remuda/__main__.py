"""``python -m remuda worker myapp.tasks:app [--queues a,b] [--concurrency N] [--processes P]
[--config remuda.toml] [--name NAME]``: runs a worker for an app's tasks."""

from __future__ import annotations

import argparse
import os
import sys

from .errors import RemudaError
from .worker import load_app, run


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (2 for bad input, 4 for the database)."""
    parser = argparse.ArgumentParser(prog="python -m remuda", description="remuda for Python")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run a worker for an app's tasks")
    worker.add_argument("app", help="the app, as module:attribute (myapp.tasks:app)")
    worker.add_argument("--queues", help="queues to claim from, comma-separated (default: the tasks' queues)")
    worker.add_argument("--concurrency", type=int, help="jobs run at once")
    worker.add_argument("--processes", type=int, default=0, help="run plain functions in this many processes")
    worker.add_argument("--config", help="a worker config file (remuda.toml): every key of `remuda worker`")
    worker.add_argument("--name", help="the worker's name in `remuda workers`")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.getcwd())
    try:
        app = load_app(args.app)
        queues = [q.strip() for q in args.queues.split(",") if q.strip()] if args.queues else None
        print(f"remuda worker: running {', '.join(app.tasks) or 'no tasks'} (Ctrl-C to stop; twice to stop at once)", file=sys.stderr)
        report = run(app, queues=queues, concurrency=args.concurrency, processes=args.processes, config=args.config, name=args.name, app_path=args.app)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
