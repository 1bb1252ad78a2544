"""plan(state) -> Plan: run every rule, then group the changes into phases. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pvefix import __version__
from pvefix.planner import closed
from pvefix.planner.context import Context, build_context
from pvefix.planner.model import (
    DISRUPTION_ORDER,
    Change,
    Disruption,
    Finding,
    Noop,
    Observed,
    Phase,
    Plan,
    PlanOptions,
    RuleResult,
    root_flags,
)
from pvefix.planner.rules import RULES, p2p, permissions
from pvefix.planner.staged import keep_staged
from pvefix.state import HostState

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


# Stable phase numbers: 1 the VM side, 2 the host, 3 the P2P clique (only with --p2p), so
# `apply --phase N` means the same thing before and after an earlier phase is in effect.
PHASE_SLOTS = {"vm": 1, "host": 2, "p2p": p2p.PHASE}


def _activation_class(c: Change) -> str:
    # A VM cold start also reboots the guest and activates immediate changes, so those share
    # one phase; a host reboot is its own phase (never merged); the P2P clique is its own phase,
    # proven on its own and reverted alone.
    if c.rule == p2p.NAME:
        return "p2p"
    return "host" if c.disruption == "host-reboot" else "vm"


ACTIVATE_ONLY = (
    "`pvefix apply {vmid} --phase {number} --reboot-host`: configured, not yet booted: nothing"
    " to write; reboot the host (every VM on the node stops; VMs with onboot=1 start again),"
    " then /proc/cmdline is checked."
)


def _access_text(state: HostState) -> str:
    """How the target was reached, as `Observed.access` records it: METHOD:USER:AUTH."""
    return f"{state.access.method}:{state.access.user or '-'}:{state.access.auth}"


def _activation_text(disruption: Disruption, ctx: Context, number: int,
                     changes: list[Change]) -> str:
    text = _activation_base(disruption, ctx, number)
    # The flags this connection needs to write root@pam's keys (as the Next line carries them).
    root = root_flags(changes, _access_text(ctx.state), ctx.state.access.ssh)
    if root:
        end = text.index("`", 1)  # the end of the command's code span, which opens the text
        text = f"{text[:end]} {' '.join(root)}{text[end:]}"
    if number != p2p.PHASE:
        return text
    flags = "--p2p" + (
        " --clique-map " + ",".join(f"{k}={v}" for k, v in sorted(ctx.options.clique_map.items()))
        if ctx.options.clique_map
        else ""
    )
    return (
        text.replace(f"--phase {number}", f"--phase {number} {flags}", 1)
        + f" Prove it with `--verify` (a way into the guest) and `--auto-rollback`: {p2p.PROOF}"
    )


def _activation_base(disruption: Disruption, ctx: Context, number: int) -> str:
    vmid = ctx.state.vm.vmid
    if disruption == "host-reboot":
        return (
            f"`pvefix apply {vmid} --phase {number} --reboot-host`: refresh the boot loader, then"
            " reboot the host (every VM on the node stops; VMs with onboot=1 start again)."
        )
    if disruption == "vm-restart" and ctx.is_template:
        return (
            f"`pvefix apply {vmid} --phase {number}`: VM {vmid} is a template, which Proxmox never"
            " starts: the config changes are written at once and reach only the clones made"
            " from it afterwards (linked clones made before keep their own configs)."
        )
    if disruption == "vm-restart":
        if ctx.running:
            return (
                f"`pvefix apply {vmid} --phase {number} --restart`: the changes land in [PENDING]"
                f" of VM {vmid} and take effect at its next cold start (shutdown + start; a"
                " reboot inside the guest keeps the same QEMU process and applies nothing)."
            )
        return (
            f"`pvefix apply {vmid} --phase {number}`: VM {vmid} is stopped, so the config changes"
            " apply at once and take effect when it starts."
        )
    if disruption == "guest-reboot":
        return f"`pvefix apply {vmid} --phase {number}`, then reboot the guest."
    return f"`pvefix apply {vmid} --phase {number}`: takes effect at once."


def _phases(ctx: Context, changes: list[Change]) -> list[Phase]:
    classes: dict[str, list[Change]] = {}
    for c in changes:
        classes.setdefault(_activation_class(c), []).append(c)
    ordered = [classes[k] for k in sorted(classes, key=lambda k: PHASE_SLOTS[k])]
    slots = sorted(classes, key=lambda k: PHASE_SLOTS[k])
    # Honour prerequisites: a change may not sit in an earlier phase than what it requires.
    where = {c.id: i for i, group in enumerate(ordered) for c in group}
    moved = True
    while moved:
        moved = False
        for i, group in enumerate(ordered):
            for c in list(group):
                need = max((where[r] for r in c.requires if r in where), default=i)
                if need > i:
                    group.remove(c)
                    ordered[need].append(c)
                    where[c.id] = need
                    moved = True
    phases: list[Phase] = []
    for slot, group in zip(slots, ordered, strict=True):
        if not group:
            continue
        group = _topological(group)
        disruption = max((c.disruption for c in group), key=lambda d: DISRUPTION_ORDER[d])
        if disruption in ("none", "guest-reboot") and any(
            c.target == "vm-config" for c in group
        ):
            disruption = "vm-restart"
        number = PHASE_SLOTS[slot]
        phases.append(
            Phase(
                number=number, disruption=disruption,
                activation=ACTIVATE_ONLY.format(number=number, vmid=ctx.state.vm.vmid)
                if all(c.target == "host-boot" for c in group)
                else _activation_text(disruption, ctx, number, group),
                changes=group))
    return phases


def _topological(group: list[Change]) -> list[Change]:
    """Order within a phase: what a change requires comes first (machine before pcie=1)."""
    ids = {c.id for c in group}
    done: list[Change] = []
    placed: set[str] = set()
    pending = list(group)
    while pending:
        for c in pending:
            if all(r in placed or r not in ids for r in c.requires):
                done.append(c)
                placed.add(c.id)
                pending.remove(c)
                break
        else:  # a cycle cannot come from the rules; keep the order rather than loop forever
            done.extend(pending)
            break
    return done


def config_after(config_text: str, source: str, running: bool, phases: Sequence[Phase]) -> str:
    """The VM config text once every phase's VM-config changes are written, phase by phase:
    a plan's `config_after`, and what a plan file's must be (`flow/planfile.py` re-derives
    it, so `show` and the ticket can never draw another diff than apply writes). A running
    VM's changes are staged in [PENDING], as Proxmox does."""
    from pvefix.vmconfig import VMConfig
    from pvefix.vmconfig.nextstart import stage

    cfg = VMConfig.parse(config_text, source)
    for c in (c for p in phases for c in p.changes):
        if c.target != "vm-config":
            continue
        if running:
            stage(cfg, c.key, c.after)
        elif c.after is None:
            cfg.main.delete(c.key)
        else:
            cfg.main.set(c.key, c.after)
    return cfg.render()


