"""The pure planner: plan(HostState) -> Plan. No I/O, no clock, no globals."""

from pvefix.planner.model import Change, Finding, Phase, Plan
from pvefix.planner.plan import plan

__all__ = ["Change", "Finding", "Phase", "Plan", "plan"]
