"""Desired state: what must hold for VMs and their hosts (`pvefix.desired/v1`, TOML).

    from pvefix.desired import desired_from_state, load_desired, record
    path = record(state_dir, state)          # apply: record the state it reached
    desired = load_desired("plans/desired.toml")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pvefix.lazy import lazy_names

if TYPE_CHECKING:
    from pvefix.desired.derive import desired_from_state
    from pvefix.desired.model import (
        SCHEMA,
        CmdlineRules,
        DesiredState,
        HostPciRule,
        MachineRule,
        NodeDesired,
        P2PRule,
        VmDesired,
    )
    from pvefix.desired.parse import load_desired, loads_desired
    from pvefix.desired.store import load_recorded, record, recorded_path, recorded_vmids
    from pvefix.desired.writer import dumps_desired

# Loaded on first use: `pvefix plan` asks only whether a VM has a recorded state, and the
# models, the TOML reader and the writer cost ~0.1 s of start-up it need not pay.
_WHERE = {
    "SCHEMA": "model", "CmdlineRules": "model", "DesiredState": "model",
    "HostPciRule": "model", "MachineRule": "model", "NodeDesired": "model", "P2PRule": "model",
    "VmDesired": "model", "desired_from_state": "derive", "dumps_desired": "writer",
    "load_desired": "parse", "loads_desired": "parse", "load_recorded": "store",
    "record": "store", "recorded_path": "store", "recorded_vmids": "store",
}


__getattr__ = lazy_names(__name__, _WHERE)


__all__ = [
    "SCHEMA",
    "CmdlineRules",
    "DesiredState",
    "HostPciRule",
    "MachineRule",
    "NodeDesired",
    "P2PRule",
    "VmDesired",
    "desired_from_state",
    "dumps_desired",
    "load_desired",
    "load_recorded",
    "loads_desired",
    "record",
    "recorded_path",
    "recorded_vmids",
]
