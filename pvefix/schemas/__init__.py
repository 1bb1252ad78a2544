"""JSON Schemas of the files pvefix writes: the plan file, the check report, the desired state,
the snapshot metadata and the rehearsal's verdict. Generated from the models that write them;
shipped in the package (`pvefix/schemas/*.schema.json`) and in `docs/schemas/`.

    python -m pvefix.schemas            # rewrite both copies (tests fail when they are stale)

The desired state is TOML; its schema describes the document as TOML parsers read it (VMIDs
are table keys, hence strings).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://pvefix.invalid/schemas/"  # .invalid: no host; the name identifies the schema


def _finish(schema: dict[str, Any], name: str, title: str) -> dict[str, Any]:
    schema["$schema"] = DRAFT
    schema["$id"] = BASE_ID + f"{name}.schema.json"
    schema["title"] = title
    return schema


def plan_schema() -> dict[str, Any]:
    """A plan file (`pvefix plan --out`, which adds `created_at`), and each of the `plans` of
    `pvefix plan --format json`."""
    from pvefix.planner.model import Plan

    schema = Plan.model_json_schema(by_alias=True, mode="serialization")
    schema["properties"]["created_at"] = {
        "type": "string", "format": "date-time",
        "description": "when `pvefix plan --out` saved the file (UTC, ISO 8601)"}
    return _finish(schema, "plan", "pvefix.plan/v1: a plan file")


def plans_schema() -> dict[str, Any]:
    """`pvefix plan --format json` (pvefix.plans/v1): the same object for one VM or several."""
    from pvefix.planner.model import PLANS_SCHEMA

    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["schema", "plans"],
        "properties": {
            "schema": {"const": PLANS_SCHEMA},
            "plans": {
                "type": "array", "minItems": 1,
                "description": "one plan per VMID, in the order named (pvefix.plan/v1)",
                "items": {"$ref": BASE_ID + "plan.schema.json"}}},
        # Embedded with its own $id (a schema resource of its own), so this file stands alone.
        "$defs": {"plan": plan_schema()}}
    return _finish(schema, "plans", "pvefix.plans/v1: what `pvefix plan --format json` prints")


def check_schema() -> dict[str, Any]:
    """`pvefix check --format json` (pvefix.check/v1)."""
    from pvefix.check.report import REPORT_SCHEMA, CheckItem, CheckReport

    item = CheckItem.model_json_schema(mode="serialization")
    statuses = ("ok", "drift", "unknown", "skipped")
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["schema", "source", "read_path", "exit_code", "summary", "items", "notes"],
        "properties": {
            "schema": {"const": REPORT_SCHEMA},
            "source": {"type": "string"},
            "read_path": CheckReport.model_json_schema(mode="serialization")["properties"][
                "read_path"],
            "exit_code": {"enum": [0, 1, 2]},
            "summary": {
                "type": "object", "additionalProperties": False, "required": list(statuses),
                "properties": {s: {"type": "integer", "minimum": 0} for s in statuses}},
            "items": {"type": "array", "items": {"$ref": "#/$defs/CheckItem"}},
            "notes": {"type": "array", "items": {"type": "string"}},
            "rehearsals": {
                "type": "array",
                "description": "with --rehearse: the verdict of each rehearsed VM "
                "(pvefix.rehearse/v1), in the order rehearsed",
                "items": {"$ref": BASE_ID + "rehearse.schema.json"}}},
        # Embedded with its own $id (a schema resource of its own), so this file stands alone.
        "$defs": {**item.pop("$defs", {}), "CheckItem": item, "rehearse": rehearse_schema()}}
    return _finish(schema, "check", "pvefix.check/v1: a drift check report")


def desired_schema() -> dict[str, Any]:
    """A desired-state file (pvefix.desired/v1, TOML) as a TOML parser reads it."""
    from pvefix.desired.model import DesiredState, VmDefaults

    schema = DesiredState.model_json_schema(by_alias=True, mode="validation")
    vms = schema["properties"]["vms"]
    vms["propertyNames"] = {"pattern": "^[1-9][0-9]{2,8}$"}  # VMIDs, as TOML table keys
    # `[defaults]` is read (and applied to the VM tables) before the model sees the file.
    defaults = VmDefaults.model_json_schema(by_alias=True, mode="validation")
    schema["properties"]["defaults"] = {"$ref": "#/$defs/VmDefaults"}
    schema.setdefault("$defs", {})["VmDefaults"] = defaults
    return _finish(schema, "desired", "pvefix.desired/v1: a desired-state file (TOML)")


def snapshot_schema() -> dict[str, Any]:
    """A snapshot's meta.json (pvefix.snapshot/v1)."""
    from pvefix.executor.snapshot import SnapshotMeta

    schema = SnapshotMeta.model_json_schema(by_alias=True, mode="serialization")
    return _finish(schema, "snapshot", "pvefix.snapshot/v1: a snapshot's meta.json")


def rehearse_schema() -> dict[str, Any]:
    """`pvefix rehearse --format json` (pvefix.rehearse/v1)."""
    from pydantic import TypeAdapter

    from pvefix.rehearse.verdict import REHEARSE_SCHEMA, Verdict

    schema = TypeAdapter(Verdict).json_schema(mode="serialization")
    schema.pop("$defs", None)
    address = {"anyOf": [{"type": "string", "pattern": "^0x[0-9a-f]+$"}, {"type": "null"}]}
    bar = {
        "type": "object", "additionalProperties": False,
        "required": ["id", "host", "size", "status", "address", "end"],
        "properties": {
            "id": {"type": "string", "description": "the stand-in's QEMU id: hostpciN[.J]"},
            "host": {"type": "string", "description": "the host function it stands for"},
            "size": {"type": "integer", "minimum": 1, "description": "its BAR size, bytes"},
            "status": {"enum": ["placed", "not-placed", "beyond-reach", "overlaps-ram"]},
            "address": address, "end": address}}
    props = schema["properties"]
    props["bars"] = {"type": "array", "items": bar}
    props["schema"] = {"const": REHEARSE_SCHEMA}
    props["ok"] = {"type": "boolean", "description": "outcome is placed and not_established is"
                   " empty"}
    props["command"] = {"type": "string", "description": "the QEMU command (--show-command)"}
    schema["required"] = sorted({*schema.get("required", []), "schema", "ok", "bars",
                                 "phys_bits", "vendor", "boot_s", "peak_rss_mb", "notes"})
    schema["additionalProperties"] = False
    return _finish(schema, "rehearse", "pvefix.rehearse/v1: a rehearsal's verdict")


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "rehearse": rehearse_schema,
    "plan": plan_schema,
    "plans": plans_schema,
    "check": check_schema,
    "desired": desired_schema,
    "snapshot": snapshot_schema,
}


def schema_text(name: str) -> str:
    """The committed file's exact text for schema `name`."""
    return json.dumps(SCHEMAS[name](), indent=2, sort_keys=True) + "\n"


def shipped(name: str) -> dict[str, Any]:
    """The schema as shipped in the package (what a consumer of pvefix's files reads)."""
    text = resources.files("pvefix.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data
