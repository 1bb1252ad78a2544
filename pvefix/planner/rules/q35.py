"""q35: move a VM that passes PCIe GPUs from the i440fx chipset to q35.

Why: on i440fx every passed device sits on a conventional PCI bus. The guest sees no PCIe link,
no PCIe capabilities and no root ports, so GPU drivers fall back to slower paths and `pcie=1`
(which needs q35) cannot be used. q35 gives each `hostpciN` with `pcie=1` its own emulated PCIe
root port (`ich9-pcie-port-(N+1)`).

How: the machine value is mapped keeping its version and sub-options (`pc` -> `q35`,
`pc-i440fx-9.2+pve1` -> `pc-q35-9.2+pve1`), as the Proxmox GUI does. It is refused when a
device uses `legacy-igd=1`: Proxmox refuses to start such a VM on q35.
Risks: Windows re-enumerates devices (the NIC may come up as new, losing its network settings);
Linux guests created on QEMU >= 6.1 may rename NICs (`ens18` -> `enp6s18`); IDE disks move to
the AHCI controller. Undo: set the old machine value back (restart again).
"""

from __future__ import annotations

from pvefix.errors import PvefixError
from pvefix.planner.context import Context
from pvefix.planner.model import Finding, Risk, RuleResult, VmConfigChange
from pvefix.vmconfig import Machine

NAME = "q35"
CHANGE_ID = "vm.machine.q35"


def _runs_q35(ctx: Context) -> bool:
    """The VM runs q35 now (a pending change or delete of `machine` is what leaves q35): the
    guest already has q35's devices and NIC names."""
    vm = ctx.state.vm
    if vm.status != "running" or not vm.running_machine:
        return False
    try:
        return Machine.parse(vm.running_machine.split(",")[0]).family == "q35"
    except PvefixError:
        return False


def _risk(ctx: Context) -> Risk:
    if _runs_q35(ctx):
        return Risk(level="low", text=(
            f"The VM runs q35 now (running-machine {ctx.state.vm.running_machine}); the i440fx"
            " its next start would get comes from a change made after that start (staged in"
            " [PENDING], or the file edited), so this keeps the guest on the chipset it runs:"
            " no device re-enumeration and no NIC renames (pinning the i440fx names now would"
            " rename its NICs)."))
    notes: list[str] = []
    mitigation: list[str] = []
    level = "medium"
    if ctx.is_windows:
        level = "high"
        notes.append(
            f"Windows guest ({ctx.ostype}): the chipset change re-enumerates devices; Windows may"
            " treat the NIC as a new adapter and lose its static IP and network settings, and may"
            " ask to re-activate."
        )
        mitigation.append(
            "Note the guest's IP settings first (ipconfig /all) and have console access ready."
        )
        if ctx.machine.version:
            notes.append(
                f"The machine version stays pinned at {ctx.machine.version}"
                f"{ctx.machine.pve_revision or ''}, so nothing else in the virtual hardware"
                " changes."
            )
    else:
        nets = {k: v for k, v in ctx.values.items() if k.startswith("net")}
        who = (
            "Linux guest"
            if ctx.is_linux
            else f"Guest OS type '{ctx.ostype}' (pvefix does not know the OS); if it is Linux"
        )
        notes.append(
            f"{who}: network interfaces created on QEMU >= 6.1 may be renamed on q35"
            " (for example ens18 -> enp6s18), and a configuration that names the old interface"
            " comes up without network."
        )
        macs = [v.split(",")[0].split("=")[-1] for v in nets.values() if "=" in v.split(",")[0]]
        if macs:
            mitigation.append(
                "Before the restart, pin the name in the guest with a systemd .link file per NIC,"
                f" e.g. /etc/systemd/network/10-pvefix-net0.link: [Match] MACAddress={macs[0]}"
                " [Link] Name=ens18 (then update-initramfs -u); or use console access to fix it."
            )
    ide_disks = [
        k
        for k, v in ctx.values.items()
        if k.startswith("ide") and "media=cdrom" not in v and v.split(",")[0] != "none"
    ]
    if ide_disks:
        notes.append(
            f"IDE disks ({', '.join(ide_disks)}) move to q35's AHCI controller: Linux handles it;"
            " Windows needs its AHCI driver enabled before the switch."
        )
    return Risk(
        level="high" if level == "high" else "medium", text=" ".join(notes),
        mitigation=" ".join(mitigation) or None)


def rule(ctx: Context) -> RuleResult:
    if ctx.machine_error:
        return RuleResult(rule=NAME, noop=f"the machine value is invalid: {ctx.machine_error}")
    if ctx.machine.family == "q35":
        return RuleResult(rule=NAME, noop=f"already q35 ({ctx.machine.type})")
    if ctx.machine.family != "i440fx":
        return RuleResult(rule=NAME, noop=f"machine family {ctx.machine.family} is not x86")
    if not ctx.gpu_entries:
        return RuleResult(rule=NAME, noop=ctx.no_gpu_reason(": i440fx is left alone"))
    igd = [p.key for p in ctx.passed if p.entry.legacy_igd]
    if igd:
        return RuleResult(
            rule=NAME, noop="legacy-igd is in use; q35 is not planned",
            findings=[
                Finding(
                    id="q35.legacy-igd", rule=NAME, severity="warning",
                    title="q35 refused: legacy IGD passthrough",
                    detail=(
                        f"{', '.join(igd)} use legacy-igd=1, which Proxmox refuses to start on q35"
                        " ('legacy IGD assignment is not compatible with q35'). This VM stays on"
                        " i440fx, so pcie=1 cannot be used either."
                    ),
                    evidence=[f"{k}: {ctx.value(k)}" for k in igd])])
    before = ctx.value("machine")
    after = ctx.machine.to_q35()
    evidence = [
        f"machine: {before}" if before else "no machine line: Proxmox runs i440fx (pc)",
        f"{len(ctx.gpu_entries)} GPU passthrough entries: "
        + ", ".join(p.key for p in ctx.gpu_entries)]
    if ctx.state.vm.running_machine:
        evidence.append(f"running-machine: {ctx.state.vm.running_machine}")
    change = VmConfigChange(
        id=CHANGE_ID, rule=NAME, key="machine", before=before, after=after,
        reason=(
            "Passed-through GPUs sit on a conventional PCI bus on i440fx; q35 gives them PCIe root"
            " ports, and pcie=1 needs q35."
        ),
        risk=_risk(ctx), evidence=evidence,
        inverse=f"machine: {before}" if before else "delete the machine key (back to pc)",
        disruption="vm-restart",
        effect="Takes effect at the next cold start (stop + start; a reboot inside the guest keeps"
        " the old QEMU process). Alone it does not enable P2P; it is the ground for pcie=1.")
    return RuleResult(rule=NAME, changes=[change])
