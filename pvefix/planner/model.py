"""The plan: what the planner decided, as a frozen value that renders to `pvefix.plan/v1` JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pvefix.findings import Finding as Finding  # re-exported: defined below the planner
from pvefix.findings import Severity as Severity
from pvefix.vmconfig.args import MAX_CLIQUE

PLAN_SCHEMA = "pvefix.plan/v1"
MAX_PHASE = 3  # 1 the VM, 2 the host, 3 the P2P clique (planner/plan.py PHASE_SLOTS)

# The numbers a plan file holds, bounded as pvefix and Proxmox bound them: a plan file is
# anyone's bytes, and apply refuses one out of range before anything is read or written.
Vmid = Annotated[int, Field(strict=True, ge=100, le=999_999_999,
                            description="a Proxmox VMID: 100..999999999")]
PhaseNumber = Annotated[int, Field(strict=True, ge=1, le=MAX_PHASE)]
HOSTPCI_KEY_PATTERN = r"^hostpci(1[0-5]|[0-9])$"  # vmconfig/hostpci.py MAX_HOSTPCI = 16
HostpciKey = Annotated[str, Field(pattern=HOSTPCI_KEY_PATTERN,
                                  description="hostpci0..hostpci15")]
Clique = Annotated[int, Field(strict=True, ge=0, le=MAX_CLIQUE)]

#: What `pvefix plan --format json` prints, for one VM or several: {"schema": PLANS_SCHEMA,
#: "plans": [pvefix.plan/v1, ...]} in the order the VMIDs were named.
PLANS_SCHEMA = "pvefix.plans/v1"

Target = Literal["vm-config", "host-cmdline", "host-boot", "guest-cmdline", "manual"]
Disruption = Literal["none", "guest-reboot", "vm-restart", "host-reboot"]
RiskLevel = Literal["low", "medium", "high"]

# The change kinds a host reboot activates: a host cmdline pvefix writes, one configured and not
# yet booted.
HOST_BOOT_TARGETS = frozenset({"host-cmdline", "host-boot"})

# How much each disruption interrupts; a phase's disruption activates every lesser one too
# (a VM cold start reboots the guest), except that a host reboot is never merged with VM work.
DISRUPTION_ORDER: dict[str, int] = {"none": 0, "guest-reboot": 1, "vm-restart": 2, "host-reboot": 3}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Risk(_Frozen):
    level: RiskLevel
    text: str
    mitigation: str | None = None


class _ChangeBase(_Frozen):
    """What every change has: where, what before and after, why, the risk, the evidence and
    the way back. The kinds below narrow `target` (the discriminator) and their own fields.
    Never validated itself: its schema is not built (the kinds build their own)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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


class VmConfigChange(_ChangeBase):
    """One key of the VM config; `before`/`after` are the values as Proxmox stores them (None
    when absent)."""

    model_config = ConfigDict(defer_build=False)

    target: Literal["vm-config"] = "vm-config"
    file: None = None
    refresh_command: None = None

    @model_validator(mode="before")
    @classmethod
    def _hostpci_root_only(cls, data: Any) -> Any:
        """A hostpciN change whose old or new value is root@pam's (raw host=, romfile) needs
        root@pam whichever rule made it: Proxmox checks both values (check_hostpci_perm)."""
        if not isinstance(data, dict) or data.get("needs_root_pam"):
            return data
        key = data.get("key")
        if not isinstance(key, str) or not key.startswith("hostpci"):
            return data
        from pvefix.vmconfig.hostpci import HOSTPCI_KEY, hostpci_change_needs_root

        if HOSTPCI_KEY.match(key) and hostpci_change_needs_root(
            key, data.get("before"), data.get("after")
        ):
            return {**data, "needs_root_pam": True}
        return data


class HostCmdlineChange(_ChangeBase):
    """The host kernel's command line: `before`/`after` are the whole line, `file` holds it
    (its whole text before and after is in the plan's host_files_before/after), and
    `refresh_command` makes the boot loader read it."""

    model_config = ConfigDict(defer_build=False)

    target: Literal["host-cmdline"] = "host-cmdline"
    file: str


class HostBootChange(_ChangeBase):
    """A host kernel cmdline that is configured but not yet booted: nothing to write, a host
    reboot activates it. `before` holds the passthrough-relevant parameters the running kernel
    was booted with, `after` those configured in `file` (pvefix/cmdline/relevant.py)."""

    model_config = ConfigDict(defer_build=False)

    target: Literal["host-boot"] = "host-boot"
    file: str
    refresh_command: None = None


class GuestCmdlineChange(_ChangeBase):
    """The guest kernel's command line, changed through a way into the guest: `before`/`after`
    are the whole line, `file` holds it (its whole text before and after is in the plan's
    guest_files_before/after), and `refresh_command` runs in the guest."""

    model_config = ConfigDict(defer_build=False)

    target: Literal["guest-cmdline"] = "guest-cmdline"
    file: str