def plan(state: HostState, options: PlanOptions | None = None) -> Plan:
    """The plan for one VM on one host. The same state and options always give the same plan."""
    options = options or PlanOptions()
    ctx = build_context(state, options)
    results: list[RuleResult] = [r(ctx) for r in RULES if r not in (permissions.rule, p2p.rule)]
    changes = [c for r in results for c in r.changes]
    results.append(p2p.phase(ctx, changes))
    changes += results[-1].changes
    results, unestablished = closed.enforce(ctx, results)
    changes = [c for r in results for c in r.changes]
    results.append(permissions.check(ctx, changes))
    changes = keep_staged(ctx, changes)
    said = {f.id for f in unestablished}  # the closed world's word on a claim wins a rule's
    findings: list[Finding] = sorted(
        [*(f for r in results for f in r.findings if f.id not in said), *unestablished],
        key=lambda f: SEVERITY_ORDER[f.severity])
    noops = [Noop(rule=r.rule, reason=r.noop) for r in results if r.noop and not r.changes]
    files_after: dict[str, str] = {}
    guest_after: dict[str, str] = {}
    for r in results:
        files_after.update(r.files_after)
        guest_after.update(r.guest_files_after)
    guest_read = state.guest.files if state.guest is not None else {}
    vm = state.vm
    phases = _phases(ctx, changes)
    return Plan(
        pvefix_version=__version__, target={"node": vm.node, "vmid": vm.vmid},
        observed=Observed(
            node=vm.node, vmid=vm.vmid, vm_digest=vm.digest, config_source=vm.config_source,
            vm_status=vm.status, running_machine=vm.running_machine,
            files={p: f.sha256 for p, f in sorted(state.files.items())}, access=_access_text(state),
            ssh=state.access.ssh),
        findings=findings, phases=phases, noops=noops, config_before=vm.config_text,
        config_after=config_after(vm.config_text, ctx.cfg.source, ctx.running, phases),
        host_files_before={p: state.file(p).text or "" for p in files_after},
        host_files_after=files_after,
        guest_files_before={p: guest_read[p].text or "" for p in guest_after},
        guest_files_after=guest_after, options=options)
