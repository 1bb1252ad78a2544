"""`pvefix inspect cmdline PATH|-`: show how pvefix reads a kernel command line file.

Formats: `text` (tokens, pci options, findings), `json` (a stable dict, schema
`pvefix.cmdline/v1`), `conf` (the file re-emitted exactly as pvefix would write it unchanged).
"""

from __future__ import annotations

import json
import sys
from pathlib import PurePath
from typing import Any, Literal

from pvefix.cmdline import (
    GRUB_LINUX,
    GRUB_LINUX_DEFAULT,
    Cmdline,
    Finding,
    GrubDefaultFile,
    KernelCmdlineFile,
    ProcCmdline,
    lint,
    pci_options,
    pci_realloc_state,
)
from pvefix.errors import ValidationError

Kind = Literal["kernel-cmdline", "grub", "proc", "cmdline"]
SCHEMA = "pvefix.cmdline/v1"
FORMATS = ("text", "json", "conf")
_KIND_NAMES: dict[str, Kind] = {
    "kernel": "kernel-cmdline",
    "kernel-cmdline": "kernel-cmdline",
    "grub": "grub",
    "proc": "proc",
    "bare": "cmdline",
    "cmdline": "cmdline",
}


def detect_kind(path: str, kind: str | None = None) -> Kind:
    """The kind of file: `kind` if given, else from the name (stdin: a bare command line)."""
    if kind is not None:
        if kind not in _KIND_NAMES:
            raise ValidationError(
                f"unknown kind {kind!r} (expected kernel, grub, proc or bare)", source="--kind"
            )
        return _KIND_NAMES[kind]
    if path == "-":
        return "cmdline"
    parts = PurePath(path).parts
    if parts[-2:] == ("kernel", "cmdline"):
        return "kernel-cmdline"
    if parts[-2:] == ("proc", "cmdline"):
        return "proc"
    if parts and parts[-1] == "grub":
        return "grub"
    return "cmdline"


def _read(path: str) -> str:
    from pvefix.commands.inspect_cmd import read_input_bytes

    data = read_input_bytes(path)
    # surrogateescape keeps any byte, so `conf` re-emits the file exactly.
    return data.decode("utf-8", "surrogateescape")


def inspect_cmdline(path: str, fmt: str, kind: str | None, *,
                    kernel_version: str | None = None) -> int:
    """Read PATH (or `-` for stdin), print it in `fmt`, return the exit code (0)."""
    if fmt not in FORMATS:
        raise ValidationError(f"unknown format {fmt!r} (expected text, json or conf)",
                              source="--format")
    resolved = detect_kind(path, kind)
    text = _read(path)
    source = "<stdin>" if path == "-" else path
    report = build_report(text, source, resolved, kernel_version=kernel_version)
    if fmt == "conf":
        sys.stdout.flush()
        sys.stdout.buffer.write(report["_render"].encode("utf-8", "surrogateescape"))
        sys.stdout.buffer.flush()
    elif fmt == "json":
        public = {k: v for k, v in report.items() if not k.startswith("_")}
        print(json.dumps(public, indent=2, sort_keys=True))
    else:
        print(render_text(report), end="")
    return 0


def build_report(text: str, source: str, kind: Kind, *,
                 kernel_version: str | None = None) -> dict[str, Any]:
    """The stable dict behind the json format (keys starting with `_` are internal)."""
    grub: dict[str, Any] | None = None
    bootloader: list[str] | None = None
    has_root: bool | None = None
    cmdline: Cmdline
    config: Cmdline
    findings: list[Finding]
    rendered: str
    if kind == "kernel-cmdline":
        kfile = KernelCmdlineFile.parse(text, source=source)
        cmdline = config = kfile.cmdline
        findings = kfile.findings(kernel_version=kernel_version)
        has_root, rendered = kfile.has_root, kfile.render()
    elif kind == "grub":
        gfile = GrubDefaultFile.parse(text, source=source)
        cmdline = config = gfile.cmdline
        findings = gfile.findings(kernel_version=kernel_version)
        grub = {}
        for variable in (GRUB_LINUX, GRUB_LINUX_DEFAULT):
            a = gfile.assignment(variable)
            grub[variable] = None if a is None else {
                "line": a.line,
                "value": a.word.value,
                "style": a.word.style,
                "expansions": list(a.word.expansions)}
        rendered = gfile.render()
    elif kind == "proc":
        pfile = ProcCmdline.parse(text, source=source)
        cmdline, config = pfile.cmdline, pfile.config_cmdline
        findings = pfile.findings(kernel_version=kernel_version)
        bootloader, rendered = list(pfile.bootloader_tokens), pfile.render()
    else:
        cmdline = config = Cmdline.parse(text, source=source)
        findings = [
            f.model_copy(update={"source": source})
            for f in lint(cmdline, kernel_version=kernel_version)]
        rendered = text
    return {
        "schema": SCHEMA,
        "kind": kind,
        "source": source,
        "cmdline": config.render().strip(),
        "tokens": [{"raw": t.raw, "name": t.name, "value": t.value} for t in cmdline],
        "init_args": list(cmdline.init_args),
        "pci_options": pci_options(config),
        "pci_realloc": pci_realloc_state(config),
        "findings": [f.model_dump() for f in findings],
        "has_root": has_root,
        "grub": grub,
        "bootloader_tokens": bootloader,
        "_render": rendered}


def render_text(report: dict[str, Any]) -> str:
    """The human-readable form of a report."""
    out = [f"{report['source']} ({report['kind']})"]
    if report["grub"] is not None:
        for variable, a in report["grub"].items():
            shown = "(not set)" if a is None else f"line {a['line']}: {a['value']!r}"
            out.append(f"{variable}: {shown}")
    out.append(f"cmdline: {_printable(report['cmdline'])}")
    if report["bootloader_tokens"]:
        loader = " ".join(report["bootloader_tokens"])
        out.append(f"boot loader tokens (not configuration): {loader}")
    out.append(f"tokens ({len(report['tokens'])}):")
    for i, t in enumerate(report["tokens"], 1):
        plain = t["name"] if t["value"] is None else f"{t['name']}={t['value']}"
        extra = "" if plain == t["raw"] else f"    (the kernel reads: {_printable(plain)})"
        out.append(f"  {i:3d}  {_printable(t['raw'])}{extra}")
    if report["init_args"]:
        out.append(f"init args (after --, never edited): {' '.join(report['init_args'])}")
    options = ", ".join(report["pci_options"]) or "(none)"
    out.append(f"pci options: {options}; realloc: {report['pci_realloc'] or 'not set'}")
    if report["has_root"] is not None:
        out.append(f"root=: {'present' if report['has_root'] else 'MISSING'}")
    out.append(f"findings ({len(report['findings'])}):")
    for f in report["findings"]:
        where = f" line {f['line']}" if f["line"] else ""
        about = f" [{_printable(f['token'])}]" if f["token"] else ""
        out.append(f"  {f['severity']:<7} {f['code']}{where}{about}: {f['message']}")
    return "\n".join(out) + "\n"


def _printable(text: str) -> str:
    # Control characters (a newline swallowed by an open quote, a tab) are shown escaped so
    # that one token stays on one line of the report.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
