"""The exceptions remuda raises: what went wrong, with a stable code.

One rule for bad input: every refusal of what a call was given is a :class:`RemudaError`
with ``code == "BAD_INPUT"``, and also a :class:`TypeError` (:class:`InputTypeError`: a value
of the wrong type, an argument the task does not take) or a :class:`ValueError`
(:class:`InputValueError`: the right type, a value that cannot be), so ``except
RemudaError``, ``except TypeError`` and ``except ValueError`` all work as Python code
expects. The message names the argument or option and says what to give instead.
"""

from __future__ import annotations


class RemudaError(Exception):
    """An operation remuda refused or could not do.

    ``code`` is stable for programs: ``BAD_INPUT`` (the call's arguments were wrong; the
    message says which and what to do), ``NOT_FOUND``, ``WRONG_STATE``, ``QUEUE_FULL``,
    ``DRIFT`` (a workflow key started with another definition), ``INVALID_SPEC``,
    ``SCHEMA`` (the database needs ``remuda migrate``), ``DATABASE``, or ``NO_JOB``
    (:func:`remuda.job` called outside a task body).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class InputTypeError(RemudaError, TypeError):
    """``BAD_INPUT``: a value of the wrong type, or an argument that is not taken."""

    def __init__(self, message: str) -> None:
        super().__init__("BAD_INPUT", message)


class InputValueError(RemudaError, ValueError):
    """``BAD_INPUT``: a value of the right type that cannot be used."""

    def __init__(self, message: str) -> None:
        super().__init__("BAD_INPUT", message)


def make(code: str, message: str) -> RemudaError:
    """The exception for ``code`` (how the Rust core raises): ``BAD_INPUT`` as an
    :class:`InputValueError` (the core sees values, their types were checked here)."""
    if code == "BAD_INPUT":
        return InputValueError(message)
    return RemudaError(code, message)
