"""/etc/kernel/cmdline: line 1 is the command line, root= is guarded, the rest is kept."""

from __future__ import annotations

import pytest

from pvefix.cmdline import KernelCmdlineFile
from pvefix.errors import RefusedError

ZFS_FILE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"


@pytest.mark.parametrize(
    "text",
    [
        ZFS_FILE,
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs",
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs \n",
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs\r\n",
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n# old: quiet\nmore\n",
        "",
        "\n\n",
    ],
)
def test_an_unchanged_file_renders_byte_identical(text: str) -> None:
    assert KernelCmdlineFile.parse(text).render() == text


def test_the_zfs_root_line_parses_into_its_parameters() -> None:
    f = KernelCmdlineFile.parse(ZFS_FILE)
    assert f.cmdline.get("root") == ["ZFS=rpool/ROOT/pve-1"]
    assert f.cmdline.get("boot") == ["zfs"]
    assert f.has_root
    assert f.findings() == []


def test_adding_a_parameter_changes_line_1_only_and_keeps_the_newline() -> None:
    f = KernelCmdlineFile.parse(ZFS_FILE + "# note\n")
    assert f.ensure("iommu", "pt")
    assert f.ensure_pci_option("realloc")
    assert f.render() == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt pci=realloc\n# note\n"


def test_a_file_without_trailing_newline_stays_without_one() -> None:
    f = KernelCmdlineFile.parse("root=/dev/sda2 ro")
    assert f.ensure("quiet")
    assert f.render() == "root=/dev/sda2 ro quiet"


def test_removing_root_is_refused_and_the_file_is_unchanged() -> None:
    f = KernelCmdlineFile.parse(ZFS_FILE)
    with pytest.raises(RefusedError, match=r"/etc/kernel/cmdline:1: .*remove root="):
        f.remove("root")
    assert f.render() == ZFS_FILE


def test_a_file_without_root_is_an_error_finding_on_line_1() -> None:
    f = KernelCmdlineFile.parse("boot=zfs quiet\n", source="/x/etc/kernel/cmdline")
    (finding,) = [x for x in f.findings() if x.code == "kernel-cmdline-no-root"]
    assert finding.severity == "error"
    assert (finding.source, finding.line) == ("/x/etc/kernel/cmdline", 1)


def test_a_file_without_root_refuses_edits_naming_file_and_line() -> None:
    f = KernelCmdlineFile.parse("boot=zfs quiet\n")
    with pytest.raises(RefusedError, match=r"^/etc/kernel/cmdline:1: has no root="):
        f.ensure("iommu", "pt")
    assert f.ensure("quiet") is False  # nothing to write, nothing refused


def test_root_on_a_later_line_does_not_count() -> None:
    f = KernelCmdlineFile.parse("quiet\nroot=/dev/sda1\n")
    assert not f.has_root
    found = {x.code for x in f.findings()}
    assert found == {"kernel-cmdline-no-root", "kernel-cmdline-extra-lines"}


def test_lint_findings_point_at_the_file_and_line_1() -> None:
    f = KernelCmdlineFile.parse(ZFS_FILE.strip() + " amd_iommu=on iommu=pt\n")
    found = {x.code: x for x in f.findings()}
    assert set(found) == {"amd-iommu-on", "iommu-pt"}
    assert (found["amd-iommu-on"].source, found["amd-iommu-on"].line) == ("/etc/kernel/cmdline", 1)


def test_the_kpro6_fix_removes_amd_iommu_on_and_keeps_iommu_pt() -> None:
    f = KernelCmdlineFile.parse(ZFS_FILE.strip() + " amd_iommu=on iommu=pt\n")
    assert f.remove("amd_iommu", "on")
    assert f.ensure("iommu", "pt") is False
    assert f.render() == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"


def test_the_cmdline_property_is_a_snapshot() -> None:
    f = KernelCmdlineFile.parse(ZFS_FILE)
    f.cmdline.remove("root")
    assert f.render() == ZFS_FILE


def test_an_unterminated_quote_on_line_1_blocks_edits_naming_file_and_line() -> None:
    from pvefix.errors import ParseError

    f = KernelCmdlineFile.parse('root=/dev/sda1 x="open\n')
    with pytest.raises(ParseError) as info:
        f.ensure("iommu", "pt")
    assert (info.value.source, info.value.line) == ("/etc/kernel/cmdline", 1)
