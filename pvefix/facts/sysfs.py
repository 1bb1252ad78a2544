"""The PCI functions' sysfs facts as node commands: their physical paths (`readlink -m`) and
their files (`grep -H ''`), many paths per command, and the parsers of what those print."""

from __future__ import annotations

from collections.abc import Sequence

from pvefix.errors import PvefixError
from pvefix.facts.model import Output
from pvefix.paths import SYSFS_PCI

MAX_COMMAND = 96 * 1024  # one exec request's command line (the remote `sh -c` argument)
READLINK = ("readlink", "-m")  # one canonical path per argument, in order
GREP_FILES = ("grep", "-H", "")  # every line of every file, `PATH:` in front
# What a function's folder holds that the planner reads; iommu_group and driver are links.
SYSFS_FILES = (
    "vendor", "device", "class", "subsystem_vendor", "subsystem_device", "numa_node", "resource",
)
SYSFS_LINKS = ("iommu_group", "driver")


def chunks(prefix: Sequence[str], paths: Sequence[str]) -> list[list[str]]:
    """Split one long argument list into commands whose line stays under MAX_COMMAND."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for path in paths:
        if current and size + len(path) + 3 > MAX_COMMAND:
            out.append([*prefix, *current])
            current, size = [], 0
        current.append(path)
        size += len(path) + 3
    if current:
        out.append([*prefix, *current])
    return out


def readlink_lines(result: Output, paths: Sequence[str]) -> dict[str, str]:
    """`readlink -m P...` prints one canonical path per argument, in order."""
    lines = result.stdout.splitlines()
    if result.exit_code != 0 or len(lines) != len(paths):
        raise PvefixError(
            f"readlink -m answered {len(lines)} lines for {len(paths)} paths "
            f"(exit {result.exit_code}): {result.stderr.strip()}"
        )
    return dict(zip(paths, lines, strict=True))


def grep_files(result: Output, paths: Sequence[str]) -> dict[str, str]:
    """`grep -H '' P...` output back into file -> text (missing files are left out)."""
    by_length = sorted(paths, key=len, reverse=True)
    texts: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        for path in by_length:
            if line.startswith(path + ":"):
                texts.setdefault(path, []).append(line[len(path) + 1 :])
                break
    return {path: "\n".join(lines) + "\n" for path, lines in texts.items()}


def function_reads(addresses: Sequence[str]) -> list[tuple[str, ...]]:
    """Round C: the files and links of the functions at `addresses`, in few commands."""
    files = [f"{SYSFS_PCI}/{a}/{name}" for a in addresses for name in SYSFS_FILES]
    links = [f"{SYSFS_PCI}/{a}/{name}" for a in addresses for name in SYSFS_LINKS]
    return [tuple(c) for c in (*chunks(GREP_FILES, files), *chunks(READLINK, links))]


def function_answers(commands: Sequence[tuple[str, ...]], results: Sequence[Output]
                     ) -> tuple[dict[str, str], dict[str, str]]:
    """Round C's answers: each file's text and each link's target, by sysfs path."""
    texts: dict[str, str] = {}
    targets: dict[str, str] = {}
    for command, result in zip(commands, results, strict=True):
        if command[:len(GREP_FILES)] == GREP_FILES:
            texts.update(grep_files(result, command[len(GREP_FILES):]))
        else:
            targets.update(readlink_lines(result, command[len(READLINK):]))
    return texts, targets
