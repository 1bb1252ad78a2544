"""The plan: what the planner decided, as a frozen value that renders to `pvefix.plan/v1` JSON."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PLAN_SCHEMA = "pvefix.plan/v1"

Target = Literal["vm-config", "host-cmdline", "guest-cmdline", "manual"]
Disruption = Literal["none", "guest-reboot", "vm-restart", "host-reboot"]
Severity = Literal["info", "warning", "error"]
RiskLevel = Literal["low", "medium", "high"]

# How much each disruption interrupts; a phase's disruption activates every lesser one too
# (a VM cold start reboots the guest), except that a host reboot is never merged with VM work.
DISRUPTION_ORDER: dict[str, int] = {"none": 0, "guest-reboot": 1, "vm-restart": 2, "host-reboot": 3}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Risk(_Frozen):
    level: RiskLevel
    text: str
    mitigation: str | None = None


class Change(_Frozen):
    """One change: where, what before and after, why, the risk, the evidence and the way back.

    For vm-config changes `before`/`after` are the values as Proxmox stores them (None when
    absent). For host-cmdline and guest-cmdline changes they are the whole command line, and
    `file` names the file that holds it.
    """

    id: str
    rule: str
    target: Target
    key: str
    before: str | None
    after: str | None
    reason: str
    risk: Risk
    evidence: list[str] = Field(default_factory=list)
    inverse: str = Field(description="how to undo it, in words an admin can act on")
    disruption: Disruption
    requires: list[str] = Field(default_factory=list, description="ids of changes to apply first")
    file: str | None = None
    refresh_command: list[str] | None = None
    needs_root_pam: bool = False
    commands: list[str] = Field(default_factory=list, description="manual steps, exact commands")
    effect: str | None = Field(default=None, description="what it will and will not do")


class Finding(_Frozen):
    """Something the admin should know, with or without a change behind it."""

    id: str
    rule: str
    severity: Severity
    title: str
    detail: str
    evidence: list[str] = Field(default_factory=list)


class Noop(_Frozen):
    """A rule that had nothing to do, and why."""

    rule: str
    reason: str


class RuleResult(_Frozen):
    rule: str
    changes: list[Change] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    noop: str | None = None
    files_after: dict[str, str] = Field(
        default_factory=dict, description="host or guest file path -> text after the changes"
    )


class Phase(_Frozen):
    number: int
    disruption: Disruption
    activation: str = Field(description="what activates the phase and how")
    changes: list[Change]


class PlanOptions(_Frozen):
    """What the admin asked the planner for beyond the defaults (kept in the plan file, so a
    re-plan at apply time asks the same)."""

    p2p: bool = Field(default=False, description="plan the P2P clique phase (phase 3)")
    clique_map: dict[str, int] = Field(
        default_factory=dict, description="hostpciN -> clique, given by the admin (--clique-map)"
    )
    p2p_from: str | None = Field(
        default=None, description="where `p2p` came from: the flag (--p2p, --no-p2p), the VM's"
        " desired state (its file) or a connection profile (its name); None: not said")
    clique_map_from: str | None = Field(
        default=None, description="where `clique_map` came from, said the same way")


class Observed(_Frozen):
    """What the plan relied on: apply refuses when any of it has moved."""

    node: str
    vmid: int
    vm_digest: str
    config_source: str
    vm_status: str
    running_machine: str | None
    files: dict[str, str | None] = Field(description="path -> sha256 (None: absent)")
    access: str


class Plan(_Frozen):
    schema_: str = Field(default=PLAN_SCHEMA, alias="schema")
    pvefix_version: str
    target: dict[str, str | int]
    observed: Observed
    findings: list[Finding]
    phases: list[Phase]
    noops: list[Noop]
    config_before: str = Field(description="the VM config text the plan starts from")
    config_after: str = Field(description="the VM config text once every phase is applied")
    host_files_before: dict[str, str] = Field(default_factory=dict)
    host_files_after: dict[str, str] = Field(default_factory=dict)
    options: PlanOptions = Field(default_factory=PlanOptions)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @property
    def has_changes(self) -> bool:
        return any(p.changes for p in self.phases)

    def phase(self, number: int) -> Phase | None:
        return next((p for p in self.phases if p.number == number), None)

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)
