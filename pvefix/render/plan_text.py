"""The terminal view of a plan: a one-screen summary (phases, disruption, risks, what to run
next), then the detail: findings, phases with their changes, diffs, risks.

Wrapped to the terminal's width with hanging indents, never inside a word; coloured only where
the stream shows colour (pvefix/console/terminal.py: NO_COLOR, TERM=dumb, --color). Diff lines
and commands are never wrapped: they are copied as they are.
"""

from __future__ import annotations

from pvefix.console.terminal import Terminal
from pvefix.hints import Context, next_line
from pvefix.paths import vm_config
from pvefix.planner.model import Change, Finding, Plan
from pvefix.render.diff import file_diffs, unified
from pvefix.render.inert import inert_text

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
    """Styles and wraps through the stream's Terminal."""

    def __init__(self, term: Terminal, verbose: bool = False) -> None:
        self.term = term
        self.verbose = verbose
        self.shown: set[str] = set()  # evidence already printed (each fact once)

    def __call__(self, text: str, *styles: str) -> str:
        return self.term.style(text, *styles)

    def wrap(self, text: str, indent: str = "      ", *styles: str) -> str:
        return "\n".join(self(line, *styles) for line in self.term.wrap(text, indent).split("\n"))

    def ids(self, ids: list[str]) -> list[str]:
        """With --verbose, the ids (of a finding, of changes) that `apply`, `check` and the
        plan file name them by."""
        if not self.verbose:
            return []
        return [self.wrap(f"id: {', '.join(ids)}", "      ", "dim")]

    def evidence(self, items: list[str], *, detail: bool = False) -> list[str]:
        """Evidence lines, each printed once in the whole plan (a change that rests on a
        finding's facts does not repeat them). `detail`: a change's, shown with --verbose."""
        if detail and not self.verbose:
            return []
        fresh = [e for e in items if e not in self.shown]
        self.shown.update(fresh)
        return [self.wrap(f"· {e}", "      ", "dim") for e in fresh]


def _finding(f: Finding, s: _Style) -> list[str]:
    """A finding: its title, and its detail and evidence; an info's only with --verbose."""
    label, color = _SEVERITY[f.severity]
    head = s.term.wrap(f"{label}  {f.title}", "  ", hang=len(label) + 2)
    head = head.replace(label, s(label, color, "bold"), 1)
    if f.severity == "info" and not s.verbose:
        return [head]
    detail = s.term.wrap(f.detail, "      ", hang=0)  # prose: no label to hang under
    return [head, detail, *s.evidence(list(f.evidence)), *s.ids([f.id])]


def _value(v: str | None) -> str:
    return "(absent)" if v is None else v


def _change(c: Change, s: _Style) -> list[str]:
    head = f"[{c.target}] {c.key}"
    if c.target == "vm-config":
        head += f": {_value(c.before)} -> {_value(c.after)}"
    elif c.file:
        head += f" in {c.file}"
    out = [s.wrap(head, "  ", "bold")]
    out += _reason_lines(c, s)
    if c.risk.mitigation:
        out.append(s.wrap(f"mitigation: {c.risk.mitigation}"))
    if c.target in ("host-cmdline", "guest-cmdline") and c.before is not None:
        out.append(s.wrap(f"before: {c.before}"))
        out.append(s.wrap(f"after:  {c.after}"))
    elif c.target == "host-boot":
        out.append(s.wrap(f"booted:     {c.before or '(none of them)'}"))
        out.append(s.wrap(f"configured: {c.after or '(none of them)'}"))
    if c.refresh_command:
        out.append(f"      then:   {' '.join(c.refresh_command)}")
    if c.needs_root_pam:
        out.append(s(f"      needs root@pam ({_root_why([c])})", "yellow"))
    if c.commands:
        out.append("      steps:")
        out += [s.term.step(cmd) for cmd in c.commands]
    out.append(s.wrap(f"undo: {c.inverse}"))
    return out + s.evidence(list(c.evidence), detail=True) + s.ids([c.id])


def _reason_lines(c: Change, s: _Style) -> list[str]:
    """why, effect (with --verbose) and risk of a change (or of a group of alike changes)."""
    out = [s.wrap(f"why: {c.reason}")]
    if c.effect and s.verbose:
        out.append(s.wrap(f"effect: {c.effect}"))
    label = f"risk ({c.risk.level})"
    out.append(s.wrap(f"{label}: {c.risk.text}").replace(
        label, s(label, _RISK[c.risk.level], "bold"), 1))
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
    # Entries with the same before and after share one line (eight `pcie=1` edits: one).
    alike: dict[tuple[str, str], list[str]] = {}
    for c in group:
        alike.setdefault((_value(c.before), _value(c.after)), []).append(c.key)
    out += [s.wrap(f"{', '.join(keys)}: {before} -> {after}", "    ", "bold")
            for (before, after), keys in alike.items()]
    out += _reason_lines(first, s)
    if any(c.needs_root_pam for c in group):
        out.append(s(f"      needs root@pam ({_root_why(group)})", "yellow"))
    out.append("      undo: restore each value on the left")
    seen: list[str] = []
    for c in group:
        seen += [e for e in c.evidence if e not in seen and not e.startswith(f"{c.key}: ")]
    return out + s.evidence(seen, detail=True) + s.ids([c.id for c in group])


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


