"""Readable and JSON views of a parsed VM config (for `pvefix inspect config`)."""

from __future__ import annotations

from typing import Any

from pvefix.errors import PvefixError
from pvefix.vmconfig.config import Section, VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, HostPci
from pvefix.vmconfig.machine import Machine


def _typed(key: str, value: str) -> dict[str, Any] | None:
    try:
        if HOSTPCI_KEY.match(key):
            return HostPci.parse(value, key).model_dump(exclude={"key", "raw"})
        if key == "machine":
            return Machine.parse(value).model_dump(exclude={"raw"})
    except PvefixError as exc:
        return {"error": exc.message}
    return None


def _section_json(sec: Section) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": sec.name,
        "kind": sec.kind,
        "active": sec.active,
        "line": sec.header.number if sec.header else 1,
        "description": sec.description,
        "values": sec.as_dict(),
    }
    typed = {k: t for k, v in sec.as_dict().items() if (t := _typed(k, v)) is not None}
    if typed:
        out["typed"] = typed
    if sec.kind == "pending":
        out["delete"] = sec.deletes
    return out


def to_json(cfg: VMConfig) -> dict[str, Any]:
    return {
        "schema": "pvefix.vmconfig/v1",
        "source": cfg.source,
        "digest": cfg.digest,
        "machine_family": Machine.parse(cfg.main.get("machine")).family
        if _typed("machine", cfg.main.get("machine") or "pc") is not None
        and "error" not in (_typed("machine", cfg.main.get("machine") or "pc") or {})
        else None,
        "sections": [_section_json(s) for s in cfg.sections],
        "problems": [{"line": p.line, "message": p.message} for p in cfg.problems],
    }


def describe(cfg: VMConfig) -> str:
    lines = [f"{cfg.source}: digest {cfg.digest}"]
    for sec in cfg.sections:
        title = {"main": "main", "pending": "[PENDING]"}.get(sec.kind, f"[{sec.name}]")
        if not sec.active:
            title += " (ignored by Proxmox)"
        lines.append(f"\n{title}")
        if sec.description:
            lines.append("  description: " + sec.description.replace("\n", "\n               "))
        for key, value in sec.as_dict().items():
            lines.append(f"  {key}: {value}")
            typed = _typed(key, value)
            if typed and "error" in typed:
                lines.append(f"    ! {typed['error']}")
            elif typed and HOSTPCI_KEY.match(key):
                src = f"mapping {typed['mapping']}" if typed["mapping"] else (
                    "host " + ";".join(typed["hosts"])
                )
                flags = [k for k in ("pcie", "x_vga", "legacy_igd") if typed[k]]
                lines.append(f"    -> {src}" + (f" [{', '.join(flags)}]" if flags else ""))
            elif typed and key == "machine":
                lines.append(
                    f"    -> family {typed['family']}"
                    + (f", version {typed['version']}" if typed["version"] else ", unpinned")
                )
        if sec.kind == "main" and sec.get("machine") is None:
            lines.append("  (no machine line: Proxmox uses i440fx, `pc`)")
        if sec.kind == "pending" and sec.deletes:
            lines.append("  delete: " + ", ".join(sec.deletes))
    return "\n".join(lines)
