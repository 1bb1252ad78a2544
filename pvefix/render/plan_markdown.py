"""Markdown for change tickets, from templates/plan.md.j2."""

from __future__ import annotations

import html
import re
from pathlib import Path

from pvefix.errors import PvefixError
from pvefix.paths import vm_config
from pvefix.planner.model import Change, Plan
from pvefix.render.diff import file_diffs, unified
from pvefix.render.inert import inert_text

# templates/ at the top of the repository; pvefix/templates links to it, so a wheel carries it.
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


DEFAULT_SHUTDOWN_S = 120  # apply's --shutdown-timeout default
DEFAULT_REBOOT_S = 900  # apply's --reboot-timeout default

DISRUPTION_WORDS = {
    "none": "no downtime",
    "guest-reboot": "the guest OS reboots",
    "vm-restart": "the VM stops and starts",
    "host-reboot": "the host reboots",
}
GROUPS = {
    "vm-config": "VM config",
    "host-cmdline": "Host kernel command line",
    "host-boot": "Host kernel command line: configured, not yet booted (nothing to write)",
    "guest-cmdline": "Guest kernel command line",
    "manual": "Manual steps (pvefix does not do these)",
}


# Host text (values, descriptions, `args`, file texts) reaches the ticket only through these
# three filters: prose with its HTML escaped, code spans and fences longer than any backtick
# run in the text (so no text can close them), and, for the whole document, inert_text.
_TICKS = re.compile("`+")
_FENCE_RUN = re.compile("`{3,}|~{3,}")


def _md(text: object) -> str:
    """Prose (a table cell or a sentence): no raw HTML, no line break, no cell break, and no
    run of three backticks or tildes (escaped one by one): prose that starts a line (a phase's
    activation, a list item) could open a fence with one, which would swallow the document up
    to the next fence's end, and what follows that, a diff's host text, would be read as
    Markdown and HTML. pvefix's own `code` in prose stays code."""
    text = html.escape(str(text), quote=False).replace("|", "\\|")
    text = text.replace("\r", " ").replace("\n", " ")
    return _FENCE_RUN.sub(lambda m: "".join("\\" + c for c in m.group(0)), text)


def _longest_ticks(text: str) -> int:
    return max((len(run) for run in _TICKS.findall(text)), default=0)


def _code(text: object, cell: bool = True) -> str:
    """A code span the text cannot close: delimited by more backticks than its longest run
    (with a space inside where it starts or ends with one); in a table cell `|` escaped."""
    value = str(text).replace("\r", " ").replace("\n", " ")
    if cell:
        value = value.replace("|", "\\|")
    if not value.strip(" "):
        return '`""`' if not value else "`" + value + "`"
    ticks = "`" * (_longest_ticks(value) + 1)
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def _fence(text: object, info: str = "", indent: str = "") -> str:
    """A fenced block the text cannot close: more backticks than any run in it (at least 3)."""
    body = str(text)
    if body and not body.endswith("\n"):
        body += "\n"
    ticks = "`" * max(3, _longest_ticks(body) + 1)
    lines = [f"{indent}{ticks}{info}", *(indent + line for line in body.splitlines()),
             f"{indent}{ticks}"]
    return "\n".join(lines)


def _is_template(plan: Plan) -> bool:
    from pvefix.closedworld.vm_states import is_template
    from pvefix.vmconfig import VMConfig

    return is_template(VMConfig.parse(plan.config_before).main.get("template"))