def render_plan_text(plan: Plan, *, term: Terminal | None = None, color: bool = False,
                     config_path: str | None = None, context: Context | None = None,
                     verbose: bool = False) -> str:
    """The summary (one screen), then the detail. `term` sets width and colour (default: 80
    columns, colour as `color` says); `context`: the options the `Next:` line carries (those
    the plan was made with, pvefix/hints.py); `verbose`: also each change's evidence and the
    diffs. Each evidence line is printed once either way."""
    if term is None:
        term = Terminal(color_system="standard" if color else None)
    s = _Style(term, verbose)
    obs = plan.observed
    lines = [
        s.wrap(f"Plan for VM {obs.vmid} on node {obs.node} ({obs.vm_status}; read via "
               f"{obs.access.split(':')[0]}; digest {obs.vm_digest[:12]})", "", "bold"),
        "",
        *_summary(plan, s),
        ""]
    if plan.findings:
        lines.append(s("Findings", "bold"))
        for f in plan.findings:
            lines += _finding(f, s)
        lines.append("")
    lines += _phases(plan, s, config_path or vm_config(obs.node, obs.vmid))
    if plan.noops:
        lines.append(s("Nothing to do", "bold"))
        lines += [s.wrap(f"- {n.rule}: {n.reason}", "  ") for n in plan.noops]
        lines.append("")
    return inert_text("\n".join(lines + _closing(plan, s, context)) + "\n", color=term.color)


def _summary(plan: Plan, s: _Style) -> list[str]:
    """One screen: each phase with its disruption and changes, the findings by severity and
    the impact (who stops, host reboot, highest risk). What to run next ends the plan."""
    from pvefix.render.plan_markdown import impact

    lines = [s("Summary", "bold")]
    for phase in plan.phases:
        keys = ", ".join(dict.fromkeys(c.key for c in phase.changes))
        label = f"Phase {phase.number}: {_DISRUPTION[phase.disruption]}"
        lines.append(s.wrap(f"{label}; {len(phase.changes)} change(s): {keys}", "  ").replace(
            label, s(label, "bold", "red" if phase.disruption == "host-reboot" else "cyan"), 1))
    counts = {sev: sum(1 for f in plan.findings if f.severity == sev) for sev in _SEVERITY}
    if plan.findings:
        said = ", ".join(f"{n} {sev}(s)" for sev, n in counts.items() if n)
        lines.append(s.wrap(f"Findings: {said} (below)", "  "))
    if plan.has_changes:
        lines += [s.wrap(f"- {line}", "  ") for line in impact(plan)]
    return lines


def _phases(plan: Plan, s: _Style, path: str) -> list[str]:
    """Each phase: its activation, its changes, and (verbose) the diffs it makes."""
    obs = plan.observed
    lines: list[str] = []
    vm_diff_shown = False
    for phase in plan.phases:
        lines.append(s(f"Phase {phase.number}: {_DISRUPTION[phase.disruption]}", "bold",
                       "red" if phase.disruption == "host-reboot" else "cyan"))
        lines += [s.wrap(phase.activation, "  "), ""]
        for group in _groups(phase.changes):
            lines += _change(group[0], s) if len(group) == 1 else _change_group(group, s)
            lines.append("")
        if not s.verbose:
            continue
        diffs = list(file_diffs(plan, phase))
        if not vm_diff_shown and any(c.target == "vm-config" for c in phase.changes):
            pending = " ([PENDING] while the VM runs)" if obs.vm_status == "running" else ""
            diffs.insert(0, (f"VM config{pending}",
                             unified(plan.config_before, plan.config_after, path)))
            vm_diff_shown = True
        for label, diff in diffs:
            if diff:
                lines += [f"  {label}:", *_diff_lines(diff, s), ""]
    return lines


def _closing(plan: Plan, s: _Style, context: Context | None) -> list[str]:
    """The last lines: how many changes and what to run next (once, here, where the admin's
    eyes are when the plan has scrolled by), or why nothing is planned."""
    obs = plan.observed
    n = sum(len(p.changes) for p in plan.phases)
    if n:
        more = [] if s.verbose else [
            s.wrap("Effects, evidence, diffs and the info findings: add --verbose.", "", "dim")]
        nxt = next_line(plan, 0, context or Context(), live=not obs.access.startswith("bundle"))
        return [
            s(f"{n} change(s) in {len(plan.phases)} phase(s). Dry run: nothing was changed.",
              "bold"),
            *more,
            s.term.command_line(*nxt.split(": ", 1))]
    if any(f.id == "devices.unknown-here" for f in plan.findings):
        return [s.wrap("Nothing planned, but not because all is right: some passed devices are"
                       " not in the facts read (see the findings).", "", "yellow")]
    if any(f.id.startswith("not-established.") for f in plan.findings):
        return [s.wrap("Nothing planned, but not because all is right: some inputs pvefix does"
                       " not model leave claims not established (see the findings).", "",
                       "yellow")]
    return [s.wrap("Nothing to change: this VM and host already follow every rule.", "",
                   "green")]


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
