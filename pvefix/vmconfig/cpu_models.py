"""/etc/pve/virtual-guest/cpu-models.conf: the cluster's custom CPU models (read-only here).

The file is a section config (qemu-server src/PVE/QemuServer/CPUConfig.pm): a `cpu-model: NAME`
line opens a section, indented `key value` lines follow, a blank line closes it. A VM names a
model as `cpu: custom-NAME`. What pvefix reads of a model: `reported-model` (the QEMU model it
starts; kvm64 when absent), `phys-bits` (N or host), `flags` (`+f;-g`), `hidden` (kvm=off) and
`hv-vendor-id`; other keys are kept as text. The VM's own cpu line overrides a model's
`phys-bits`, `hidden`, `hv-vendor-id` and each flag it names (CPUConfig.pm get_cpu_options).
A line pvefix does not understand is never an error: the model keeps what it could read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^cpu-model:\s*(\S+)\s*$")
_LINE = re.compile(r"^\s+(\S+)(?:\s+(.*?))?\s*$")
DEFAULT_REPORTED = "kvm64"


@dataclass(frozen=True)
class CpuModel:
    """One custom model as cpu-models.conf describes it."""

    name: str
    reported_model: str = DEFAULT_REPORTED
    phys_bits: str | None = None
    flags: tuple[str, ...] = ()
    hidden: bool | None = None
    hv_vendor_id: str | None = None
    other: dict[str, str] = field(default_factory=dict)


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "on", "yes", "true")


def _model(name: str, keys: dict[str, str]) -> CpuModel:
    known = {"reported-model", "phys-bits", "flags", "hidden", "hv-vendor-id"}
    return CpuModel(
        name=name,
        reported_model=keys.get("reported-model") or DEFAULT_REPORTED,
        phys_bits=keys.get("phys-bits") or None,
        flags=tuple(f for f in (keys.get("flags") or "").split(";") if f),
        hidden=_truthy(keys["hidden"]) if "hidden" in keys else None,
        hv_vendor_id=keys.get("hv-vendor-id") or None,
        other={k: v for k, v in keys.items() if k not in known},
    )


def parse_cpu_models(text: str) -> dict[str, CpuModel]:
    """Every model of the file by name (without the `custom-` prefix VMs use)."""
    models: dict[str, CpuModel] = {}
    name: str | None = None
    keys: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        header = _HEADER.match(line)
        body = _LINE.match(line) if name is not None else None
        if header or not line.strip() or (name is not None and body is None):
            if name is not None:
                models[name] = _model(name, keys)
            name, keys = (header.group(1), {}) if header else (None, {})
        elif body is not None:
            keys[body.group(1)] = body.group(2) or ""
    return models