def impact(plan: Plan) -> list[str]:
    """The ticket's summary: what changes, which VMs stop and for how long, host reboot."""
    obs = plan.observed
    changes = [c for p in plan.phases for c in p.changes]
    lines = [f"{len(changes)} change(s) in {len(plan.phases)} phase(s), each applied on its own "
             f"(`pvefix apply {obs.vmid} --phase N`), a snapshot first."]
    if not changes:
        return ["Nothing to change: no downtime."]
    by = {d: [p.number for p in plan.phases if p.disruption == d]
          for d in ("vm-restart", "guest-reboot", "host-reboot")}
    if by["vm-restart"]:
        phases = ", ".join(map(str, by["vm-restart"]))
        if _is_template(plan):
            lines.append(f"VM {obs.vmid} is a template, which Proxmox never starts: phase"
                         f" {phases} changes its config, which reaches only the clones made"
                         " from it afterwards; no VM stops.")
        elif obs.vm_status == "running":
            lines.append(
                f"VM {obs.vmid} stops (phase {phases}): a clean ACPI shutdown (up to "
                f"{DEFAULT_SHUTDOWN_S} s by default, `--shutdown-timeout`) and a start, when "
                f"applied with `--restart`; the guest's own shutdown and boot time adds to it "
                "(not known to pvefix: measure it once).")
        else:
            lines.append(f"VM {obs.vmid} is stopped: phase {phases} takes effect at its next "
                         "start; no running VM stops.")
    if by["guest-reboot"]:
        lines.append(f"The guest OS of VM {obs.vmid} reboots (phase "
                     f"{', '.join(map(str, by['guest-reboot']))}).")
    if by["host-reboot"]:
        lines.append(
            f"Host reboot: YES (phase {', '.join(map(str, by['host-reboot']))}). Every VM on "
            f"node {obs.node} stops while it reboots; `pvefix apply --reboot-host` lists them, "
            "refuses while another one runs, and with `--stop-others` shuts them down cleanly "
            "and starts again those that ran. pvefix waits up to "
            f"{DEFAULT_REBOOT_S} s (`--reboot-timeout`) for the host to come back; the real "
            "time depends on the hardware (firmware POST of a multi-GPU host can take minutes).")
    else:
        lines.append("Host reboot: no.")
    top = max((c.risk.level for c in changes), key=("low", "medium", "high").index)
    lines.append(f"Highest risk: {top}.")
    if any(c.needs_root_pam for c in changes):
        lines.append("Needs root@pam with a password (a ticket): raw host devices, `romfile`"
                     " (old or new value) or `args`.")
    manual = [c for c in changes if c.target == "manual"]
    if manual:
        lines.append(f"{len(manual)} manual step(s) listed below: pvefix does not do them.")
    return lines


def explained(changes: list[Change]) -> list[tuple[str, str, list[str]]]:
    """Why each change is made and its risk, said once: changes with the same reason, effect
    and risk (eight
    `pcie=1` edits) share one entry, `(keys, why, commands)`, in the order they come."""
    out: list[tuple[list[str], str, list[str]]] = []
    for c in changes:
        why = (c.reason + (f" *Effect:* {c.effect}" if c.effect else "")
               + f" *Risk ({c.risk.level}):* {c.risk.text}"
               + (f" *Mitigation:* {c.risk.mitigation}" if c.risk.mitigation else ""))
        same = next((e for e in out if e[1] == why and not e[2] and not c.commands), None)
        if same is not None:
            same[0].append(c.key)
        else:
            out.append(([c.key], why, list(c.commands)))
    return [(", ".join(keys), why, commands) for keys, why, commands in out]


def groups(plan: Plan) -> dict[int, list[tuple[str, list[Change]]]]:
    """Each phase's changes grouped by what they change (VM config, host cmdline, ...)."""
    out: dict[int, list[tuple[str, list[Change]]]] = {}
    for phase in plan.phases:
        grouped: list[tuple[str, list[Change]]] = []
        for target, title in GROUPS.items():
            members = [c for c in phase.changes if c.target == target]
            if members:
                files = sorted({c.file for c in members if c.file})
                grouped.append((title + (f" ({', '.join(files)})" if files else ""), members))
        out[phase.number] = grouped
    return out


def render_plan_markdown(plan: Plan, templates: Path = TEMPLATES,
                         saved: tuple[str, str] | None = None) -> str:
    """The change ticket; `saved`: the plan file it comes with and that file's SHA-256, which
    the ticket names (what was reviewed is what `pvefix apply FILE` applies)."""
    import jinja2

    if not (templates / "plan.md.j2").exists():
        raise PvefixError("template plan.md.j2 not found", source=str(templates))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=False,  # Markdown, not HTML  # noqa: S701
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined)
    env.filters["md"] = _md
    env.filters["code"] = _code
    env.filters["fence"] = _fence
    env.filters["explained"] = explained
    diffs: dict[int, str] = {}
    obs = plan.observed
    for phase in plan.phases:
        parts = []
        if any(c.target == "vm-config" for c in phase.changes) and not any(
            any(c.target == "vm-config" for c in p.changes)
            for p in plan.phases
            if p.number < phase.number
        ):
            parts.append(
                unified(
                    plan.config_before,
                    plan.config_after,
                    vm_config(obs.node, obs.vmid)))
        parts += [diff for _, diff in file_diffs(plan, phase)]
        diffs[phase.number] = "".join(parts)
    return inert_text(env.get_template("plan.md.j2").render(
        plan=plan, diffs=diffs, impact=impact(plan), groups=groups(plan),
        disruption_words=DISRUPTION_WORDS, saved=saved, apply_line=_apply_line(plan, saved)))


def _apply_line(plan: Plan, saved: tuple[str, str] | None) -> str | None:
    """`pvefix apply FILE --phase N ...` for the plan's first phase, from the saved file."""
    if saved is None or not plan.has_changes:
        return None
    import shlex

    from pvefix.hints import apply_words

    first = next(p.number for p in plan.phases if p.changes)
    return shlex.join(["pvefix", *apply_words(plan, first, saved[0])])
