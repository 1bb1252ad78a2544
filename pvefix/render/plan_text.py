"""The terminal view of a plan: findings, phases with their disruption, diffs, risks."""

from __future__ import annotations

import textwrap

from pvefix.paths import vm_config
from pvefix.planner.model import Change, Finding, Plan
from pvefix.planner.rules.p2p import PHASE as P2P_PHASE
from pvefix.render.diff import file_diffs, unified
from pvefix.render.inert import inert_text

_COLORS = {"red": "31", "yellow": "33", "green": "32", "cyan": "36", "bold": "1", "dim": "2"}
_SEVERITY = {
    "error": ("✗ error", "red"),
    "warning": ("! warning", "yellow"),
    "info": ("i info", "cyan"),
}
_RISK = {"high": "red", "medium": "yellow", "low": "green"}
_DISRUPTION = {
    "none": "no disruption",
    "guest-reboot": "guest reboot",
    "vm-restart": "VM restart (cold start)",
    "host-reboot": "HOST REBOOT",
}


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(_COLORS[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def _wrap(text: str, indent: str, width: int = 96) -> str:
    return textwrap.fill(
        text, width=width, initial_indent=indent, subsequent_indent=indent,
        break_on_hyphens=False, break_long_words=False,
    )


def _finding(f: Finding, s: _Style) -> list[str]:
    label, color = _SEVERITY[f.severity]
    out = [f"  {s(label, color, 'bold')}  {s(f.title, 'bold')}", _wrap(f.detail, "      ")]
    out += [s(f"      · {e}", "dim") for e in f.evidence]
    return out


def _value(v: str | None) -> str:
    return "(absent)" if v is None else v


def _change(c: Change, s: _Style) -> list[str]:
    head = f"  [{c.target}] {c.key}"
    if c.target == "vm-config":
        head += f": {_value(c.before)} -> {_value(c.after)}"
    elif c.file:
        head += f" in {c.file}"
    out = [s(head, "bold")]
    out.append(_wrap(f"why: {c.reason}", "      "))
    if c.effect:
        out.append(_wrap(f"effect: {c.effect}", "      "))
    out.append(
        _wrap(f"risk ({c.risk.level}): {c.risk.text}", "      ").replace(
            f"risk ({c.risk.level})", s(f"risk ({c.risk.level})", _RISK[c.risk.level], "bold"), 1
        )
    )
    if c.risk.mitigation:
        out.append(_wrap(f"mitigation: {c.risk.mitigation}", "      "))
    if c.target in ("host-cmdline", "guest-cmdline") and c.before is not None:
        out.append(f"      before: {c.before}")
        out.append(f"      after:  {c.after}")
    if c.refresh_command:
        out.append(f"      then:   {' '.join(c.refresh_command)}")
    if c.needs_root_pam:
        out.append(s(f"      needs root@pam ({_root_why([c])})", "yellow"))
    if c.commands:
        out.append("      steps:")
        out += [f"        {cmd}" for cmd in c.commands]
    out.append(_wrap(f"undo: {c.inverse}", "      "))
    out += [s(f"      · {e}", "dim") for e in c.evidence]
    return out


def _groups(changes: list[Change]) -> list[list[Change]]:
    """Consecutive changes of one rule with the same reason show as one block."""
    out: list[list[Change]] = []
    for c in changes:
        if (
            out
            and out[-1][0].rule == c.rule
            and out[-1][0].reason == c.reason
            and c.target == "vm-config"
        ):
            out[-1].append(c)
        else:
            out.append([c])
    return out


def _change_group(group: list[Change], s: _Style) -> list[str]:
    first = group[0]
    out = [s(f"  [{first.target}] {len(group)} entries ({first.rule})", "bold")]
    out += [s(f"    {c.key}: {_value(c.before)} -> {_value(c.after)}", "bold") for c in group]
    out.append(_wrap(f"why: {first.reason}", "      "))
    if first.effect:
        out.append(_wrap(f"effect: {first.effect}", "      "))
    out.append(
        _wrap(f"risk ({first.risk.level}): {first.risk.text}", "      ").replace(
            f"risk ({first.risk.level})",
            s(f"risk ({first.risk.level})", _RISK[first.risk.level], "bold"),
            1,
        )
    )
    if any(c.needs_root_pam for c in group):
        out.append(s(f"      needs root@pam ({_root_why(group)})", "yellow"))
    out.append("      undo: restore each value on the left")
    seen: list[str] = []
    for c in group:
        seen += [e for e in c.evidence if e not in seen and not e.startswith(f"{c.key}: ")]
    out += [s(f"      · {e}", "dim") for e in seen]
    return out


def _diff_lines(text: str, s: _Style) -> list[str]:
    out = []
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("+") and not line.startswith("+++"):
            out.append("    " + s(line, "green"))
        elif line.startswith("-") and not line.startswith("---"):
            out.append("    " + s(line, "red"))
        else:
            out.append("    " + line)
    return out


def render_plan_text(plan: Plan, *, color: bool = False, config_path: str | None = None) -> str:
    s = _Style(color)
    obs = plan.observed
    path = config_path or vm_config(obs.node, obs.vmid)
    lines = [
        s(f"pvefix plan for VM {obs.vmid} on node {obs.node}", "bold")
        + f"  ({obs.vm_status}; read via {obs.access.split(':')[0]}; digest {obs.vm_digest[:12]})",
        "",
    ]
    if plan.findings:
        lines.append(s("Findings", "bold"))
        for f in plan.findings:
            lines += _finding(f, s)
        lines.append("")
    vm_diff_shown = False
    for phase in plan.phases:
        lines.append(
            s(
                f"Phase {phase.number}: {_DISRUPTION[phase.disruption]}",
                "bold",
                "red" if phase.disruption == "host-reboot" else "cyan",
            )
        )
        lines.append(_wrap(phase.activation, "  "))
        lines.append("")
        for group in _groups(phase.changes):
            lines += _change(group[0], s) if len(group) == 1 else _change_group(group, s)
            lines.append("")
        if not vm_diff_shown and any(c.target == "vm-config" for c in phase.changes):
            diff = unified(plan.config_before, plan.config_after, path)
            if diff:
                lines.append(
                    "  VM config"
                    + (" ([PENDING] while the VM runs)" if obs.vm_status == "running" else "")
                    + ":"
                )
                lines += _diff_lines(diff, s)
                lines.append("")
            vm_diff_shown = True
        for label, diff in file_diffs(plan, phase):
            if diff:
                lines.append(f"  {label}:")
                lines += _diff_lines(diff, s)
                lines.append("")
    if plan.noops:
        lines.append(s("Nothing to do", "bold"))
        lines += [f"  - {n.rule}: {n.reason}" for n in plan.noops]
        lines.append("")
    n = sum(len(p.changes) for p in plan.phases)
    if n:
        lines.append(
            s(
                f"{n} change(s) in {len(plan.phases)} phase(s). Dry run: nothing was changed.",
                "bold",
            )
        )
        lines.append(f"Next: pvefix apply {obs.vmid} --phase {plan.phases[0].number}"
                     + _p2p_flags(plan, plan.phases[0].number))
    elif any(f.id == "devices.unknown-here" for f in plan.findings):
        lines.append(
            s(
                "Nothing planned, but not because all is right: some passed devices are not in"
                " the facts read (see the findings).",
                "yellow",
            )
        )
    else:
        lines.append(s("Nothing to change: this VM and host already follow every rule.", "green"))
    return inert_text("\n".join(lines) + "\n", color=color)


def _p2p_flags(plan: Plan, number: int) -> str:
    """The flags an apply of phase 3 needs to re-derive it: none when the desired state or the
    profile asks for P2P (apply reads them too), else --p2p (and the clique map) again."""
    o = plan.options
    if number != P2P_PHASE or not o.p2p or (o.p2p_from and not o.p2p_from.startswith("flag")):
        return ""
    flag_map = o.clique_map and (o.clique_map_from or "").startswith("flag")
    return " --p2p" + (" --clique-map " + ",".join(f"{k}={v}" for k, v in o.clique_map.items())
                       if flag_map or (o.clique_map and o.clique_map_from is None) else "")


def _root_why(changes: list[Change]) -> str:
    """What makes these changes root@pam's: args, a raw device, a romfile (old or new value)."""
    from pvefix.vmconfig.hostpci import hostpci_root_reasons

    reasons: list[str] = []
    for c in changes:
        if not c.needs_root_pam:
            continue
        found = ["args"] if c.key == "args" else hostpci_root_reasons(c.key, c.before, c.after)
        reasons += [r for r in found or ["raw device"] if r not in reasons]
    return ", ".join(reasons)
