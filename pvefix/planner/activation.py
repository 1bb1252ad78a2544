"""Configured, not yet booted: the host's cmdline file already holds what pvefix would write
(an earlier `apply --phase 2` without `--reboot-host`, or an edit by hand), but the running
kernel was booted without it. Nothing is left to write; a host reboot activates it, so the plan
has a phase 2 that says so (a `host-boot` change) rather than "nothing to change", and `pvefix
plan` agrees with `pvefix check`, which reports the booted cmdline as drift. The parameters
compared are the passthrough-relevant ones (pvefix/cmdline/relevant.py), the same that a
desired state pins. Pure."""

from __future__ import annotations

from pvefix.cmdline.relevant import relevant_differ, relevant_parameters
from pvefix.cmdline.tokens import Cmdline
from pvefix.planner.model import HostBootChange, Risk

CHANGE_ID = "host.cmdline.activate"


def activation_change(rule: str, path: str, refresh: list[str], configured: Cmdline,
                      running: Cmdline | None) -> HostBootChange | None:
    """The activation-only change, when `configured` (the effective line of `path`) and the
    booted `running` line differ in a passthrough-relevant parameter; else None."""
    if running is None or not relevant_differ(configured, running):
        return None
    want, have = relevant_parameters(configured), relevant_parameters(running)
    boot = sorted(set(want) - set(have))
    drop = sorted(set(have) - set(want))
    what = "; ".join(part for part in (
        f"to boot: {' '.join(boot)}" if boot else "",
        f"to leave behind: {' '.join(drop)}" if drop else "") if part)
    return HostBootChange(
        id=CHANGE_ID, rule=rule, key="cmdline", before=" ".join(have), after=" ".join(want),
        file=path,
        reason=f"{path} is already right, but the running kernel was booted before it ({what}):"
        " the configuration is not in effect until the host reboots. Nothing is left to"
        " write; the reboot activates it.",
        risk=Risk(
            level="medium",
            text="A host reboot: every VM on the node stops (VMs with onboot=1 start again)."
            " pvefix writes nothing; it reboots and checks /proc/cmdline. A file edited by"
            f" hand without `{' '.join(refresh)}` is not what the boot loader holds: the"
            " check after the reboot then fails and says what is missing.",
            mitigation="--stop-others shuts the other running VMs down cleanly first and"
            " starts them again after the boot."),
        evidence=[f"configured ({path}): {' '.join(want) or '(none)'}",
                  f"booted (/proc/cmdline): {' '.join(have) or '(none)'}"],
        inverse="nothing to undo: the activation writes nothing. To go back to the old line, roll"
        f" back the apply that wrote {path} with --reboot-host (pvefix snapshots lists it)",
        disruption="host-reboot",
        effect="After the reboot the running kernel has the configured parameters.")
