"""What the API shows of a VM config and how Proxmox's update code edits it.

Everything here works on pvefix's lossless `VMConfig`; the simulator then stores the result with
`render_proxmox()`, as Proxmox's writer would.
"""

from __future__ import annotations

from pvefix.vmconfig.config import Line, Section, VMConfig, encode_text
from pvefix.vmconfig.nextstart import NextStart, section_values, stage
from pvefix.vmconfig.schema import key_type

# Keys Proxmox applies at once to a running VM (no QEMU change needed). Everything else waits
# in [PENDING] for the next cold start: a deliberate simplification of vmconfig_hotplug_pending.
HOT_KEYS = frozenset({"description", "name", "onboot", "tags", "protection"})


def typed(key: str, value: str) -> object:
    """A config value as Proxmox's JSON carries it: booleans and integers as numbers."""
    kind = key_type(key)
    if kind in ("boolean", "integer") and value.isdigit():
        return int(value)
    if kind == "boolean":
        return 1 if value.lower() in ("on", "yes", "true") else 0
    if kind == "number":
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def api_config(cfg: VMConfig, digest: str, *, current: bool) -> dict[str, object]:
    """GET .../config: the main section, or (without `current`) the next start's values."""
    ns = NextStart.from_config(cfg)
    values = dict(ns.current) if current else ns.values
    out: dict[str, object] = {k: typed(k, v) for k, v in values.items()}
    out["digest"] = digest
    return out


def api_snapshot_config(sec: Section, digest: str) -> dict[str, object]:
    out: dict[str, object] = {k: typed(k, v) for k, v in section_values(sec).items()}
    out["digest"] = digest
    return out


def api_pending(cfg: VMConfig, digest: str) -> list[dict[str, object]]:
    """GET .../pending: one item per key, with `value`, `pending` and `delete` (1, or 2 when
    forced), the digest as a row of its own."""
    ns = NextStart.from_config(cfg, digest)
    rows = [*ns.rows(), ("digest", digest, None, False)]
    items: list[dict[str, object]] = []
    for key, value, pending, deleted in sorted(rows):
        item: dict[str, object] = {"key": key}
        if value is not None:
            item["value"] = value if key == "digest" else typed(key, value)
        if pending is not None:
            item["pending"] = typed(key, pending)
        if deleted:
            item["delete"] = 2 if ns.deletes[key] else 1
        items.append(item)
    return items


def set_description(sec: Section, text: str | None) -> None:
    """Replace a section's description ('#' lines first, as Proxmox writes them)."""
    sec.lines = [
        ln for ln in sec.lines
        if ln.kind != "comment" and not (ln.kind == "entry" and ln.key == "description")
    ]
    if text:
        new = [
            Line("#" + encode_text(part), 0, "comment", value=encode_text(part))
            for part in text.split("\n")
        ]
        sec.lines[0:0] = new


def set_value(sec: Section, key: str, value: str) -> None:
    if key == "description":
        set_description(sec, value)
    else:
        sec.set(key, value)


def delete_value(sec: Section, key: str) -> bool:
    if key == "description":
        had = sec.description is not None
        set_description(sec, None)
        return had
    return sec.delete(key)


def pending_set(cfg: VMConfig, key: str, value: str) -> None:
    """Proxmox's update path: the new value goes to [PENDING], its pending delete is dropped."""
    if key == "description":
        set_description(cfg.pending, value)
        cfg.pending.set_deletes([d for d in cfg.pending.deletes if d.lstrip("!") != key])
        return
    stage(cfg, key, value)


def pending_delete(cfg: VMConfig, key: str, force: bool = False) -> None:
    """Queue a deletion: drop any pending value and add `key` to `delete:`."""
    delete_value(cfg.pending, key)
    stage(cfg, key, None, force=force)


def pending_revert(cfg: VMConfig, key: str) -> None:
    """Drop whatever is pending for `key` (value or deletion)."""
    pend = cfg.pending
    delete_value(pend, key)
    pend.set_deletes([d for d in pend.deletes if d.lstrip("!") != key])


def apply_pending(cfg: VMConfig, only: frozenset[str] | None = None) -> list[str]:
    """Move pending values and deletions into the main section (all, or the keys in `only`).

    Returns the keys applied. This is vmconfig_apply_pending for a stopped VM, and the
    hot-pluggable part of vmconfig_hotplug_pending for a running one.
    """
    if not cfg.has_pending:
        return []
    pend, main = cfg.pending, cfg.main
    applied: list[str] = []
    remaining: list[str] = []
    for raw in pend.deletes:
        key = raw.lstrip("!")
        if only is not None and key not in only:
            remaining.append(raw)
            continue
        delete_value(main, key)
        applied.append(key)
    pend.set_deletes(remaining)
    for key, value in section_values(pend).items():
        if only is not None and key not in only:
            continue
        set_value(main, key, value)
        delete_value(pend, key)
        applied.append(key)
    return applied


def cleanup_pending(cfg: VMConfig) -> None:
    """Drop pending values equal to the current ones and deletions of keys not set."""
    if not cfg.has_pending:
        return
    pend, main = cfg.pending, section_values(cfg.main)
    for key, value in section_values(pend).items():
        if main.get(key) == value:
            delete_value(pend, key)
    pend.set_deletes([d for d in pend.deletes if d.lstrip("!") in main])


def add_snapshot(cfg: VMConfig, name: str, values: dict[str, str]) -> None:
    """Append a `[name]` snapshot section (the writer sorts snapshots by name)."""
    sec = Section(name, "snapshot", Line(f"[{name}]", 0, "blank"))
    for key in sorted(values):
        if key == "description":
            continue
        sec.lines.append(Line(f"{key}: {values[key]}", 0, "entry", key, values[key]))
    if values.get("description"):
        set_description(sec, values["description"])
    cfg.sections.append(sec)
