"""Render a check report: text with a diff per drifted property, JSON, GitHub annotations."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic_core import PydanticSerializationError

from pvefix.check.compare import NO_DESIRED
from pvefix.check.report import CheckItem, CheckReport, exit_code_of
from pvefix.render.inert import inert_json, inert_text

if TYPE_CHECKING:
    from pvefix.console.terminal import Terminal
    from pvefix.desired.parse import LineIndex

# Subjects without a problem get one line each up to this many; beyond it only a count.
LIST_OK_UP_TO = 20
_MARK = {"ok": "ok", "drift": "DRIFT", "unknown": "UNKNOWN", "skipped": "skipped"}


def _diff(item: CheckItem, fill: Callable[[str], str]) -> list[str]:
    """An item: its property, the values whole (`- have`, `+ want`), the prose `fill`ed."""
    lines = [f"  {_MARK[item.status]:<8}{item.property}"]
    if item.when:
        lines.append(fill(f"          ({item.when})"))
    if item.status == "drift":
        lines.append(f"          - {item.actual}")
        lines.append(f"          + {item.expected}")
    elif item.status == "unknown" and item.expected:
        lines.append(f"          wanted: {item.expected}")
    if item.detail and item.status != "ok":
        lines.extend(fill(f"          {line}") for line in item.detail.splitlines())
    return lines


def render_text(report: CheckReport, *, verbose: bool = False,
                term: Terminal | None = None) -> str:
    """The terminal view: a headline, then each VM or node with a problem and its diffs;
    with `term`, its prose filled to the terminal's width (values stay whole)."""
    fill: Callable[[str], str] = (lambda line: line) if term is None else term.fit
    counts = report.counts()
    lines = [
        f"pvefix check ({report.source}): {counts['drift']} drifted, {counts['unknown']} "
        f"unknown, {counts['ok']} ok, {counts['skipped']} skipped"
    ]
    quiet_ok: list[str] = []
    skipped: list[str] = []
    undesired: list[str] = []
    for subject, items in report.subjects():
        where = f" (node {items[0].node})" if items[0].target == "vm" else ""
        if [i.property for i in items] == [NO_DESIRED] and items[0].status == "unknown":
            undesired.append(f"{subject}{where}")
            continue
        bad = [i for i in items if i.status in ("drift", "unknown")]
        if not bad and not verbose:
            if all(i.status == "skipped" for i in items):
                skipped.append(f"{subject}{where}: skipped ({items[0].detail})")
            else:
                n_ok = sum(1 for i in items if i.status == "ok")
                noun = "property" if n_ok == 1 else "properties"
                quiet_ok.append(f"{subject}{where}: no drift ({n_ok} {noun})")
            continue
        lines.append("")
        lines.append(f"{subject}{where}")
        for item in items if verbose else bad:
            lines.extend(_diff(item, fill))
    if quiet_ok:
        lines.append("")
        if len(quiet_ok) <= LIST_OK_UP_TO:
            lines.extend(quiet_ok)
        else:
            lines.append(f"{len(quiet_ok)} VMs/nodes without drift")
    if skipped:
        if len(skipped) <= LIST_OK_UP_TO:
            lines.extend(skipped)
        else:
            lines.append(f"{len(skipped)} VMs skipped: no desired state")
    if undesired:
        shown = ", ".join(undesired[:LIST_OK_UP_TO])
        extra = len(undesired) - LIST_OK_UP_TO
        more = f" and {extra} more" if extra > 0 else ""
        lines.append("")
        lines.append(fill(f"UNKNOWN: {len(undesired)} VM(s) without a desired state: {shown}"
                          f"{more}"))
        lines.append(fill("  write one (pvefix desired VMID -o FILE, or --record), or check "
                          "only the VMs that have one (--only-desired)"))
    for note in report.notes:
        lines.append(fill(f"note: {note}"))
    verdict = {0: "no drift", 1: "check incomplete (see UNKNOWN)", 2: "drift found"}
    code = exit_code_of(counts)
    lines.append("")
    lines.append(f"result: {verdict[code]} (exit {code})")
    return inert_text("\n".join(lines) + "\n")


