"""The VM's state before any change: locks, pending changes, config problems, start errors.

pvefix refuses to plan on top of surprises: a locked VM cannot be changed (Proxmox answers
`VM is locked`); existing [PENDING] changes are shown (the plan is made from the config the
VM starts with next, so they count and pvefix's writes keep them); config lines Proxmox would
drop are reported; a machine that runs something else than its config says (pending chipset
change) is reported. Two things that decide whether
and how the VM starts again are said before anything is written: a device passed by two
hostpci entries (PCI.pm choose_hostpci_devices takes the entries in index order, a mapping its
first device no earlier entry took, and refuses the start with "device ... assigned more than
once"), and an HA-managed VM, whose shutdown and start Proxmox hands to the HA manager
(API2/Qemu.pm: `ha-manager crm-command stop`, `ha-manager set --state started`), which acts
later and may start it on another node; `apply --restart` refuses it until its HA state is
`ignored`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pvefix.errors import PvefixError
from pvefix.planner import mmio
from pvefix.planner.context import Context, Passed
from pvefix.planner.model import Finding, RuleResult
from pvefix.vmconfig.igd import IgdEntry, legacy_igd_error
from pvefix.vmconfig.machine_version import version_error
from pvefix.vmconfig.propstring import PropertyString

NAME = "vm-state"


def _template(ctx: Context) -> Finding:
    vmid = ctx.state.vm.vmid
    return Finding(
        id="vm.template", rule=NAME, severity="warning",
        title=f"VM {vmid} is a template: Proxmox never starts it",
        detail="qemu-server refuses to start a template (QemuServer.pm vm_start: \"you can't"
        " start a vm if it's a template\") and to snapshot or roll it back (AbstractConfig.pm)."
        " A change to its config is written at once and takes effect only in clones made from"
        " it afterwards; linked clones made before keep their own configs, so each of them"
        " needs its own plan. apply refuses --restart, --start and --pve-snapshot here.",
        evidence=[f"template: {ctx.value('template')}"])


MAX_NUMA = 8  # qemu-server Memory.pm $MAX_NUMA


def memory_refusal(values: Mapping[str, str]) -> str | None:
    """Proxmox's own refusal of the VM's memory layout, in its words (qemu-server Memory.pm
    config, which stops at the first): hugepages without numa, and with numa: 1 each numaN
    node's memory, a policy for its hostnodes, hostnodes for hugepages, and nodes whose
    memory does not add up to `memory`. None when it has none of them (what the host holds,
    its hugepage pool and NUMA nodes, is not read: closedworld config_keys)."""
    numa = values.get("numa", "").strip() == "1"
    huge = bool(values.get("hugepages", "").strip())
    if huge and not numa:
        return "numa needs to be enabled to use hugepages"
    if not numa or "memory" in values.get("hotplug", "").split(","):
        return None  # memory hotplug with NUMA nodes has its own rules, unmodelled
    total = 0
    for i in range(MAX_NUMA):
        raw = values.get(f"numa{i}")
        if not raw:
            continue
        try:
            node = PropertyString.parse(raw)
        except PvefixError:
            continue
        if not node.get("memory"):
            return f"missing NUMA node{i} memory value"
        if node.get("hostnodes") is not None and not node.get("policy"):
            return f"you need to define a policy for hostnode {node.get('hostnodes')}"
        if node.get("hostnodes") is None and huge:
            return "numa hostnodes need to be defined to use hugepages"
        total += int(node.get("memory") or 0)
    static = mmio.ram_bytes(values.get("memory")) >> 20
    if total and total != static:
        return "total memory for NUMA nodes must be equal to vm static memory"
    return None


def _memory_finding(ctx: Context) -> Finding | None:
    refusal = memory_refusal(ctx.values)
    if refusal is None:
        return None
    keys = [k for k in sorted(ctx.values) if k in ("hugepages", "numa", "memory")
            or (k.rstrip("0123456789") == "numa" and k != "numa")]
    return Finding(
        id="vm.memory.start-error", rule=NAME, severity="error",
        title="Proxmox refuses to start this VM: its memory layout",
        detail=f"qemu-server refuses the start (src/PVE/QemuServer/Memory.pm config): {refusal}."
        " Every change planned here takes effect only once the VM starts; fix the memory"
        " settings first.",
        evidence=[f"{k}: {ctx.values[k]}" for k in keys])


def _machine_refused(ctx: Context) -> Finding | None:
    """config_to_command refuses a machine newer than the installed QEMU, or a `+pveN` this
    qemu-server does not know (Machine.pm; pvefix.vmconfig.machine_version). Judged only where
    the node's QEMU version was read."""
    qemu = ctx.state.node.qemu_version
    if not qemu:
        return None
    refusal = version_error(ctx.value("machine"), qemu, ctx.value("ostype"), ctx.value("meta"),
                            ctx.state.vm.node or ctx.state.node.name or "")
    if refusal is None:
        return None
    return Finding(
        id="vm.machine.start-error", rule=NAME, severity="error",
        title="Proxmox refuses to start this VM: its machine version",
        detail=f"qemu-server refuses the start (src/PVE/QemuServer.pm config_to_command,"
        f" Machine.pm): {refusal}. Every change planned here takes effect only once the VM"
        " starts: upgrade the node, or set a machine version it runs.",
        evidence=[f"machine: {ctx.value('machine')}", f"QEMU on {ctx.state.node.name}: {qemu}"])


