"""Typed outcomes: a task returns a value or a :class:`TaskResult`; ``get()`` returns one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_MISSING: Any = object()


@dataclass(frozen=True)
class TaskError:
    """A task's error: a stable ``code`` (``"BAD_INPUT"``), a ``message`` for people and
    optional JSON ``data``. ``retryable=False`` fails the job at once, whatever its retry
    policy; ``None`` lets the policy (``retry_on``) decide.

    Codes remuda itself uses: ``UNHANDLED_EXCEPTION`` (an exception no mapper named; its
    traceback is in ``data``), ``TIMEOUT``, ``CANCELLED``, ``EXPIRED``, ``WAIT_TIMEOUT`` (from
    ``get``), ``WORKER_LOST``, ``CRASH_LOOP``.
    """

    code: str
    message: str = ""
    data: Any = None
    retryable: bool | None = None

    @property
    def error_code(self) -> str:
        """The code (horsies' name for it)."""
        return self.code

    def to_json(self) -> dict[str, Any]:
        """The error as remuda stores it."""
        return {"code": self.code, "message": self.message, "data": self.data, "retryable": self.retryable}

    @staticmethod
    def from_json(value: Any) -> TaskError:
        """An error as remuda stores it (``{"code", "message", "data"}``, and ``retryable``
        when the task said it)."""
        if not isinstance(value, dict):
            return TaskError("UNKNOWN", str(value))
        retryable = value.get("retryable")
        return TaskError(
            str(value.get("code", "UNKNOWN")),
            str(value.get("message", "")),
            value.get("data"),
            retryable=retryable if isinstance(retryable, bool) else None,
        )


class TaskResult(Generic[T]):
    """Either ``ok`` (a value) or ``err`` (a :class:`TaskError`): ``TaskResult(ok=3)``,
    ``TaskResult(err=TaskError("BAD_INPUT", "width must be positive"))``."""

    __slots__ = ("_ok", "_err")

    def __init__(self, ok: Any = _MISSING, err: TaskError | None = None) -> None:
        if (ok is _MISSING) == (err is None):
            raise ValueError("a TaskResult holds exactly one of ok= and err=")
        if err is not None and not isinstance(err, TaskError):
            raise TypeError(f"err must be a remuda.TaskError, not {type(err).__name__}")
        self._ok = None if ok is _MISSING else ok
        self._err = err

    def is_ok(self) -> bool:
        """Whether the task succeeded."""
        return self._err is None

    def is_err(self) -> bool:
        """Whether the task failed (or the wait for it did)."""
        return self._err is not None

    @property
    def ok(self) -> T | None:
        """The value, or ``None`` for an error."""
        return self._ok

    @property
    def err(self) -> TaskError | None:
        """The error, or ``None`` for a success."""
        return self._err

    @property
    def ok_value(self) -> T:
        """The value; ``ValueError`` for an error (as horsies)."""
        if self._err is not None:
            raise ValueError(f"the result is an error, not a value: {self._err.code}")
        return self._ok  # type: ignore[return-value]

    @property
    def err_value(self) -> TaskError:
        """The error; ``ValueError`` for a success (as horsies)."""
        if self._err is None:
            raise ValueError("the result is a value, not an error")
        return self._err

    def unwrap(self) -> T:
        """The value; raises :class:`TaskFailed` for an error."""
        if self._err is not None:
            raise TaskFailed(self._err)
        return self._ok  # type: ignore[return-value]

    def unwrap_err(self) -> TaskError:
        """The error; ``ValueError`` for a success."""
        return self.err_value

    def to_json(self) -> dict[str, Any]:
        """The tagged form remuda stores: ``{"ok": value}`` or ``{"err": {...}}``."""
        if self._err is not None:
            return {"err": self._err.to_json()}
        return {"ok": self._ok}

    @staticmethod
    def from_json(value: Any) -> TaskResult[Any]:
        """A tagged result (``{"ok": …}`` / ``{"err": …}``) as remuda stores and passes it."""
        if isinstance(value, dict) and "err" in value and value.get("err") is not None:
            return TaskResult(err=TaskError.from_json(value["err"]))
        if isinstance(value, dict) and "ok" in value:
            return TaskResult(ok=value["ok"])
        return TaskResult(err=TaskError("NO_RESULT", f"not a tagged result: {value!r}"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskResult) and (self._ok, self._err) == (other._ok, other._err)

    def __repr__(self) -> str:
        if self._err is not None:
            return f"TaskResult(err={self._err!r})"
        return f"TaskResult(ok={self._ok!r})"


class TaskFailed(Exception):
    """Raised by :meth:`TaskResult.unwrap` on an error; ``error`` is the :class:`TaskError`."""

    def __init__(self, error: TaskError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error
