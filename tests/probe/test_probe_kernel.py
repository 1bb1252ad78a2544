"""Guest cmdline and the PCI/BAR placement errors in the kernel log."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvefix.probe import kernel
from pvefix.probe.shell import CommandResult

BAD_LOG = [
    "[    0.5] pci 0000:01:00.0: BAR 1 [mem size 0x2000000000 64bit pref]: can't assign; no space",
    "[    0.5] pci 0000:01:00.0: BAR 1 [mem size 0x2000000000 64bit pref]: failed to assign",
    "[    0.5] pci 0000:00:1c.0: BAR 1: no space for [mem size 0x40000000 64bit pref]",
    "[    3.1] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:",
    "[    3.2] NVRM: BAR1 is 0M @ 0x0 (PCI:0000:01:00.0)",
]


def test_the_real_guest_logs_have_no_bar_errors(shared_guest, h200):
    for text in (shared_guest("dmesg.txt")["dmesg pci/iommu"], (h200 / "dmesg.txt").read_text()):
        count, findings = kernel.scan_kernel_log(text.splitlines())
        assert count > 20
        assert findings == ()


def test_each_documented_bar_error_is_found_once_with_its_kind():
    count, findings = kernel.scan_kernel_log(BAD_LOG)
    assert count == 5
    assert [f.kind for f in findings] == [
        "bar_no_space", "bar_failed_assign", "bar_no_space", "nvrm_invalid_region",
    ]
    assert findings[3].line == BAD_LOG[3]


def test_a_kmsg_record_loses_its_header_only():
    assert kernel.parse_kmsg_record("3,812,3100000,-;NVRM: BAR1 is 0M\n SUBSYSTEM=pci") == (
        "NVRM: BAR1 is 0M"
    )
    assert kernel.parse_kmsg_record("plain; text") == "plain; text"


def test_cmdline_is_read_from_proc(tmp_path, h200):
    (tmp_path / "cmdline").write_text((h200 / "proc_cmdline.txt").read_text())
    section = kernel.read_cmdline(tmp_path)
    assert section.measured
    assert section.cmdline is not None and "pci=realloc=off" in section.cmdline.split()


def test_an_unreadable_cmdline_is_not_measured_with_the_path(tmp_path):
    section = kernel.read_cmdline(tmp_path / "nowhere")
    assert not section.measured
    assert section.reason is not None and "nowhere/cmdline" in section.reason


def _runner(results: dict[str, CommandResult]):
    def run(argv, timeout, env=None):
        return results.get(argv[0], CommandResult(tuple(argv), None, missing=True))
    return run


def test_dmesg_is_preferred_when_it_works():
    ok = CommandResult(("dmesg",), 0, "\n".join(BAD_LOG))
    section = kernel.read_kernel_log(_runner({"dmesg": ok}), reader=lambda p: [])
    assert section.source == "dmesg" and len(section.findings) == 4


def test_without_dmesg_or_journalctl_the_probe_reads_kmsg(tmp_path):
    denied = CommandResult(("dmesg",), 1, "", "dmesg: read kernel buffer failed: EPERM")
    section = kernel.read_kernel_log(
        _runner({"dmesg": denied}), tmp_path / "kmsg", reader=lambda p: BAD_LOG[:1]
    )
    assert section.source == str(tmp_path / "kmsg")
    assert [f.kind for f in section.findings] == ["bar_no_space"]


def test_when_nothing_is_readable_the_reason_lists_every_attempt(tmp_path):
    def refuse(path: Path) -> list[str]:
        raise PermissionError(13, "Permission denied")

    denied = CommandResult(("dmesg",), 1, "", "dmesg: read kernel buffer failed")
    section = kernel.read_kernel_log(_runner({"dmesg": denied}), tmp_path / "kmsg", reader=refuse)
    assert not section.measured
    assert section.reason is not None
    for part in ("dmesg: exit status 1", "journalctl: not found", "Permission denied"):
        assert part in section.reason


@pytest.mark.skipif(not Path("/dev/kmsg").exists(), reason="no /dev/kmsg here")
def test_the_real_kmsg_reader_returns_without_blocking():
    try:
        lines = kernel._read_kmsg(Path("/dev/kmsg"), limit=50)
    except PermissionError:
        pytest.skip("no permission to read /dev/kmsg")
    assert len(lines) <= 50