def rule(ctx: Context) -> RuleResult:
    findings = [f for f in (_memory_finding(ctx), _machine_refused(ctx), _locked(ctx))
                if f is not None]
    if ctx.is_template:
        findings.append(_template(ctx))
    findings += [*_pending_and_ha(ctx), *_entry_findings(ctx), *_assigned_twice(ctx),
                 *_set_unknown_device(ctx),
                 *_machine_not_running(ctx)]
    if not findings:
        return RuleResult(rule=NAME, noop="no lock, no pending changes, config clean")
    return RuleResult(rule=NAME, findings=findings)


def _locked(ctx: Context) -> Finding | None:
    vm = ctx.state.vm
    return None if not vm.lock else Finding(
        id="vm.locked", rule=NAME, severity="error", title=f"VM {vm.vmid} is locked ({vm.lock})",
        detail="Proxmox refuses config changes while the lock is held; apply will refuse"
        " until it is released (wait for the backup/operation, or `qm unlock`).")


def _pending_and_ha(ctx: Context) -> list[Finding]:
    vm = ctx.state.vm
    findings: list[Finding] = []
    if ctx.next.has_pending:
        findings.append(Finding(
            id="vm.pending", rule=NAME, severity="warning",
            title="The VM already has pending changes",
            detail="pvefix plans from the config the VM will start with, these staged"
            " changes included, and its writes keep them (a change that would revive a"
            " staged delete or drop a staged value says so in its risk). They take effect"
            " at the VM's next cold start; review them.",
            evidence=[s.describe() for s in ctx.next.staged()]))
    if vm.ha_state and vm.ha_state != "ignored":
        findings.append(Finding(
            id="vm.ha-managed", rule=NAME, severity="warning",
            title=f"VM {vm.vmid} is managed by HA (state {vm.ha_state})",
            detail="Proxmox hands a shutdown or a start of an HA-managed VM to the HA manager"
            " (qemu-server API2/Qemu.pm: `ha-manager crm-command stop`, `ha-manager set"
            " --state started`), which acts later on its own and, when a start fails, may"
            " retry it or start the VM on another node (max_restart, max_relocate). `pvefix"
            " apply --restart` refuses such a VM. To restart it with pvefix: `ha-manager set"
            f" vm:{vm.vmid} --state ignored` (HA then leaves it alone), apply with"
            f" --restart, then `ha-manager set vm:{vm.vmid} --state started`. Or apply"
            " without --restart and restart it through HA yourself."))
    return findings


def _entry_findings(ctx: Context) -> list[Finding]:
    """The config's odd lines, and the hostpci entries that would fail the VM start."""
    findings = [Finding(
        id=f"vm.config.line{problem.line}", rule=NAME, severity="warning",
        title="Config line Proxmox would warn about",
        detail=problem.message + " (pvefix keeps the line untouched)",
        evidence=[f"{ctx.state.vm.vmid}.conf:{problem.line}"]) for problem in ctx.cfg.problems]
    legacy = False
    for p in ctx.passed:
        igd = _legacy_igd(ctx, p, legacy)
        legacy = legacy or p.entry.legacy_igd
        findings += [Finding(
            id=f"vm.{p.key}.start-error", rule=NAME, severity="error",
            title=f"{p.key} would fail the VM start", detail=err,
            evidence=[f"{p.key}: {p.entry.raw}"])
            for err in p.entry.start_errors() + [e for e in (p.problem, igd) if e]]
        if (p.entry.pcie and ctx.machine.family != "q35"
                and not any(q.entry.legacy_igd for q in ctx.passed)):
            findings.append(Finding(
                id=f"vm.{p.key}.pcie-without-q35", rule=NAME, severity="error",
                title=f"{p.key} has pcie=1 but the machine is not q35",
                detail="The next VM start fails with 'q35 machine model is not enabled'.",
                evidence=[f"{p.key}: {p.entry.raw}", f"machine: {ctx.machine.type}"]))
    return findings


def _legacy_igd(ctx: Context, p: Passed, earlier: bool) -> str | None:
    """PCI.pm parse_hostpci_devices' refusal of a legacy-igd entry (pvefix.vmconfig.igd), from
    the functions read on the node; not judged where they were not read."""
    if not p.entry.legacy_igd or p.problem or not p.devices:
        return None
    alternatives = p.alternatives
    most = max((len(a) for a in alternatives), default=0)
    first = next((a[0] for a in alternatives if a), "")
    return legacy_igd_error(IgdEntry(p.entry, most, len(alternatives), first),
                            ctx.value("vga"), ctx.machine.family == "q35", earlier)