class ManualChange(_ChangeBase):
    """What pvefix does not do itself: `commands` are the exact steps for the admin."""

    model_config = ConfigDict(defer_build=False)

    target: Literal["manual"] = "manual"


Change = Annotated[
    VmConfigChange | HostCmdlineChange | HostBootChange | GuestCmdlineChange | ManualChange,
    Field(discriminator="target"),
]
"""One change of a plan, one model per kind (`target`): dispatchers end in `assert_never`, so
mypy names a kind nobody handles."""


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
        default_factory=dict, description="host file path -> text after the changes"
    )
    guest_files_after: dict[str, str] = Field(
        default_factory=dict, description="guest file path -> text after the changes"
    )


class Phase(_Frozen):
    number: PhaseNumber
    disruption: Disruption
    activation: str = Field(description="what activates the phase and how")
    changes: list[Change]

    @property
    def reboot_activates(self) -> bool:
        """A host reboot activates this phase: it writes the host cmdline (host-cmdline), or
        one is configured and not yet booted (host-boot)."""
        return any(c.target in HOST_BOOT_TARGETS for c in self.changes)

    @property
    def activation_only(self) -> bool:
        """Nothing to write: the phase only activates what is configured (a host reboot)."""
        return bool(self.changes) and all(c.target == "host-boot" for c in self.changes)


class PlanOptions(_Frozen):
    """What the admin asked the planner for beyond the defaults (kept in the plan file, so a
    re-plan at apply time asks the same)."""

    p2p: bool = Field(default=False, description="plan the P2P clique phase (phase 3)")
    clique_map: dict[HostpciKey, Clique] = Field(
        default_factory=dict, description="hostpciN -> clique, given by the admin (--clique-map)"
    )
    p2p_from: str | None = Field(
        default=None, description="where `p2p` came from: the flag (--p2p, --no-p2p), the VM's"
        " desired state (its file) or a connection profile (its name); None: not said")
    clique_map_from: str | None = Field(
        default=None, description="where `clique_map` came from, said the same way")


def root_flags(changes: Sequence[Change], access: str, ssh: bool) -> list[str]:
    """What `pvefix apply` of these changes needs when some are root@pam's password ticket's
    alone (raw host devices, `args`, `romfile`) and `access` ("METHOD:USER:AUTH", as
    `Observed.access` says it) is not that: `--qm-set` where pvefix reaches the node over SSH
    (it runs `qm set` as root there), else `--auth password` (as root@pam). None otherwise."""
    if not any(c.needs_root_pam and c.target == "vm-config" for c in changes):
        return []
    method, _, rest = access.partition(":")
    user, _, auth = rest.rpartition(":")
    if method != "api" or (auth == "ticket" and user == "root@pam"):
        return []
    if ssh:
        return ["--qm-set"]
    return ["--auth", "password", *([] if user.partition("!")[0] == "root@pam"
                                     else ["--user", "root@pam"])]


class Observed(_Frozen):
    """What the plan relied on: apply refuses when any of it has moved."""

    node: str
    vmid: Vmid
    vm_digest: str
    config_source: str
    vm_status: str
    running_machine: str | None
    files: dict[str, str | None] = Field(description="path -> sha256 (None: absent)")
    access: str
    ssh: bool = Field(default=False, description="an SSH session as root to the node was there"
                      " (apply can run `qm set` over it: the hints name --qm-set)")


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
    guest_files_before: dict[str, str] = Field(
        default_factory=dict, description="guest file path -> its text as read (guest changes)")
    guest_files_after: dict[str, str] = Field(
        default_factory=dict, description="guest file path -> its text once the changes apply")
    options: PlanOptions = Field(default_factory=PlanOptions)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @property
    def has_changes(self) -> bool:
        return any(p.changes for p in self.phases)

    @property
    def unsettled(self) -> bool:
        """Whether some claim rests on what pvefix did not read or does not model: passed
        devices not in the facts read, or an input that leaves a claim not established. Then
        "nothing planned" is not "all is right"."""
        return any(f.id == "devices.unknown-here" or f.id.startswith("not-established.")
                   for f in self.findings)

    def phase(self, number: int) -> Phase | None:
        return next((p for p in self.phases if p.number == number), None)

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)


def plans_document(plans: list[Plan]) -> dict[str, object]:
    """The `pvefix.plans/v1` document `plan --format json` prints: the same shape for one VM
    as for several (each plan is a pvefix.plan/v1 plan file, as `--out` saves it)."""
    return {"schema": PLANS_SCHEMA, "plans": [p.to_json_dict() for p in plans]}
