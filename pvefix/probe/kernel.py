"""The guest kernel's command line and the PCI/BAR placement errors in its log."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from pvefix.probe.report import CmdlineSection, KernelLogFinding, KernelLogSection, not_measured
from pvefix.probe.shell import CommandRunner

#: (kind, pattern). Messages from drivers/pci/setup-res.c and setup-bus.c, and NVIDIA's nv.c.
BAR_ERROR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bar_no_space", re.compile(r"can't assign; no space")),
    ("bar_failed_assign", re.compile(r"failed to assign")),
    ("bar_no_space", re.compile(r"\bno space for\b")),
    (
        "nvrm_invalid_region",
        re.compile(r"NVRM: This PCI I/O region assigned to your NVIDIA device is invalid")),
)


def scan_kernel_log(lines: Iterable[str]) -> tuple[int, tuple[KernelLogFinding, ...]]:
    """Count the lines and return those matching a BAR/PCI placement error, first match wins."""
    count = 0
    findings: list[KernelLogFinding] = []
    for line in lines:
        count += 1
        for kind, pattern in BAR_ERROR_PATTERNS:
            if pattern.search(line):
                findings.append(KernelLogFinding(kind=kind, line=line.rstrip()))
                break
    return count, tuple(findings)


def parse_kmsg_record(record: str) -> str:
    """'6,339,5140900,-;NVRM: ...' -> 'NVRM: ...' (a /dev/kmsg record); other text as is."""
    head, sep, message = record.partition(";")
    if sep and head.count(",") >= 2 and head.split(",")[0].isdigit():
        return message.split("\n", 1)[0]
    return record


def read_cmdline(proc_root: Path = Path("/proc")) -> CmdlineSection:
    """The running kernel's command line from `<proc>/cmdline`."""
    path = proc_root / "cmdline"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return not_measured(CmdlineSection, f"cannot read {path}: {exc.strerror or exc}")
    return CmdlineSection(cmdline=text.replace("\0", " ").strip(), source=str(path))


def _read_kmsg(path: Path, limit: int = 200_000) -> list[str]:
    """Read /dev/kmsg without blocking: every record buffered now, then stop."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    lines: list[str] = []
    try:
        while len(lines) < limit:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # a record was overwritten while reading: skip it
                continue
            if not chunk:
                break
            lines.append(parse_kmsg_record(chunk.decode("utf-8", errors="replace")))
    finally:
        os.close(fd)
    return lines


def read_kernel_log(run: CommandRunner, kmsg: Path = Path("/dev/kmsg"), *,
                    reader: Callable[[Path], list[str]] | None = None) -> KernelLogSection:
    """Scan the kernel log: `dmesg`, else `journalctl -k`, else /dev/kmsg, whichever works."""
    tried: list[str] = []
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]):
        result = run(argv, 20.0)
        if result.ok and result.stdout.strip():
            count, findings = scan_kernel_log(result.stdout.splitlines())
            return KernelLogSection(source=" ".join(argv), lines_scanned=count, findings=findings)
        tried.append(f"{argv[0]}: {result.why()}")
    try:
        lines = (reader or _read_kmsg)(kmsg)
    except OSError as exc:
        tried.append(f"{kmsg}: {exc.strerror or exc}")
    else:
        if lines:
            count, findings = scan_kernel_log(lines)
            return KernelLogSection(source=str(kmsg), lines_scanned=count, findings=findings)
        tried.append(f"{kmsg}: empty")
    return not_measured(KernelLogSection, "no kernel log readable (" + "; ".join(tried) + ")")
