"""Proxmox property strings (`key=value,key2=value2`, optionally a leading default-key value).

The codec is lossless: each comma-separated part keeps its raw text, so reading a value and
setting one sub-key (say `pcie=1`) changes nothing else in the string, not even the order or
spelling (`pcie=yes` stays `pcie=yes` unless pcie itself is set).

Validation against a format (the sub-keys Proxmox knows and their types) is separate:
see `check_format`, which reports problems in Proxmox's own terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pvefix.errors import ValidationError
from pvefix.vmconfig.schema import parse_bool

_KV = re.compile(r"^([^=]+)=(.+)$", re.DOTALL)
_INTEGER = r"[+-]?\d+"
_NUMBER = r"[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?"


@dataclass
class _Part:
    raw: str
    key: str | None  # None: a value of the default key (no '=')
    value: str


def _split(text: str) -> list[_Part]:
    parts: list[_Part] = []
    for raw in text.split(","):
        m = _KV.match(raw)
        if m:
            parts.append(_Part(raw, m.group(1), m.group(2)))
        else:
            parts.append(_Part(raw, None, raw))
    return parts


@dataclass
class PropertyString:
    """A property string that remembers its exact text.

    `default_key` names the key a bare leading value belongs to (`host` for hostpciN, `type`
    for machine). Unknown sub-keys are kept in place.
    """

    parts: list[_Part]
    default_key: str | None = None

    @classmethod
    def parse(cls, text: str, default_key: str | None = None) -> PropertyString:
        return cls(_split(text) if text != "" else [], default_key)

    def _key_of(self, part: _Part) -> str | None:
        if part.key is not None:
            return part.key
        if part.raw.strip() == "" or "=" in part.raw:
            return None
        return self.default_key

    def get(self, key: str) -> str | None:
        """The value of `key` (the last one if repeated), or None."""
        found: str | None = None
        for part in self.parts:
            if self._key_of(part) == key:
                found = part.value
        return found

    def keys(self) -> list[str]:
        return [k for k in (self._key_of(p) for p in self.parts) if k is not None]

    def items(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for part in self.parts:
            k = self._key_of(part)
            if k is not None:
                out.append((k, part.value))
        return out

    def set(self, key: str, value: str) -> bool:
        """Set `key` to `value`, in place if present, else appended. Returns True if changed."""
        if "," in value or value == "":
            raise ValidationError(f"{key}: value '{value}' cannot be stored in a property string")
        for part in reversed(self.parts):
            if self._key_of(part) == key:
                if part.value == value:
                    return False
                part.value = value
                part.raw = value if part.key is None else f"{key}={value}"
                return True
        if key == self.default_key:
            self.parts.insert(0, _Part(value, None, value))
        else:
            self.parts.append(_Part(f"{key}={value}", key, value))
        return True

    def delete(self, key: str) -> bool:
        before = len(self.parts)
        self.parts = [p for p in self.parts if self._key_of(p) != key]
        return len(self.parts) != before

    def render(self) -> str:
        return ",".join(p.raw for p in self.parts)

    def __str__(self) -> str:
        return self.render()


# ---- validation against a format -------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One sub-key of a property-string format, with Proxmox's checks for it."""

    type: str = "string"  # boolean | string | number | integer
    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None
    default_key: bool = False
    check: Callable[[str], str | None] | None = None  # returns an error message or None
    extra: Mapping[str, object] = field(default_factory=dict)


def _field_error(name: str, spec: Field, value: str) -> str | None:
    if spec.type == "boolean":
        if parse_bool(value) is None:
            return f"type check ('boolean') failed - got '{value}'"
        return None
    if spec.type in ("number", "integer"):
        pat = _INTEGER if spec.type == "integer" else _NUMBER
        if not re.fullmatch(pat, value):
            return f"type check ('{spec.type}') failed - got '{value}'"
        num = float(value)
        if spec.minimum is not None and num < spec.minimum:
            return f"value must have a minimum value of {spec.minimum:g}"
        if spec.maximum is not None and num > spec.maximum:
            return f"value must have a maximum value of {spec.maximum:g}"
        return None
    if spec.max_length is not None and len(value) > spec.max_length:
        return f"value may only be {spec.max_length} characters long"
    if spec.enum is not None and value not in spec.enum:
        return f"value '{value}' does not have a value in the enumeration '{', '.join(spec.enum)}'"
    if spec.pattern is not None and not re.fullmatch(f"(?:{spec.pattern})", value):
        return "value does not match the regex pattern"
    if spec.check is not None:
        return spec.check(value)
    return None


def check_format(key: str, text: str, fmt: Mapping[str, Field]) -> dict[str, str]:
    """Check `text` against `fmt` as Proxmox's property-string parser does.

    Returns the sub-key values. Raises ValidationError naming the config key, the value and
    Proxmox's reason (for example `pcie: type check ('boolean') failed - got '2'`).
    """

    def fail(reason: str) -> ValidationError:
        return ValidationError(f"{key}: invalid value '{text}': {reason}")

    default_key = next((k for k, f in fmt.items() if f.default_key), None)
    values: dict[str, str] = {}
    for raw in text.split(","):
        if raw.strip() == "":
            continue
        m = _KV.match(raw)
        if m:
            k, v = m.group(1), m.group(2)
            if k in values:
                raise fail(f"duplicate key in comma-separated list property: {k}")
            values[k] = v
        elif "=" not in raw:
            if default_key is None:
                raise fail("value without key, but schema does not define a default key")
            if default_key in values:
                raise fail(f"duplicate key in comma-separated list property: {default_key}")
            values[default_key] = raw
        else:
            raise fail("missing key in comma-separated list property")
    errors: list[str] = []
    for k, v in values.items():
        spec = fmt.get(k)
        if spec is None:
            errors.append(
                f"{k}: property is not defined in schema and the schema does not allow"
                " additional properties"
            )
            continue
        err = _field_error(k, spec, v)
        if err:
            errors.append(f"{k}: {err}")
    if errors:
        raise fail("; ".join(errors))
    return values
