"""Markdown for change tickets, from templates/plan.md.j2."""

from __future__ import annotations

from pathlib import Path

from pvefix.errors import PvefixError
from pvefix.planner.model import Plan
from pvefix.render.diff import unified

# templates/ at the top of the repository; pvefix/templates links to it, so a wheel carries it.
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_plan_markdown(plan: Plan, templates: Path = TEMPLATES) -> str:
    import jinja2

    if not (templates / "plan.md.j2").exists():
        raise PvefixError("template plan.md.j2 not found", source=str(templates))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=False,  # Markdown, not HTML  # noqa: S701
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = _md
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
                    f"/etc/pve/nodes/{obs.node}/qemu-server/{obs.vmid}.conf",
                )
            )
        for file in sorted(
            {c.file for c in phase.changes if c.target == "host-cmdline" and c.file}
        ):
            if file in plan.host_files_after:
                parts.append(
                    unified(plan.host_files_before.get(file, ""), plan.host_files_after[file], file)
                )
        diffs[phase.number] = "".join(parts)
    return env.get_template("plan.md.j2").render(
        plan=plan,
        diffs=diffs,
        changes_count=sum(len(p.changes) for p in plan.phases),
    )
