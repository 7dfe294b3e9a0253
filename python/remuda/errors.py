"""The one exception remuda raises: what went wrong, with a stable code."""

from __future__ import annotations


class RemudaError(Exception):
    """An operation remuda refused or could not do.

    ``code`` is stable for programs: ``BAD_INPUT`` (the call's arguments were wrong; the
    message says which and what to do), ``NOT_FOUND``, ``WRONG_STATE``, ``QUEUE_FULL``,
    ``DRIFT`` (a workflow key started with another definition), ``INVALID_SPEC``,
    ``SCHEMA`` (the database needs ``remuda migrate``) or ``DATABASE``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
