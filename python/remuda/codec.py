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
``TaskResult[…]`` too. Plain JSON types are checked as they are: ``int`` takes an integer
(not ``true``, not ``1.5``), ``float`` any number but a boolean, ``str`` text only, ``bool``
a boolean only, a bare ``list`` or ``dict`` an array or object, a ``Literal[…]`` one of its
values; inside containers and the fields of dataclasses too (pydantic models check their
own). A value the annotation cannot take fails the job with ``BAD_ARGS`` (not retried),
naming the parameter and the task's signature, whoever sent it (SQL, another language); a
send from Python is refused before it is written (``InputTypeError``). Unannotated
parameters, ``Any`` and ``object`` get the JSON as it is.
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

#: annotations that take any JSON as it is
_ANYTHING: tuple[Any, ...] = (Any, object, inspect.Parameter.empty)

#: the plain annotations, and the Python values each takes (a boolean is taken by ``bool``
#: alone, though Python counts it an ``int``; a tuple or set given to a send is the array it
#: is stored as)
_PLAIN: dict[Any, tuple[type, ...]] = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
    type(None): (type(None),),
    dict: (dict,),
    list: (list, tuple, set, frozenset),
}


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
            if decoder is not None and param.default is None:
                # `x: int = None`: None is taken, as Python before 3.11 read it (Optional)
                decoder = _or_none(decoder)
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

    def check_args(self, kind: str, args: dict[str, Any]) -> None:
        """Refuses (:class:`InputTypeError`) a send whose argument its parameter's annotation
        cannot take, as the worker would read it: checked before the job is written, so
        that a job no worker can run is never made."""
        for name, decoder in self.params.items():
            if name in args:
                try:
                    decoder(args[name])
                except Exception as e:  # noqa: BLE001 - whatever reading the value raised
                    raise InputTypeError(f"{self.where(kind)}: {name}={_shown(args[name])} does not fit its annotation: {e}") from None

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
                    raise BadArgs(f"{self.where(kind)}: {name}={_shown(values[name])} cannot be read as annotated: {e}") from None
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


