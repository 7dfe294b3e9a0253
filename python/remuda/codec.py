"""Arguments and results beyond plain JSON, rebuilt from the task's annotations.

A job's args and result are stored as JSON. Values JSON has no type for are written as

=============================  ==================================  =========================
Python                         stored as                           rebuilt where annotated
=============================  ==================================  =========================
``datetime``, ``date``,        ISO 8601 text (``isoformat()``)     ``datetime`` / ``date`` /
``time``                                                           ``time``
``timedelta``                  seconds (a number)                  ``timedelta``
``UUID``                       text                                ``UUID``
``Decimal``                    text (exact)                        ``Decimal``
``Enum``                       its value                           the enum's member
dataclass                      an object of its fields             the dataclass
pydantic v2 model              ``model_dump(mode="json")``         ``model_validate``
``tuple``                      a list                              ``tuple[…]``
``set``, ``frozenset``         a list                              ``set[…]`` / ``frozenset[…]``
=============================  ==================================  =========================

and rebuilt when the task's parameter (for args) or return annotation (for ``get()``) says
the type, inside ``list[…]``, ``dict[str, …]``, ``tuple[…]``, ``X | None`` and
``TaskResult[…]`` too. A value the annotation cannot take fails the job with ``BAD_ARGS``
(not retried), naming the parameter and the task's signature. Unannotated parameters get
the JSON as it is.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import inspect
import json
import types
import typing
import uuid
from collections import abc
from typing import Any, Callable, Union, cast

from .errors import InputTypeError, InputValueError
from .result import TaskResult

Decoder = Callable[[Any], Any]

#: annotations whose JSON is the value itself
_PLAIN: tuple[Any, ...] = (int, float, str, bool, type(None), Any, object, dict, list, inspect.Parameter.empty)


class BadArgs(Exception):
    """A job's args the task cannot take (the job fails with ``BAD_ARGS``, not retried)."""


def default(value: Any) -> Any:
    """``json.dumps``'s hook: a value JSON has no type for, as the table above stores it."""
    if isinstance(value, TaskResult):
        return value.to_json()
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, (set, frozenset)):
        return list(cast("set[Any]", value))
    dump: Callable[..., Any] | None = getattr(value, "model_dump", None)
    if dump is not None and hasattr(type(value), "model_validate"):
        return dump(mode="json")
    raise TypeError(
        f"{type(value).__name__} is not JSON: pass dicts, lists, str, numbers, bool, None, datetime, date, time, timedelta, "
        "UUID, Decimal, Enum, dataclasses or pydantic models"
    )


#: made once: ``json.dumps`` with options builds an encoder at every call
_ENCODER = json.JSONEncoder(allow_nan=False, default=default)


def dumps(value: Any) -> str:
    """``value`` as JSON text (see the table above)."""
    return _ENCODER.encode(value)


class TaskCodec:
    """A task's decoders, made once from its annotations: one per parameter that needs
    one (plain JSON types need none), and one for its result."""

    def __init__(self, fn: Callable[..., Any], signature: inspect.Signature) -> None:
        self.signature = signature
        hints = _hints(fn)
        self.params: dict[str, Decoder] = {}
        for name, param in signature.parameters.items():
            if param.kind == param.VAR_KEYWORD:
                continue
            decoder = decoder_for(hints.get(name, param.annotation))
            if decoder is not None:
                self.params[name] = decoder
        self.result = decoder_for(_stored_result(hints.get("return", signature.return_annotation)))
        self.required = frozenset(n for n, p in signature.parameters.items() if p.default is p.empty and p.kind != p.VAR_KEYWORD)
        self.names = frozenset(signature.parameters)
        self.open = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())

    def encode_args(self, kind: str, args: dict[str, Any]) -> str:
        """The job's args as JSON, or an :class:`InputTypeError` naming what could not be."""
        try:
            return dumps(args)
        except ValueError as e:
            raise InputValueError(f"task {kind}: the arguments are not JSON: {e}") from None
        except TypeError as e:
            raise InputTypeError(f"task {kind}: the arguments are not JSON: {e}") from None

    def decode_args(self, kind: str, args: Any) -> dict[str, Any]:
        """A job's args as the function takes them; :class:`BadArgs` naming the parameter
        and the signature when they cannot bind."""
        if not isinstance(args, dict):
            raise BadArgs(f"{self.where(kind)} takes its args as a JSON object of its parameters, not {json.dumps(args)[:200]}")
        values = cast("dict[str, Any]", args)
        keys = values.keys()
        # subset checks build nothing: the differences are made only to say what is wrong
        if not self.required <= keys:
            raise BadArgs(f"{self.where(kind)}: the args have no {', '.join(sorted(self.required - keys))}")
        if not self.open and not keys <= self.names:
            raise BadArgs(f"{self.where(kind)} takes no {', '.join(sorted(keys - self.names))}")
        for name, decoder in self.params.items():
            if name in values:
                try:
                    values[name] = decoder(values[name])
                except Exception as e:  # noqa: BLE001 - whatever building the value raised (a class's own checks too)
                    raise BadArgs(f"{self.where(kind)}: {name}={json.dumps(values[name], default=str)[:200]} cannot be read as annotated: {e}") from None
        return values

    def where(self, kind: str) -> str:
        """The task as its errors name it: ``task add(a: int, b: int) -> int``."""
        return f"task {kind}{self.signature}"

    def decode_result(self, value: Any) -> Any:
        """A stored result as the function's return annotation says (unchanged when it
        cannot be read so: the value is never lost)."""
        if self.result is None:
            return value
        try:
            return self.result(value)
        except Exception:  # noqa: BLE001 - see above
            return value


