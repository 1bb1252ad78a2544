"""The collect script: templates/collect.sh.j2 rendered with the VMIDs asked for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pvefix import __version__
from pvefix.errors import PvefixError
from pvefix.facts.node import collect_copies

# templates/ at the top of the repository; pvefix/templates links to it, so a wheel carries it.
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
TEMPLATE = "collect.sh.j2"


def render_script(vmids: Sequence[int] = (), templates: Path = TEMPLATES) -> str:
    """The POSIX sh script; with `vmids`, only those VMs' configs and run states are taken."""
    import jinja2

    for vmid in vmids:
        # The VMIDs land inside a shell string: only plain numbers may go there.
        if not 100 <= vmid <= 999_999_999:
            raise PvefixError(f"--vmid {vmid}: a VMID is 100..999999999")
    if not (templates / TEMPLATE).exists():
        raise PvefixError(f"template {TEMPLATE} not found", source=str(templates))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=False,  # a shell script, not HTML  # noqa: S701
        keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    ordered = sorted(set(vmids))
    return env.get_template(TEMPLATE).render(
        vmids=[str(v) for v in ordered], version=__version__, files=collect_copies())
