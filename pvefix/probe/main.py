"""Running the probe from a command line: shared by `pvefix probe` (typer) and
`python3 -m pvefix.probe` (argparse only), which needs nothing but pydantic, so it also runs
inside a guest where typer is not installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal, TextIO

from pvefix.errors import EXIT_ERROR, EXIT_OK, ParseError
from pvefix.probe.collect import ProbeOptions, collect
from pvefix.probe.compare import compare, render_comparison
from pvefix.probe.render import render_text
from pvefix.probe.report import Report

Format = Literal["text", "json"]


def execute_probe(fmt: Format, quick: bool, out: Path | None, timeout: float | None,
                  python: str | None, stdout: TextIO) -> int:
    """Probe, print the report in `fmt`, and save its JSON to `out` if given. Always 0."""
    report = collect(ProbeOptions(quick=quick, timeout=timeout, python=python))
    stdout.write(report.to_json() + "\n" if fmt == "json" else render_text(report))
    if out is not None:
        out.write_text(report.to_json() + "\n", encoding="utf-8")
    return EXIT_OK


def load_report(path: Path) -> Report:
    """A saved JSON report; ParseError names the file when it is not one."""
    try:
        return Report.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ParseError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        first = str(exc).splitlines()[0]
        raise ParseError(f"not a pvefix.probe/v1 report: {first}", source=str(path)) from None


def execute_diff(before: Path, after: Path, fmt: Format, only_changes: bool,
                 stdout: TextIO) -> int:
    """Compare two saved reports and print the differences."""
    cmp = compare(load_report(before), load_report(after))
    stdout.write(cmp.model_dump_json(indent=2) + "\n" if fmt == "json"
                 else render_comparison(cmp, only_changes=only_changes))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python3 -m pvefix.probe [--format F] [--quick] [--out FILE] [--timeout S]`,
    or `python3 -m pvefix.probe diff BEFORE AFTER`."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args[:1] == ["diff"]:
            d = argparse.ArgumentParser(prog="pvefix.probe diff")
            d.add_argument("before", type=Path)
            d.add_argument("after", type=Path)
            d.add_argument("--format", choices=("text", "json"), default="text")
            d.add_argument("--only-changes", action="store_true")
            ns = d.parse_args(args[1:])
            return execute_diff(ns.before, ns.after, ns.format, ns.only_changes, sys.stdout)
        p = argparse.ArgumentParser(prog="pvefix.probe")
        p.add_argument("--format", choices=("text", "json"), default="text")
        p.add_argument("--quick", action="store_true")
        p.add_argument("--out", type=Path)
        p.add_argument("--timeout", type=float)
        p.add_argument("--python")
        ns = p.parse_args(args)
        return execute_probe(ns.format, ns.quick, ns.out, ns.timeout, ns.python, sys.stdout)
    except ParseError as exc:
        print(f"pvefix: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
