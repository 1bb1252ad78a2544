"""The closed world in the plan: what the VM's next start holds that pvefix does not model.

Every input of the next-start config (keys, hostpci sub-options, args words, the vGPUs' BARs,
an args -cpu pvefix cannot read) is looked up in pvefix.closedworld's registry. An unmodelled
one (or one the registry does not know) that can change a claim is a gap: each claim it touches
becomes a "not established: INPUT" finding, the changes resting on that claim are dropped (never
written), and the findings and no-op reasons of the rules that make the claim say they leave the
input out. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from pvefix.closedworld import Claim, Input, not_established
from pvefix.closedworld.gaps import Gap, config_gaps
from pvefix.closedworld.kernel_params import classify
from pvefix.closedworld.registry import lookup
from pvefix.cmdline.tokens import Cmdline
from pvefix.observed import node_from_state
from pvefix.planner.context import Context
from pvefix.planner.model import Change, Finding, RuleResult

NAME = "closed-world"

#: The claim each rule makes (the permissions rule makes none of its own).
RULE_CLAIM: dict[str, Claim] = {
    "vm-state": "start", "q35": "machine", "pcie": "pcie", "bar-space": "bar-space",
    "host-iommu": "host-iommu", "topology": "p2p", "iommu-groups": "iommu-groups",
    "p2p": "p2p",
}


def claim_of(change: Change) -> Claim | None:
    if change.target == "guest-cmdline":
        return "guest-cmdline"
    return RULE_CLAIM.get(change.rule)


def gaps(ctx: Context) -> list[Gap]:
    """Every unmodelled input of the VM's next start that can change a claim, and every
    unmodelled token of its host's cmdline (configured and booted) for the claims beside the
    host IOMMU's (the host-iommu rule answers for that one: planner/host_world.py)."""
    return [*config_gaps(ctx.values), *_args_cpu_gaps(ctx), *_vgpu_gaps(ctx),
            *_host_cmdline_gaps(ctx)]


def _host_cmdline_gaps(ctx: Context) -> list[Gap]:
    node = node_from_state(ctx.state)
    out: dict[tuple[str, tuple[Claim, ...]], Gap] = {}
    for where, text in (("host cmdline (configured)", node.configured),
                        ("host cmdline (booted)", node.running)):
        for token in Cmdline.parse(text or "").tokens:
            for item in classify(token):
                claims = tuple(c for c in item.claims if c != "host-iommu")
                if item.status == "unmodelled" and claims:
                    out.setdefault((item.name, claims), Gap(
                        replace(item, claims=claims), f"{where}: {token.raw}"))
    return list(out.values())


def _args_cpu_gaps(ctx: Context) -> list[Gap]:
    if ctx.args_cpu is None or ctx.cpu is not None:
        return []
    item = lookup("args-word", "-cpu")
    assert item is not None
    return [Gap(item, f"args: -cpu {ctx.args_cpu} (a property pvefix does not read)")]


def _vgpu_gaps(ctx: Context) -> list[Gap]:
    item = lookup("hostpci-option", "mdev")
    if item is None or not ctx.vgpu_entries:
        return []
    vgpu = Input(item.kind, item.name, "unmodelled", ("bar-space",),
                 "a vGPU's BARs are the mediated device's own, not the physical GPU's: pvefix"
                 " does not size them", item.source)
    return [Gap(vgpu, ", ".join(f"{p.key}: {p.entry.raw}" for p in ctx.vgpu_entries))]


def _label(gap: Gap) -> str:
    return f"{gap.item.kind} {gap.item.name}"


def findings(gaps_: list[Gap], dropped: dict[Claim, list[str]]) -> list[Finding]:
    """One "not established" finding per input and claim it touches (the first place each
    input was found), naming the changes dropped for that claim."""
    out: dict[str, Finding] = {}
    for gap in gaps_:
        for claim in gap.item.claims:
            left = dropped.get(claim, [])
            holder = ("The host has" if gap.item.kind == "kernel-param"
                      else "The VM's next start holds")
            detail = (f"{holder} {gap.where!r}, which pvefix does not model"
                      f" for this claim: every verdict on {claim} here leaves it out"
                      + (f"; not planned: {', '.join(left)}." if left else "."))
            f = not_established(NAME, gap.item, claim, detail)
            out.setdefault(f.id, f)
    return list(out.values())


