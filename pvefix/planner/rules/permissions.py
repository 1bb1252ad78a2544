"""Permissions: say in the plan, not when apply fails, who may make each change.

Raw `host=` hostpci entries, `romfile` (also on a `mapping=` entry; Proxmox checks the old value
as well as the new one, so rewriting or deleting an entry that has one counts) and `args` can
be set only by root@pam with a password ticket; an API token (even root@pam!name without
privilege separation) is refused by Proxmox ("only root can set 'hostpci0' config for
non-mapped devices", "only root@pam can set 'romfile' option"). Mapped entries need
Mapping.Use on /mapping/pci/ID. `qm set` over SSH as root runs as root@pam. This rule reads the
planned changes (it runs after the others) and reports what the current access allows.
"""

from __future__ import annotations

from pvefix.planner.context import Context
from pvefix.planner.model import Change, Finding, RuleResult

NAME = "permissions"


def check(ctx: Context, changes: list[Change]) -> RuleResult:
    access = ctx.state.access
    root_only = [c for c in changes if c.needs_root_pam]
    if not root_only:
        return RuleResult(rule=NAME, noop="no planned change needs root@pam")
    if access.method != "api" or access.is_root_pam_ticket:
        return RuleResult(
            rule=NAME,
            noop=f"{len(root_only)} change(s) need root@pam; "
            + (
                "the connection is root@pam with a ticket"
                if access.method == "api"
                else f"the {access.method} source applies them as root"
            ),
        )
    paths = ["a root@pam password ticket (--user root@pam with a password)"]
    if access.ssh:
        paths.append("`qm set` as root over the SSH connection pvefix already has")
    return RuleResult(
        rule=NAME,
        findings=[
            Finding(
                id="permissions.root-pam", rule=NAME, severity="warning",
                title="These changes need root@pam, not an API token",
                detail=f"{', '.join(c.key for c in root_only)} pass raw host devices, carry a"
                " romfile (in the old or the new value, also on a mapped entry) or set args:"
                " Proxmox lets only root@pam with a password ticket write them (qemu-server"
                " API2/Qemu.pm check_hostpci_perm), and refuses"
                f" {access.user}"
                f" ({access.auth}). apply will use {' or '.join(paths)}.",
                evidence=[f"{c.key}: {c.before} -> {c.after}" for c in root_only])])


def rule(ctx: Context) -> RuleResult:
    """Placeholder in the rule list: the planner calls `check` with the planned changes."""
    return RuleResult(rule=NAME, noop="evaluated after the other rules")