# A report's items are most of its bytes: each is one line, written by pydantic-core's own
# serializer (~1.5 us an item; 6,000 items in ~9 ms against ~45 ms through model_dump and the
# json module). Its output is compact and raw UTF-8; an item it cannot write as ASCII (text
# from a config: non-ASCII, DEL, or bytes that are not UTF-8, kept as surrogates) goes through
# the json module, so the report stays printable ASCII, the same bytes the json module would
# write with these separators, whatever the locale.
_ITEM_JSON = CheckItem.__pydantic_serializer__
_ONE_LINE = json.JSONEncoder(separators=(",", ":"))


def item_json(item: CheckItem) -> str:
    """One item as one line of compact, ASCII-only JSON."""
    try:
        data = _ITEM_JSON.to_json(item)
    except PydanticSerializationError:  # lone surrogates: not UTF-8
        data = b""
    if data and data.isascii() and b"\x7f" not in data:  # DEL: the json module escapes it
        return data.decode("ascii")
    return _ONE_LINE.encode(item.model_dump())


def render_json(report: CheckReport) -> str:
    """pvefix.check/v1, indented, with one item per line (a 10,000-VM report stays greppable
    and diffable line by line; see `item_json`)."""
    fields = []
    for key, value in report.json_fields().items():
        if key == "notes":  # the items come before the notes
            lines = ",\n".join(f"    {item_json(item)}" for item in report.items)
            fields.append(f'  "items": [\n{lines}\n  ]' if lines else '  "items": []')
        text = json.dumps(value, indent=2).replace("\n", "\n  ")
        fields.append(f"  {json.dumps(key)}: {text}")
    return inert_json("{\n" + ",\n".join(fields) + "\n}\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def rule_location(item: CheckItem) -> tuple[str | int, ...]:
    """Where in a desired-state file the rule behind `item` is written (for `locate`)."""
    if item.target == "node":
        return ("nodes", item.node, "cmdline")
    base: tuple[str | int, ...] = ("vms", str(item.vmid))
    prop = item.property.split(" ", 1)[0]
    if prop.startswith("hostpci"):
        return (*base, "hostpci", *prop.split(".", 1))
    if item.where == "rehearsal":  # the VM's own table: no rule of its own
        return base
    if prop in ("machine", "closed", "guest_cmdline"):
        return (*base, prop)
    return (*base, "keys", prop)


def _file_and_line(item: CheckItem, files: Callable[[CheckItem], Path | None] | None,
                   indexes: dict[Path, LineIndex | None]) -> str:
    """`file=F,line=N,` for an annotation: the desired-state file and the rule's line. Each
    file is read and indexed once (`indexes`), however many annotations point into it."""
    path = files(item) if files is not None else None
    if path is None:
        return ""
    if path not in indexes:
        from pvefix.desired.parse import LineIndex

        try:
            indexes[path] = LineIndex(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            indexes[path] = None
    index = indexes[path]
    line = index.find(rule_location(item)) if index is not None else None
    where = f"file={_escape_property(str(path))},"
    return where + (f"line={line}," if line is not None else "")


def github_annotations(report: CheckReport,
                       files: Callable[[CheckItem], Path | None] | None = None) -> str:
    """`::error file=...,line=...,title=...::message` lines for each drifted or unknown
    property; `files(item)` names the desired-state file its rule comes from."""
    out = []
    indexes: dict[Path, LineIndex | None] = {}
    for item in report.items:
        if item.status not in ("drift", "unknown"):
            continue
        kind = "drift" if item.status == "drift" else "not checked"
        if item.where == "rehearsal" and item.status == "drift":
            kind = "rehearsal failed"
        title = f"pvefix {kind}: {item.subject} {item.property}"
        if item.where == "rehearsal" and item.status == "drift":
            message = f"{item.actual}\n{item.detail}"
        elif item.status == "drift":
            message = f"wanted {item.expected}, found {item.actual}"
        else:
            message = item.detail or "could not be read"
        if item.when:
            message += f" ({item.when})"
        where = _file_and_line(item, files, indexes)
        out.append(f"::error {where}title={_escape_property(title)}::{_escape_data(message)}")
    return "".join(line + "\n" for line in out)