def _shown(value: Any) -> str:
    """A value as an error shows it: its JSON, cut at 200 characters."""
    return json.dumps(value, default=str)[:200]


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
    if any(annotation is a for a in _ANYTHING):
        return None
    if isinstance(annotation, type) and annotation in _PLAIN:
        return _plain(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return decoder_for(typing.get_args(annotation)[0])
    if origin is not None:
        return _generic(origin, typing.get_args(annotation))
    if isinstance(annotation, type):
        return _leaf(annotation)
    supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
    return None if supertype is None else decoder_for(supertype)


def _plain(cls: type) -> Decoder:
    """A plain annotation's check: the value as it is, if the annotation takes it (an
    ``int`` also takes a whole number written with a fraction, ``5.0``, as PostgreSQL's
    ``numeric`` writes it, and gets ``5``)."""
    taken = _PLAIN[cls]
    refuses_bool = cls is not bool
    whole = cls is int

    def check(value: Any) -> Any:
        if isinstance(value, taken) and not (refuses_bool and isinstance(value, bool)):
            return value
        if whole and type(value) is float and value.is_integer():
            return int(value)
        raise TypeError(f"expected {_NAMES[cls]}, got {_json_kind(value)}")

    return check


def _or_none(decoder: Decoder) -> Decoder:
    return lambda value: None if value is None else decoder(value)


#: how errors name what a plain annotation takes
_NAMES: dict[Any, str] = {
    int: "an integer (int)",
    float: "a number (float)",
    str: "text (str)",
    bool: "true or false (bool)",
    type(None): "null (None)",
    dict: "a JSON object (dict)",
    list: "a JSON array (list)",
}


def _json_kind(value: Any) -> str:
    """What a value is, as JSON would call it (and a float's value: 1.5 is not an int)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _literal(values: tuple[Any, ...]) -> Decoder:
    """``Literal[…]``: one of its values (an enum member's by its value), a boolean never
    taken for 1 or 0."""

    def check(value: Any) -> Any:
        for allowed in values:
            if isinstance(allowed, enum.Enum):
                if value is allowed or (not isinstance(value, enum.Enum) and value == allowed.value):
                    return allowed
            elif value == allowed and isinstance(value, bool) == isinstance(allowed, bool):
                return value
        raise ValueError(f"expected one of {', '.join(_shown(v.value if isinstance(v, enum.Enum) else v) for v in values)}, got {_shown(value)}")

    return check


def _leaf(cls: type) -> Decoder | None:
    if cls is TaskResult:
        return _task_result(None)
    if issubclass(cls, dt.datetime):
        return lambda v: v if isinstance(v, dt.datetime) else cls.fromisoformat(_text(v, "ISO 8601 text"))
    if issubclass(cls, dt.date):
        return lambda v: v if isinstance(v, dt.date) else cls.fromisoformat(_text(v, "ISO 8601 text"))
    if issubclass(cls, dt.time):
        return lambda v: v if isinstance(v, dt.time) else cls.fromisoformat(_text(v, "ISO 8601 text"))
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
            return _array
        return lambda v: build(_each(inner, _array(v)))
    if origin is tuple:
        return _tuple(args)
    if origin in (dict, abc.Mapping):
        inner = decoder_for(args[1]) if len(args) == 2 else None
        if inner is None:
            return _object
        return lambda v: {k: _at(k, inner, x) for k, x in _object(v).items()}
    if origin is typing.Literal:
        return _literal(args)
    return None


def _union(arms: tuple[Any, ...]) -> Decoder | None:
    """``A | B | None``: a value a plain arm takes (``int``, ``str``, ``None``, …) is passed as
    it is (``str | datetime`` keeps text as text); any other is given to each structured
    arm in turn, the first that reads it wins. None of them: refused, unless an arm is one
    no check knows (an unresolved name, a plain class), which then takes it as it is."""
    if any(any(a is x for x in _ANYTHING) for a in arms):
        return None
    plain = [a for a in arms if isinstance(a, type) and a in _PLAIN]
    kept = tuple(t for a in plain for t in _PLAIN[a])
    refuses_bool = bool not in plain
    others = [decoder_for(a) for a in arms if a not in plain]
    lenient = any(d is None for d in others)
    decoders = [d for d in others if d is not None]

    def decode(value: Any) -> Any:
        if isinstance(value, kept) and not (refuses_bool and isinstance(value, bool)):
            return value
        errors: list[str] = []
        for decoder in decoders:
            try:
                return decoder(value)
            except Exception as e:  # noqa: BLE001 - the next arm may read it
                errors.append(str(e))
        if lenient:
            return value
        if plain:
            errors.insert(0, f"expected {' or '.join(_NAMES[a] for a in plain)}, got {_json_kind(value)}")
        raise ValueError("; ".join(errors))

    return decode


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
        return tuple(x if d is None else _at(i, d, x) for i, (d, x) in enumerate(zip(decoders, items)))

    return decode


def _dataclass(cls: type) -> Decoder:
    # made at the first value, not here: a dataclass may hold itself (a tree of nodes)
    fields: dict[str, Decoder | None] = {}

    def decode(value: Any) -> Any:
        if not fields:
            hints = _hints_of_class(cls)
            fields.update({f.name: decoder_for(hints.get(f.name, f.type)) for f in dataclasses.fields(cls) if f.init})
        if isinstance(value, cls):
            # one made in Python (a send): its fields checked as they will be read
            for name, field in fields.items():
                if field is not None:
                    _at(f".{name}", field, getattr(value, name))
            return value
        data = _object(value)
        unknown = sorted(data.keys() - fields.keys())
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(unknown)}")
        return cls(**{k: (v if (field := fields[k]) is None else _at(f".{k}", field, v)) for k, v in data.items()})

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
    return items if inner is None else [_at(i, inner, x) for i, x in enumerate(items)]


def _at(where: int | str, decoder: Decoder, value: Any) -> Any:
    """An element (``where`` its position or key) or a field (``where`` ``.name``) read by
    ``decoder``, its error saying which one it was: ``at [2].user: expected …``."""
    try:
        return decoder(value)
    except Exception as e:  # noqa: BLE001 - whatever reading it raised
        step = where if isinstance(where, str) and where.startswith(".") else f"[{where!r}]"
        if isinstance(e, _Inside):
            raise _Inside(step + e.path, e.why) from None
        raise _Inside(step, str(e)) from None


class _Inside(ValueError):
    """A value inside another that could not be read: where (``[3]``, ``.user``) and why."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"at {path}: {why}")
        self.path = path
        self.why = why


def _array(value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"expected a JSON array, got {_json_kind(value)}")
    return list(cast("list[Any]", value))


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {_json_kind(value)}")
    return cast("dict[str, Any]", value)


def _text(value: Any, what: str = "text") -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected {what}, got {_json_kind(value)}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {_json_kind(value)}")
    return float(value)


def _number_or_text(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a number or text, got {_json_kind(value)}")
    return value
