"""Retry policies: how many attempts, how long between them, which error codes retry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class RetryPolicy:
    """How a task's failed attempts are retried (by the Rust worker, with jitter).

    ``retry_on``: the error codes that retry (``None``: every error not marked
    ``retryable=False``). ``when``: a predicate of the exception a body raised; ``False``
    fails the job at once, whatever its attempts left (``when=lambda e: not isinstance(e,
    KeyError)``); a predicate that raises leaves the decision to the policy. Build one with
    :meth:`exponential` or :meth:`fixed`.
    """

    max_attempts: int = 25
    kind: str = "exponential"
    base: float = 1.0
    max_delay: float = 3600.0
    jitter: bool = True
    retry_on: list[str] | None = field(default=None)
    when: Callable[[BaseException], bool] | None = field(default=None, compare=False)

    @staticmethod
    def exponential(
        base: float = 1.0,
        max_attempts: int = 25,
        retry_on: list[str] | None = None,
        max_delay: float = 3600.0,
        jitter: bool = True,
        when: Callable[[BaseException], bool] | None = None,
    ) -> RetryPolicy:
        """``base * 2^(attempt-1)`` seconds, capped at ``max_delay``."""
        return RetryPolicy(max_attempts, "exponential", float(base), float(max_delay), jitter, _codes(retry_on), _when(when))

    @staticmethod
    def fixed(
        delay: float,
        max_attempts: int = 25,
        retry_on: list[str] | None = None,
        jitter: bool = False,
        when: Callable[[BaseException], bool] | None = None,
    ) -> RetryPolicy:
        """The same ``delay`` (seconds) before every retry."""
        return RetryPolicy(max_attempts, "fixed", float(delay), float(delay), jitter, _codes(retry_on), _when(when))

    @staticmethod
    def none() -> RetryPolicy:
        """One attempt only."""
        return RetryPolicy(max_attempts=1)

    def to_json(self) -> dict[str, Any]:
        """The policy as the worker takes it."""
        if self.kind == "fixed":
            backoff: dict[str, Any] = {"kind": "fixed", "delay": self.base, "jitter": self.jitter}
        else:
            backoff = {"kind": "exponential", "base": self.base, "max": self.max_delay, "jitter": self.jitter}
        return {"max_attempts": self.max_attempts, "retry_on": self.retry_on, "backoff": backoff}


def _when(when: Callable[[BaseException], bool] | None) -> Callable[[BaseException], bool] | None:
    if when is not None and not callable(when):
        raise TypeError(f"when={when!r}: give a function of the exception, such as lambda e: not isinstance(e, KeyError)")
    return when


def _codes(retry_on: list[str] | None) -> list[str] | None:
    if retry_on is None:
        return None
    if isinstance(retry_on, str):
        raise TypeError("retry_on is a list of error codes, such as ['TIMEOUT']")
    return [str(c) for c in retry_on]
