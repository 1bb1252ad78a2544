"""A standard-library stand-in for the small part of pydantic the probe's models use.

Why: `pvefix verify` ships the probe into a guest as a zipapp, and the guest may have python3
but neither pvefix nor pydantic. The probe's models (report.py, nvsmi.py, sizes.py,
compare.py) are written against pydantic v2; this module gives them the same surface —
`BaseModel` with annotated fields, defaults, `Field(default_factory=..., alias=...)`,
`ConfigDict(frozen, extra="forbid", populate_by_name)`, `model_validate`,
`model_validate_json`, `model_copy(update=...)`, `model_dump`, `model_dump_json` — with
pydantic's lax conversions for the types they use (models, `X | None`, `Literal`, `tuple[X,
...]`, `dict[K, V]`, `int`, `float`, `bool`, `str`). It is not a validator to trust: the JSON
it writes is validated by real pydantic on the pvefix side (`Report.model_validate_json`).
`pvefix.probe._model` picks this module only when pydantic v2 is not importable or when
`PVEFIX_PROBE_STDLIB=1` (the zipapp sets it, so a guest's own pydantic never matters).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import types
import typing
from typing import Any, ClassVar

_MISSING: Any = object()
# Numbers written as text that pydantic's lax mode converts (ASCII digits only).
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")
_FLOAT_TEXT = re.compile(r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*")
# The strings pydantic's lax mode reads as booleans.
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class ValidationError(ValueError):
    """A value does not fit its field (pydantic's ValidationError is a ValueError too)."""


def ConfigDict(**settings: Any) -> dict[str, Any]:
    """Model settings: `frozen`, `extra` ("forbid" or "ignore"), `populate_by_name`."""
    return dict(settings)


class FieldInfo:
    """A field's default (a value or a factory) and its alias."""

    def __init__(self, default: Any = _MISSING, default_factory: Any = None,
                 alias: str | None = None) -> None:
        self.default = default
        self.default_factory = default_factory
        self.alias = alias


def Field(default: Any = _MISSING, *, default_factory: Any = None,
          alias: str | None = None, **_constraints: Any) -> Any:
    """A field with a default factory or an alias (constraints are left to pydantic)."""
    return FieldInfo(default, default_factory, alias)


class _Spec:
    __slots__ = ("alias", "default", "factory", "name")

    def __init__(self, name: str, default: Any, factory: Any, alias: str | None) -> None:
        self.name = name
        self.default = default
        self.factory = factory
        self.alias = alias

    def initial(self) -> Any:
        if self.factory is not None:
            return self.factory()
        return self.default


class BaseModel:
    """Annotated class attributes are fields; instances are built from keyword arguments."""

    model_config: ClassVar[dict[str, Any]] = {}
    __specs__: ClassVar[dict[str, _Spec]] = {}
    __hints__: ClassVar[dict[str, Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs: dict[str, _Spec] = {}
        for klass in reversed(cls.__mro__):
            for name in inspect.get_annotations(klass):
                if name.startswith("_") or name == "model_config":
                    continue  # private names and the settings are not fields, as in pydantic
                raw = klass.__dict__.get(name, _MISSING)
                if isinstance(raw, FieldInfo):
                    specs[name] = _Spec(name, raw.default, raw.default_factory, raw.alias)
                elif name in klass.__dict__:
                    specs[name] = _Spec(name, raw, None, None)
                elif name not in specs:
                    specs[name] = _Spec(name, _MISSING, None, None)
        cls.__specs__ = specs
        cls.__hints__ = None
        config: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            config.update(klass.__dict__.get("model_config", {}) or {})
        cls.model_config = config

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        # Resolved on first use: annotations are strings (`from __future__ import annotations`)
        # that may name classes defined later in the same module.
        if cls.__dict__.get("__hints__") is None:
            cls.__hints__ = typing.get_type_hints(cls)
        hints: dict[str, Any] = cls.__dict__["__hints__"]
        return hints

    def __init__(self, **data: Any) -> None:
        cls = type(self)
        hints = cls._hints()
        by_name = cls.model_config.get("populate_by_name", False)
        values: dict[str, Any] = {}
        used: set[str] = set()
        for name, spec in cls.__specs__.items():
            key = spec.alias or name
            if key in data:
                raw = data[key]
                used.add(key)
            elif spec.alias and by_name and name in data:
                raw = data[name]
                used.add(name)
            else:
                raw = spec.initial()
                if raw is _MISSING:
                    raise ValidationError(f"{cls.__name__}.{name}: field required")
                values[name] = raw
                continue
            values[name] = _convert(hints.get(name, Any), raw, f"{cls.__name__}.{name}")
        extra = set(data) - used
        if extra and cls.model_config.get("extra") == "forbid":
            raise ValidationError(
                f"{cls.__name__}: extra inputs are not permitted: {', '.join(sorted(extra))}"
            )
        object.__setattr__(self, "__dict__", values)

    # -- pydantic's surface ---------------------------------------------------------------

    @classmethod
    def model_validate(cls, obj: Any) -> Any:
        if isinstance(obj, cls):
            return obj
        if not isinstance(obj, dict):
            raise ValidationError(f"{cls.__name__}: expected an object, got {type(obj).__name__}")
        return cls(**obj)

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Any:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValidationError(f"{cls.__name__}: invalid JSON: {exc}") from None
        return cls.model_validate(data)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        clone = object.__new__(type(self))
        values = dict(self.__dict__)
        values.update(update or {})
        object.__setattr__(clone, "__dict__", values)
        return clone

    def model_dump(self, *, mode: str = "python", by_alias: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, spec in type(self).__specs__.items():
            key = spec.alias if by_alias and spec.alias else name
            out[key] = _dump(self.__dict__[name], by_alias)
        return out

    def model_dump_json(self, *, indent: int | None = None, by_alias: bool = False) -> str:
        separators = (",", ":") if indent is None else (",", ": ")
        return json.dumps(self.model_dump(by_alias=by_alias), indent=indent,
                          separators=separators, ensure_ascii=False)

    # -- value behaviour ------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self).model_config.get("frozen"):
            raise ValidationError(f"{type(self).__name__} is frozen: cannot set {name}")
        self.__dict__[name] = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self), tuple(_freeze(v) for v in self.__dict__.values())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({inner})"


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _dump(value: Any, by_alias: bool) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=by_alias)
    if isinstance(value, (tuple, list)):
        return [_dump(v, by_alias) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, by_alias) for k, v in value.items()}
    return value


def _convert(tp: Any, value: Any, loc: str) -> Any:
    """`value` as type `tp`, with pydantic's lax conversions; ValidationError otherwise."""
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        problems = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, loc)
            except ValidationError as exc:
                problems.append(str(exc))
        raise ValidationError("; ".join(problems) or f"{loc}: no type matches")
    if origin is typing.Literal:
        if value in args:
            return value
        raise ValidationError(f"{loc}: expected one of {args!r}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValidationError(f"{loc}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{loc}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise ValidationError(f"{loc}: expected {len(args)} items")
        pairs = enumerate(zip(args, value, strict=True))
        return tuple(_convert(a, v, f"{loc}[{i}]") for i, (a, v) in pairs)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ValidationError(f"{loc}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        return [_convert(item, v, f"{loc}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValidationError(f"{loc}: expected an object, got {type(value).__name__}")
        kt, vt = args if args else (Any, Any)
        return {_convert(kt, k, loc): _convert(vt, v, f"{loc}[{k!r}]") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if isinstance(value, tp):
            return value
        if isinstance(value, dict):
            return tp.model_validate(value)
        raise ValidationError(f"{loc}: expected {tp.__name__}, got {type(value).__name__}")
    return _scalar(tp, value, loc)


def _scalar(tp: Any, value: Any, loc: str) -> Any:
    if tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
    elif tp is int:
        if isinstance(value, int):  # bool too: pydantic's lax mode takes True as 1
            return int(value)
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        if isinstance(value, str) and _INT_TEXT.fullmatch(value):
            with contextlib.suppress(ValueError):  # `\s` takes more than int() strips
                return int(value)
    elif tp is float:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value):
            with contextlib.suppress(ValueError):
                return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif isinstance(tp, type):
        if isinstance(value, tp):
            return value
    else:
        return value  # a typing construct this stand-in does not know: keep the value
    name = getattr(tp, "__name__", str(tp))
    raise ValidationError(f"{loc}: expected {name}, got {value!r:.80}")
