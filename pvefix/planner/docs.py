"""Build docs/why-each-change.md from the rules' docstrings (the docs quote the code).

    python -m pvefix.planner.docs docs/why-each-change.md
A test checks that the committed page is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pvefix.closedworld.docs import render as closed_world_tables
from pvefix.planner import bar_verdict, host_world, mmio
from pvefix.planner.rules import RULES

# One section per rule module, in the order the planner runs them.
MODULES = [sys.modules[rule.__module__] for rule in RULES]

HEADER = """# Why each change: the planner's rules

Generated from the rules' docstrings (`python -m pvefix.planner.docs docs/why-each-change.md`);
each section is one module in `pvefix/planner/rules/`. A rule returns changes (each with its
reason, risk, evidence and inverse), findings, or says why it has nothing to do.
"""


def render() -> str:
    parts = [HEADER]
    for module in MODULES:
        doc = (module.__doc__ or "").strip()
        title, _, body = doc.partition("\n")
        name = getattr(module, "NAME", module.__name__.rsplit(".", 1)[-1])
        parts.append(f"\n## `{name}`: {title.strip()}\n\n{body.strip()}\n")
    for module in FACT_MODULES:
        doc = (module.__doc__ or "").strip()
        title, _, body = doc.partition("\n")
        parts.append(f"\n## Facts: {title.strip()}\n\n{body.strip()}\n")
    parts.append(closed_world_tables())
    return "".join(parts)


# Modules of facts the rules share, each with its sources.
FACT_MODULES = [mmio, bar_verdict, host_world]


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