def returns_task_result(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is annotated to return a ``TaskResult``."""
    annotation = _hints(fn).get("return", getattr(fn, "__annotations__", {}).get("return"))
    if isinstance(annotation, str):
        return annotation.split("[", 1)[0].strip().endswith("TaskResult")
    return annotation is TaskResult or typing.get_origin(annotation) is TaskResult


def _stored_result(annotation: Any) -> Any:
    """What a function annotated ``annotation`` stores as its result: a ``TaskResult[X]``
    stores its value, an ``X`` (the error is stored apart)."""
    if typing.get_origin(annotation) is TaskResult:
        args = typing.get_args(annotation)
        return args[0] if args else Any
    if annotation is TaskResult:
        return Any
    return annotation


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The function's resolved annotations; those that cannot be resolved (a class local
    to a function, under ``from __future__ import annotations``) are left out."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - one unresolvable name must not lose the others
        pass
    out: dict[str, Any] = {}
    globalns = getattr(fn, "__globals__", {})
    for name, annotation in getattr(fn, "__annotations__", {}).items():
        try:
            out[name] = typing.get_type_hints(_Holder(annotation), globalns)["x"]
        except Exception:  # noqa: BLE001 - see above
            continue
    return out


class _Holder:
    """An object with one annotation, for resolving annotations one at a time."""

    def __init__(self, annotation: Any) -> None:
        self.__annotations__ = {"x": annotation}


def decoder_for(annotation: Any) -> Decoder | None:
    """How to rebuild a value of ``annotation`` from its JSON, or ``None`` when the JSON is
    the value (plain types, unknown or string annotations)."""
    if isinstance(annotation, str):
        # unresolvable text: only a TaskResult is recognised by its name
        return _task_result(None) if annotation.split("[", 1)[0].strip().endswith("TaskResult") else None
    if annotation in _PLAIN:
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return decoder_for(typing.get_args(annotation)[0])
    if origin is not None:
        return _generic(origin, typing.get_args(annotation))
    if isinstance(annotation, type):
        return _leaf(annotation)
    supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
    return None if supertype is None else decoder_for(supertype)


def _leaf(cls: type) -> Decoder | None:
    if cls is TaskResult:
        return _task_result(None)
    if issubclass(cls, dt.datetime):
        return lambda v: v if isinstance(v, dt.datetime) else cls.fromisoformat(_text(v))
    if issubclass(cls, dt.date):
        return lambda v: v if isinstance(v, dt.date) else cls.fromisoformat(_text(v))
    if issubclass(cls, dt.time):
        return lambda v: v if isinstance(v, dt.time) else cls.fromisoformat(_text(v))
    if issubclass(cls, dt.timedelta):
        return lambda v: v if isinstance(v, dt.timedelta) else dt.timedelta(seconds=_number(v))
    if issubclass(cls, uuid.UUID):
        return lambda v: v if isinstance(v, uuid.UUID) else cls(_text(v))
    if issubclass(cls, decimal.Decimal):
        return lambda v: v if isinstance(v, decimal.Decimal) else cls(str(_number_or_text(v)))
    if issubclass(cls, enum.Enum):
        member: Callable[[Any], Any] = cls
        return lambda v: v if isinstance(v, cls) else member(v)
    if dataclasses.is_dataclass(cls):
        return _dataclass(cls)
    validate: Callable[[Any], Any] | None = getattr(cls, "model_validate", None)
    if validate is not None and hasattr(cls, "model_dump"):
        return lambda v: v if isinstance(v, cls) else validate(v)
    return None


def _generic(origin: Any, args: tuple[Any, ...]) -> Decoder | None:
    if origin is Union or origin is types.UnionType:
        return _union(args)
    if origin is TaskResult:
        return _task_result(decoder_for(args[0]) if args else None)
    if origin in (list, set, frozenset, abc.Sequence):
        inner = decoder_for(args[0]) if args else None
        build: Callable[[list[Any]], Any] = list if origin is abc.Sequence else cast("Callable[[list[Any]], Any]", origin)
        if inner is None and origin in (list, abc.Sequence):
            return None
        return lambda v: build(_each(inner, _array(v)))
    if origin is tuple:
        return _tuple(args)
    if origin in (dict, abc.Mapping):
        inner = decoder_for(args[1]) if len(args) == 2 else None
        if inner is None:
            return None
        return lambda v: {k: inner(x) for k, x in _object(v).items()}
    if origin is typing.Literal:
        return None
    return None


def _union(arms: tuple[Any, ...]) -> Decoder | None:
    """``A | B | None``: a value whose JSON type a plain arm takes (``int``, ``str``, …) is
    passed as it is (``str | datetime`` keeps text as text); any other is given to each
    structured arm in turn, the first that reads it wins."""
    decoders = [d for d in (decoder_for(a) for a in arms if a is not type(None)) if d is not None]
    if not decoders:
        return None
    kept = tuple(t for a in arms for t in _json_types(a))

    def decode(value: Any) -> Any:
        if isinstance(value, kept):
            return value
        errors: list[str] = []
        for decoder in decoders:
            try:
                return decoder(value)
            except Exception as e:  # noqa: BLE001 - the next arm may read it
                errors.append(str(e))
        raise ValueError("; ".join(errors))

    return decode


def _json_types(arm: Any) -> tuple[type, ...]:
    """The JSON values an arm of a union takes as they are."""
    if arm is type(None):
        return (type(None),)
    if arm is Any or arm is object:
        return (object,)
    plain = typing.get_origin(arm) or arm
    if plain is float:
        return (float, int)
    if plain in (int, str, bool, dict, list) and decoder_for(arm) is None:
        return (plain,)
    return ()


def _tuple(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        inner = decoder_for(args[0])
        return lambda v: tuple(_each(inner, _array(v)))
    decoders = [decoder_for(a) for a in args]

    def decode(value: Any) -> tuple[Any, ...]:
        items = _array(value)
        if args and len(items) != len(decoders):
            raise ValueError(f"expected {len(decoders)} items, got {len(items)}")
        if not args:
            return tuple(items)
        return tuple(x if d is None else d(x) for d, x in zip(decoders, items))

    return decode


def _dataclass(cls: type) -> Decoder:
    # made at the first value, not here: a dataclass may hold itself (a tree of nodes)
    fields: dict[str, Decoder | None] = {}

    def decode(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if not fields:
            hints = _hints_of_class(cls)
            fields.update({f.name: decoder_for(hints.get(f.name, f.type)) for f in dataclasses.fields(cls) if f.init})
        data = _object(value)
        unknown = sorted(data.keys() - fields.keys())
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(unknown)}")
        return cls(**{k: (v if fields[k] is None else fields[k](v)) for k, v in data.items()})  # type: ignore[misc]

    return decode


def _hints_of_class(cls: type) -> dict[str, Any]:
    try:
        # the class's own name resolves too (a class holding itself, defined in a function)
        return typing.get_type_hints(cls, localns={cls.__name__: cls})
    except Exception:  # noqa: BLE001 - unresolvable annotations are taken as plain JSON
        return {}


def _task_result(inner: Decoder | None) -> Decoder:
    def decode(value: Any) -> TaskResult[Any]:
        result: TaskResult[Any] = value if isinstance(value, TaskResult) else TaskResult.from_json(value)  # pyright: ignore[reportUnknownVariableType]
        if inner is None or not result.is_ok():
            return result
        return TaskResult(ok=inner(result.ok))

    return decode


def _each(inner: Decoder | None, items: list[Any]) -> list[Any]:
    return items if inner is None else [inner(x) for x in items]


def _array(value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a JSON array, got {type(value).__name__}")
    return list(cast("list[Any]", value))


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return cast("dict[str, Any]", value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _number_or_text(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a number or text, got {type(value).__name__}")
    return value
