"""The VM's next start: what Proxmox will start the VM with at its next cold start.

That is the main section with [PENDING] applied: its deletes first (`delete: a,!b`, `!`
forces), then its values (qemu-server QemuServer.pm vmconfig_apply_pending: deletes, then the
pending values, so a key both deleted and given a value ends with the value). The one place
pvefix computes it, from a config file's text or from the API's rows (GET .../pending: `key`,
`value`, `pending`, `delete` 1 or 2 for forced), and the one place a value from the API's JSON
becomes the text a config file holds (`as_text`). The description is a key here, as it is in
the API (`description`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.vmconfig.config import Section, VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, HostPci
from pvefix.vmconfig.machine import Machine

#: Rows the API adds that are no config key.
DIGEST_KEY = "digest"


def as_text(value: object) -> str:
    """A value from the API's JSON as a config file holds it: a boolean as `1`/`0` (Proxmox's
    schema check normalizes `true`/`on`/`yes` to 1 and writes that), a number or a string as
    printed."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def section_values(sec: Section) -> dict[str, str]:
    """A section's values, its description as the key `description` (as the API shows it)."""
    values = sec.as_dict()
    description = sec.description
    if description is not None:
        values["description"] = description
    return values


@dataclass(frozen=True)
class Staged:
    """One change waiting in [PENDING]: a value (`value`) or a delete (`value` None)."""

    key: str
    value: str | None
    force: bool = False

    def describe(self) -> str:
        if self.value is None:
            return f"delete: {'!' if self.force else ''}{self.key}"
        return f"{self.key}: {self.value}"


@dataclass(frozen=True)
class NextStart:
    """The config now (`current`), what waits in [PENDING] (`pending` values, `deletes`: key ->
    forced), and the digest it was read with. `values` is what the next cold start runs."""

    current: Mapping[str, str]
    pending: Mapping[str, str] = field(default_factory=dict)
    deletes: Mapping[str, bool] = field(default_factory=dict)
    digest: str | None = None

    @classmethod
    def from_config(cls, cfg: VMConfig, digest: str | None = None) -> NextStart:
        """From a parsed config file (its digest unless one is given)."""
        if not cfg.has_pending:
            return cls(section_values(cfg.main), digest=digest or cfg.digest)
        deletes: dict[str, bool] = {}
        for raw in cfg.pending.deletes:
            key = raw.lstrip("!")
            deletes[key] = deletes.get(key, False) or raw.startswith("!")
        return cls(section_values(cfg.main), section_values(cfg.pending), deletes,
                   digest or cfg.digest)

    @classmethod
    def from_text(cls, text: str, source: str = "<config>") -> NextStart:
        return cls.from_config(VMConfig.parse(text, source))

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, object]]) -> NextStart:
        """From GET .../pending (a `digest` row, when there is one, gives the digest)."""
        current: dict[str, str] = {}
        pending: dict[str, str] = {}
        deletes: dict[str, bool] = {}
        digest: str | None = None
        for row in rows:
            key = str(row.get("key"))
            if key == DIGEST_KEY:
                digest = None if row.get("value") is None else as_text(row.get("value"))
                continue
            if row.get("value") is not None:
                current[key] = as_text(row["value"])
            if row.get("pending") is not None:
                pending[key] = as_text(row["pending"])
            if row.get("delete"):
                deletes[key] = as_text(row["delete"]) == "2"
        return cls(current, pending, deletes, digest)

    # ---- reading ----------------------------------------------------------------------------
    @property
    def values(self) -> dict[str, str]:
        """Every key the VM starts with next, and its value."""
        out = {k: v for k, v in self.current.items() if k not in self.deletes}
        out.update(self.pending)
        return out

    def value(self, key: str) -> str | None:
        """The value `key` has at the next cold start (None: absent)."""
        if key in self.pending:
            return self.pending[key]
        if key in self.deletes:
            return None
        return self.current.get(key)

    def is_staged(self, key: str) -> bool:
        """Something waits in [PENDING] for `key` (a value or a delete)."""
        return key in self.pending or key in self.deletes

    @property
    def has_pending(self) -> bool:
        return bool(self.pending) or bool(self.deletes)

    def staged(self) -> list[Staged]:
        """What waits in [PENDING], by key: values, then deletes."""
        out = [Staged(k, v) for k, v in sorted(self.pending.items())]
        out += [Staged(k, None, force) for k, force in sorted(self.deletes.items())
                if k not in self.pending]
        return out

    def staged_for(self, key: str) -> Staged | None:
        return next((s for s in self.staged() if s.key == key), None)

    def rows(self) -> list[tuple[str, str | None, str | None, bool]]:
        """(key, value now, pending value, pending delete) for every key, sorted, as GET
        .../pending lists them (the digest not included)."""
        keys = sorted(set(self.current) | set(self.pending) | set(self.deletes))
        return [(k, self.current.get(k), self.pending.get(k), k in self.deletes) for k in keys]

    def delete_list(self) -> list[str]:
        """The pending deletes as a [PENDING] `delete:` line spells them."""
        return [("!" if force else "") + k for k, force in sorted(self.deletes.items())]


def stage(cfg: VMConfig, key: str, value: str | None, *, force: bool = False) -> None:
    """Proxmox's update of a running VM's config (qemu-server API2/Qemu.pm update_vm_api):
    a value goes to [PENDING] and takes `key` off the pending deletes; a delete (`value` None)
    drops a pending value and queues `key` in `delete:` (`!key` when forced). The description
    is a key of its own: its '#' lines are edited by the caller."""
    pend = cfg.pending
    others = [d for d in pend.deletes if d.lstrip("!") != key]
    if value is None:
        pend.delete(key)
        others.append(("!" if force else "") + key)
    else:
        pend.set(key, value)
    pend.set_deletes(others)


def start_problems(values: Mapping[str, str]) -> list[str]:
    """Why Proxmox would refuse to start a VM with these values, as far as the config alone
    tells (qemu-server Machine.pm and PCI.pm: the machine type, each hostpci entry, `pcie=1`
    without q35: "q35 machine model is not enabled"). Empty: nothing found, not a promise."""
    problems: list[str] = []
    try:
        q35 = Machine.parse(values.get("machine")).is_q35
    except PvefixError as exc:
        return [f"machine: {exc.message}"]
    for key in sorted((k for k in values if HOSTPCI_KEY.match(k)), key=lambda k: (len(k), k)):
        try:
            entry = HostPci.parse(values[key], key)
        except PvefixError as exc:
            problems.append(f"{key}: {exc.message}")
            continue
        problems += [f"{key}: {err}" for err in entry.start_errors()]
        if entry.pcie and not q35:
            problems.append(f"{key}: pcie=1 needs a q35 machine (Proxmox: 'q35 machine model"
                            " is not enabled')")
    return problems
