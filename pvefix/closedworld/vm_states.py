"""Closed world: every VM state that changes what a start (or a config write) means.

`template: 1` (AbstractConfig.pm is_template: exactly 1) and each `lock` value of qemu-server's
schema (the `lock` enum in src/PVE/QemuServer.pm `$confdesc`; the capture holds it and
tests/closedworld checks every value is here). A template is never started (QemuServer.pm
vm_start: "you can't start a vm if it's a template"), snapshotted or rolled back
(AbstractConfig.pm snapshot_create, snapshot_rollback); its linked clones keep their own configs.
A lock makes every config write and start fail (check_lock) until it is removed, except the
`suspended` lock, which a start resumes from.
"""

from __future__ import annotations

from pvefix.closedworld.model import Input

_AC = "pve-guest-common src/PVE/AbstractConfig.pm"
_QS = "qemu-server src/PVE/QemuServer.pm vm_start"

_LOCKS = {
    "backup": "a backup runs; a start of the running VM resumes it",
    "clone": "a clone is being made from or to it",
    "create": "the VM is being created or restored",
    "migrate": "a migration runs (or failed and left the lock)",
    "rollback": "a snapshot rollback runs (or failed)",
    "snapshot": "a snapshot is being taken",
    "snapshot-delete": "a snapshot is being deleted",
    "suspending": "the VM is being hibernated",
    "suspended": "hibernated: the next start resumes the saved state, with the old hardware",
}

INPUTS: tuple[Input, ...] = (
    Input("vm-state", "template", "modelled", ("start", "activation"),
          "a template is never started, snapshotted or rolled back: a config change reaches"
          " only clones made afterwards (linked clones keep their own configs)",
          f"{_QS}; {_AC} is_template, snapshot_create"),
    Input("vm-state", "pending", "modelled", ("start", "activation", "drift"),
          "[PENDING] changes land at the next cold start (pvefix.vmconfig.nextstart)",
          "qemu-server vmconfig_apply_pending"),
    *(Input("vm-state", f"lock:{name}", "modelled", ("start", "activation"),
            f"lock {name}: {why}; config writes and starts are refused (check_lock)",
            f"{_AC} check_lock; {_QS}")
      for name, why in _LOCKS.items()),
)

#: The lock values this module classifies (tests compare them with the schema's enum).
LOCK_VALUES: tuple[str, ...] = tuple(_LOCKS)


def is_template(value: str | None) -> bool:
    """AbstractConfig.pm is_template: `template` is defined and numerically 1 (the schema's
    boolean writes `1`)."""
    return value is not None and value.strip() == "1"