_SET_ID = re.compile(r"^device\.((?:hostpci\d+(?:\.\d+)?)|(?:net\d+))\.[^=]+=")


def device_ids(ctx: Context) -> set[str] | None:
    """The QEMU ids of the VM's passed devices and NICs at its next start: `hostpciN`, or
    `hostpciN.J` for each function of an entry of several (PCI.pm print_hostpci_devices), and
    `netN` (print_netdevice_full); None where an entry's functions were not read or its
    mapping's alternatives differ in count."""
    ids = {k for k in ctx.values if re.fullmatch(r"net\d+", k)}
    for p in ctx.passed:
        counts = {len(a) for a in p.alternatives}
        if p.problem or not p.devices or len(counts) != 1:
            return None
        n = 1 if p.is_vgpu else counts.pop()
        ids.update([p.key] if n == 1 else [f"{p.key}.{j}" for j in range(n)])
    return ids


def _set_unknown_device(ctx: Context) -> list[Finding]:
    """args' `-set device.ID.PROP=V` with an ID no device has: QEMU exits before the VM runs
    (vl.c qemu_set_option: 'there is no device "ID" defined'). Judged for hostpci and net ids."""
    from pvefix.closedworld.args_words import options
    from pvefix.vmconfig.args import qemu_words

    opts = options(qemu_words(ctx.value("args")))
    sets = [m.group(1) for o in opts if o.name == "-set" and (m := _SET_ID.match(o.value or ""))]
    # an args -device may define any id (unmodelled): then no claim
    ids = device_ids(ctx) if sets and not any(o.name == "-device" for o in opts) else None
    missing = sorted({i for i in sets if ids is not None and i not in ids})
    return [Finding(
        id=f"vm.args.set-{i}", rule=NAME, severity="error",
        title=f"args sets a property of {i}, a device this VM does not have",
        detail=f'QEMU refuses to start: there is no device "{i}" defined (vl.c qemu_set_option;'
        " qemu-server appends args after the devices it builds). "
        + ("A hostpci entry of several functions is hostpciN.0, .1, ... (PCI.pm): -set cannot"
           " reach hostpciN; remove the -set or pass the GPU function alone." if "." in i or
           any(x.startswith(i + ".") for x in ids or ()) else "Remove the -set: its device"
           " is missing (deleted, or staged for deletion)."),
        evidence=[f"args: {ctx.value('args')}", "device ids: " + ", ".join(sorted(ids or ()))])
        for i in missing]


def _machine_not_running(ctx: Context) -> list[Finding]:
    vm = ctx.state.vm
    if vm.status != "running" or not vm.running_machine:
        return []
    from pvefix.vmconfig import Machine

    try:
        running_family = Machine.parse(vm.running_machine.split(",")[0]).family
    except PvefixError:  # an odd running-machine string is only reported
        return []
    if running_family == ctx.machine.family:
        return []
    return [Finding(
        id="vm.machine-not-running", rule=NAME, severity="info",
        title="The running machine differs from the configured one",
        detail=f"Running {vm.running_machine}; configured {ctx.machine.type}: the"
        " change waits for a cold start.")]


def _assigned_twice(ctx: Context) -> list[Finding]:
    """qemu-server PCI.pm choose_hostpci_devices, as `qm showcmd` runs it: entries in index
    order; a single alternative is taken as is and dies "device 'X' assigned more than once"
    when an earlier entry took X; a mapping takes its first alternative no earlier entry took."""
    used: dict[str, str] = {}
    findings: list[Finding] = []
    for p in sorted(ctx.passed, key=lambda q: int(q.key[len("hostpci"):])):
        alternatives = p.alternatives
        if not alternatives:
            continue
        if len(alternatives) == 1:
            pick = alternatives[0]
            twice = [a for a in pick if a in used]
            if twice:
                first = used[twice[0]]
                findings.append(Finding(
                    id=f"vm.{p.key}.assigned-twice", rule=NAME, severity="error",
                    title=f"{p.key} passes {twice[0]}, which {first} already passes",
                    detail=f"Proxmox picks the devices of the hostpci entries in index order"
                    " (qemu-server PCI.pm choose_hostpci_devices) and refuses the start:"
                    f" device '{twice[0]}' assigned more than once. A mapping entry takes"
                    " the first of its devices that no earlier entry took, so an address"
                    " given after it can collide with its pick. Remove the duplicate entry,"
                    " or give the address before the mapping entry. pvefix does not choose"
                    " which one goes.",
                    evidence=[f"{first}: {ctx.value(first)}", f"{p.key}: {p.entry.raw}"]))
        else:
            pick = next((alt for alt in alternatives if not any(a in used for a in alt)), ())
        for addr in pick:
            used.setdefault(addr, p.key)
    return findings
