"""What a running task can know of its job: :func:`current_job`."""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class JobContext:
    """The job a task body is running: its id, attempt, and whether it must stop.

    ``cancelled`` is set when the job is cancelled, the worker shuts down, or the worker lost
    the job (fencing): a long task should check :meth:`is_cancelled` (or wait on
    ``cancelled``) and return. Async tasks are also cancelled (``asyncio.CancelledError``).
    """

    id: int
    kind: str
    queue: str
    attempt: int
    max_attempts: int
    worker_id: str
    timeout: float | None = None
    workflow: dict[str, Any] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def is_cancelled(self) -> bool:
        """Whether the job was asked to stop."""
        return self.cancelled.is_set()

    @staticmethod
    def from_info(info: dict[str, Any]) -> JobContext:
        """The context from the worker's job description."""
        return JobContext(
            id=int(info["id"]),
            kind=str(info["kind"]),
            queue=str(info["queue"]),
            attempt=int(info["attempt"]),
            max_attempts=int(info["max_attempts"]),
            worker_id=str(info["worker_id"]),
            timeout=info.get("timeout"),
            workflow=info.get("workflow"),
        )


_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar("remuda_job", default=None)


def current_job() -> JobContext | None:
    """The job the calling task body runs (``None`` outside a task)."""
    return _current.get()


def _enter(ctx: JobContext) -> contextvars.Token[JobContext | None]:
    return _current.set(ctx)


def _leave(token: contextvars.Token[JobContext | None]) -> None:
    _current.reset(token)