def enforce(ctx: Context, results: list[RuleResult]) -> tuple[list[RuleResult], list[Finding]]:
    """The rules' results with nothing resting on a claim that is not established: its changes
    dropped, its findings and no-op reasons saying which input they leave out; plus the
    findings that say so. Also drops `cpu` changes that args' -cpu overrides."""
    found = gaps(ctx)
    touched: dict[Claim, list[str]] = {}
    for gap in found:
        for claim in gap.item.claims:
            touched.setdefault(claim, []).append(_label(gap))
    dropped: dict[Claim, list[str]] = {}
    out: list[RuleResult] = []
    gone: list[Change] = []
    for r in results:
        keep = [c for c in r.changes if claim_of(c) not in touched]
        for c in r.changes:
            of = claim_of(c)
            if of is not None and of in touched:
                dropped.setdefault(of, []).append(c.id)
        keep, overridden = _cpu_overridden(ctx, keep)
        gone += overridden
        out.append(_qualified(r, keep, touched))
    out = _without_dependents(out, {i for ids in dropped.values() for i in ids}
                              | {c.id for c in gone})
    cpu = args_cpu_finding(ctx, gone)
    return out, [*findings(found, dropped), *([cpu] if cpu else [])]


def _without_dependents(results: list[RuleResult], gone: set[str]) -> list[RuleResult]:
    """Drop, too, every change that requires a dropped one (pcie=1 needs q35), transitively."""
    changes = [c for r in results for c in r.changes]
    while True:
        more = {c.id for c in changes if c.id not in gone and gone.intersection(c.requires)}
        if not more:
            break
        gone |= more
    out = []
    for r in results:
        keep = [c for c in r.changes if c.id not in gone]
        if keep == r.changes:
            out.append(r)
            continue
        noop = r.noop or ("not planned: it needs a change that is not established"
                          if not keep else None)
        out.append(r.model_copy(update={"changes": keep, "noop": noop}))
    return out


def _qualified(r: RuleResult, keep: list[Change], touched: dict[Claim, list[str]]) -> RuleResult:
    claim = RULE_CLAIM.get(r.rule)
    labels = touched.get(claim, []) if claim is not None else []
    if not labels and keep == r.changes:
        return r
    note = f"not established (leaves out {', '.join(dict.fromkeys(labels))})"
    update: dict[str, object] = {"changes": keep}
    if labels:
        update["findings"] = [f.model_copy(update={"detail": f"{note}: {f.detail}"})
                              for f in r.findings]
        if r.noop:  # its reason is a verdict that leaves the input out: not given
            update["noop"] = f"{note}: no verdict is given"
    if r.changes and not keep and not r.noop:
        update["noop"] = f"{note}: its changes are not planned" if labels else (
            "nothing left to plan")
    return r.model_copy(update=update)


def _cpu_overridden(ctx: Context, changes: list[Change]) -> tuple[list[Change], list[Change]]:
    """`cpu` changes never take effect under args' -cpu (QEMU keeps the last): not planned."""
    if ctx.args_cpu is None:
        return changes, []
    gone: list[Change] = [c for c in changes if c.target == "vm-config" and c.key == "cpu"]
    return [c for c in changes if c not in gone], gone


def args_cpu_finding(ctx: Context, gone: list[Change]) -> Finding | None:
    """Say which CPU the VM runs when args sets -cpu, and the cpu changes not planned."""
    if ctx.args_cpu is None:
        return None
    read = ctx.cpu
    detail = (f"args carries -cpu {ctx.args_cpu}; qemu-server appends args after its own"
              " options (QemuServer.pm config_to_command) and QEMU keeps the last -cpu, so the"
              f" VM runs that CPU whatever `cpu: {ctx.value('cpu') or 'kvm64'}` says"
              + (f" (read as the cpu line {read}: the BAR and P2P verdicts judge it)." if read
                 else "; pvefix cannot read it, so the verdicts on it are not established."))
    if gone:
        detail += (" Not planned, as they would never take effect: "
                   + ", ".join(f"{c.id} ({c.before} -> {c.after})" for c in gone)
                   + ". Change the -cpu in args instead, or remove it to let `cpu` decide.")
    return Finding(
        id="closed-world.args-cpu", rule=NAME, severity="warning" if gone else "info",
        title="The VM's CPU is the -cpu in args" + (": a cpu change would never take effect"
                                                    if gone else ""),
        detail=detail, evidence=[f"args: {ctx.value('args')}"])
