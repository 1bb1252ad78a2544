"""The simulator's API value checks: qemu-server's own schema, applied as PVE::JSONSchema does.

`confdesc.json` beside this file is qemu-server's `json_config_properties()` as Proxmox's code
states it (types, ranges, lengths, patterns, enumerations, format names), derived by
tests/conformance/confdesc.py from the pve-oracle and checked against it in the conformance
suite. The checks follow PVE::JSONSchema's check_type and check_prop, in their order, with their
messages. So the simulator refuses what Proxmox's API refuses (`sockets=0`) and stores what it
stores (a multi-line description), instead of judging pvefix by pvefix's own validator.

Formats: `pve-qm-hostpci`, `machine` and `dns-name` are checked (pvefix's parsers and
pve-common's DNS rule); other formats are accepted unchecked (docs/simulator.md says so).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from pvefix.errors import ValidationError
from pvefix.vmconfig.hostpci import HostPci
from pvefix.vmconfig.machine import MACHINE_FORMAT, Machine
from pvefix.vmconfig.propstring import check_format
from pvefix.vmconfig.values import DNS_NAME

UNKNOWN = "property is not defined in schema and the schema does not allow additional properties"
_INTEGER = re.compile(r"[+-]?\d+")  # JSONSchema is_integer
_NUMBER = re.compile(r"[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?")  # is_number
_INDEXED = re.compile(r"^([a-z][a-z_-]*?)(\d+)$")


@cache
def confdesc() -> dict[str, Any]:
    text = resources.files("pvefix.sim").joinpath("confdesc.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def schema_of(key: str) -> dict[str, Any] | None:
    """The schema of one API parameter of the VM config, or None when Proxmox has none."""
    data = confdesc()
    spec: dict[str, Any] | None = data["keys"].get(key)
    if spec is not None:
        return spec
    m = _INDEXED.match(key)
    if m and str(int(m.group(2))) == m.group(2):
        family = data["indexed"].get(m.group(1))
        if family and int(m.group(2)) < family["count"]:
            found: dict[str, Any] = family["schema"]
            return found
    return None


def _format_error(key: str, fmt: str, value: str) -> str | None:
    try:
        if fmt == "pve-qm-hostpci":
            HostPci.parse(value, key)
        elif fmt == "property-string" and key == "machine":
            check_format(key, value, MACHINE_FORMAT)  # the sub-option rules come later
        elif fmt == "dns-name" and not DNS_NAME.fullmatch(value):
            return "value does not look like a valid DNS name"
    except ValidationError as exc:
        message = exc.message
        message = message[len(key) + 2:] if message.startswith(f"{key}: ") else message
        unknown = _UNKNOWN_SUBKEY.fullmatch(message)
        if unknown:  # parse_property_string's check_object: JSONSchema's "format error" text
            return f"format error\n{key}.{unknown[1]}: {UNKNOWN}\n"
        return message
    return None


_UNKNOWN_SUBKEY = re.compile(r"invalid value '.*': ([\w-]+): " + re.escape(UNKNOWN), re.S)


def check(key: str, value: str) -> str | None:
    """Proxmox's API message for `key=value` (None when its schema accepts the value)."""
    spec = schema_of(key)
    if spec is None:
        return UNKNOWN
    kind = spec.get("type")
    if kind == "boolean" and value not in ("0", "1"):
        return f"type check ('boolean') failed - got '{value}'"
    if kind == "integer" and not _INTEGER.fullmatch(value):
        return f"type check ('integer') failed - got '{value}'"
    if kind == "number" and not _NUMBER.fullmatch(value):
        return f"type check ('number') failed - got '{value}'"
    fmt = spec.get("format")
    if fmt:
        problem = _format_error(key, fmt, value)
        if problem:
            return f"invalid format - {problem}"
    pattern = spec.get("pattern")
    if pattern and not re.fullmatch(f"(?:{pattern})", value):
        return "value does not match the regex pattern"
    longest = spec.get("maxLength")
    if longest is not None and len(value) > longest:
        return f"value may only be {longest} characters long"
    if _NUMBER.fullmatch(value):
        number = float(value)
        if spec.get("maximum") is not None and number > spec["maximum"]:
            return f"value must have a maximum value of {spec['maximum']}"
        if spec.get("minimum") is not None and number < spec["minimum"]:
            return f"value must have a minimum value of {spec['minimum']}"
    enum = spec.get("enum")
    if enum and value not in enum:
        return f"value '{value}' does not have a value in the enumeration '{', '.join(enum)}'"
    return None


def machine_rule_error(value: str) -> str | None:
    """update_vm_api's assert_valid_machine_property, after the schema (vIOMMU, aw-bits)."""
    try:
        Machine.parse(value)
    except ValidationError as exc:
        return exc.message.rsplit("': ", 1)[-1]
    return None
