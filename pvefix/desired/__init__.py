"""Desired state: what must hold for VMs and their hosts (`pvefix.desired/v1`, TOML).

    from pvefix.desired import desired_from_state, load_desired, record
    path = record(state_dir, state)          # apply: record the state it reached
    desired = load_desired("plans/desired.toml")
"""

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
