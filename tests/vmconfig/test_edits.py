"""Edits change exactly the lines they mean to; everything else stays byte-identical."""

from __future__ import annotations

import difflib

import pytest

from pvefix.errors import ValidationError
from pvefix.vmconfig import HostPci, Machine, PropertyString, VMConfig

KPRO6 = """#GPU inference VM%3A 8 x RTX PRO 6000
bios: ovmf
boot: order=scsi0
cores: 96
hostpci0: mapping=pro6000
hostpci1: mapping=pro6000
hostpci10: 0000:c1:00.0,rombar=0
hostpci2: mapping=pro6000,x-vga=0
memory: 1572864
name: llm
net0: virtio=BC:24:11:00:00:01,bridge=vmbr0
ostype: l26
scsi0: local-zfs:vm-100-disk-0,size=512G
unknown-future-key: keep me
sockets: 2
this line is not a config line
"""


def changed_lines(before: str, after: str) -> list[str]:
    return [
        d
        for d in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if d[:1] in "+-" and not d.startswith(("+++", "---"))
    ]


def test_adding_pcie_changes_exactly_one_line() -> None:
    cfg = VMConfig.parse(KPRO6, "100.conf")
    entry = HostPci.parse(cfg.main.get("hostpci2") or "", "hostpci2")
    assert cfg.main.set("hostpci2", entry.with_option("pcie", "1"))
    assert changed_lines(KPRO6, cfg.render()) == [
        "-hostpci2: mapping=pro6000,x-vga=0",
        "+hostpci2: mapping=pro6000,x-vga=0,pcie=1",
    ]


def test_switching_machine_on_a_file_without_one_adds_one_line_in_sorted_place() -> None:
    cfg = VMConfig.parse(KPRO6, "100.conf")
    machine = Machine.parse(cfg.main.get("machine"))
    assert machine.family == "i440fx"
    cfg.main.set("machine", machine.to_q35())
    after = cfg.render()
    assert changed_lines(KPRO6, after) == ["+machine: q35"]
    lines = after.splitlines()
    assert lines.index("machine: q35") == lines.index("hostpci2: mapping=pro6000,x-vga=0") + 1


def test_replacing_a_pinned_machine_keeps_version_and_sub_options() -> None:
    text = "machine: pc-i440fx-9.2+pve1,viommu=virtio\nostype: win11\n"
    cfg = VMConfig.parse(text)
    cfg.main.set("machine", Machine.parse(cfg.main.get("machine")).to_q35())
    assert changed_lines(text, cfg.render()) == [
        "-machine: pc-i440fx-9.2+pve1,viommu=virtio",
        "+machine: pc-q35-9.2+pve1,viommu=virtio",
    ]


def test_unknown_keys_and_invalid_lines_survive_an_edit() -> None:
    cfg = VMConfig.parse(KPRO6, "100.conf")
    cfg.main.set("cores", "128")
    out = cfg.render()
    assert "unknown-future-key: keep me" in out
    assert "this line is not a config line" in out
    assert [p.line for p in cfg.problems] == [14, 16]


def test_deleting_a_key_removes_only_its_line() -> None:
    cfg = VMConfig.parse(KPRO6)
    assert cfg.main.delete("hostpci10")
    assert changed_lines(KPRO6, cfg.render()) == ["-hostpci10: 0000:c1:00.0,rombar=0"]
    assert not cfg.main.delete("hostpci10")


def test_pending_is_created_after_main_and_before_snapshots() -> None:
    text = "cores: 2\nparent: snap1\n\n[snap1]\ncores: 1\nsnaptime: 1700000000\n"
    cfg = VMConfig.parse(text)
    cfg.pending.set("machine", "q35")
    assert cfg.render() == (
        "cores: 2\nparent: snap1\n\n[PENDING]\nmachine: q35\n\n[snap1]\ncores: 1\n"
        "snaptime: 1700000000\n"
    )


def test_an_unused_pending_section_is_not_written() -> None:
    cfg = VMConfig.parse("cores: 2\n")
    assert cfg.pending.get("machine") is None
    assert cfg.render() == "cores: 2\n"


def test_pending_deletes_are_read() -> None:
    cfg = VMConfig.parse("cores: 2\n\n[PENDING]\ndelete: hostpci3,!vga\nmachine: q35\n")
    assert cfg.pending.deletes == ["hostpci3", "!vga"]
    assert cfg.has_pending


def test_duplicate_keys_resolve_to_the_last_and_an_edit_changes_that_one() -> None:
    text = "cores: 2\ncores: 4\n"
    cfg = VMConfig.parse(text)
    assert cfg.main.get("cores") == "4"
    cfg.main.set("cores", "8")
    assert cfg.render() == "cores: 2\ncores: 8\n"


def test_values_that_cannot_sit_on_one_line_are_refused() -> None:
    cfg = VMConfig.parse("cores: 2\n")
    with pytest.raises(ValidationError, match="cores"):
        cfg.main.set("cores", "2\nargs: -evil")


def test_description_is_decoded_and_encoded_like_proxmox() -> None:
    cfg = VMConfig.parse("#GPU VM%3A 8 x RTX 100%25\n#second line\ncores: 1\n")
    assert cfg.description == "GPU VM: 8 x RTX 100%\nsecond line"
    again = VMConfig.from_dicts({"cores": "1"}, description=cfg.description)
    assert again.render().startswith("#GPU VM%3A 8 x RTX 100%25\n#second line\n")


def test_no_trailing_newline_is_kept() -> None:
    assert VMConfig.parse("cores: 2").render() == "cores: 2"


def test_property_string_keeps_unknown_sub_keys_and_order() -> None:
    ps = PropertyString.parse("0000:41:00.0,x-future=abc,rombar=0", default_key="host")
    ps.set("pcie", "1")
    ps.set("rombar", "1")
    assert ps.render() == "0000:41:00.0,x-future=abc,rombar=1,pcie=1"
    assert ps.get("host") == "0000:41:00.0"
    assert ps.keys() == ["host", "x-future", "rombar", "pcie"]


def test_to_q35_mapping() -> None:
    assert Machine.parse(None).to_q35() == "q35"
    assert Machine.parse("pc").to_q35() == "q35"
    assert Machine.parse("pc-i440fx-8.1.pxe").to_q35() == "pc-q35-8.1.pxe"
    assert Machine.parse("pc-i440fx-9.2+pve1").to_q35() == "pc-q35-9.2+pve1"
    assert Machine.parse("type=pc,enable-s3=1").to_q35() == "type=q35,enable-s3=1"
    assert Machine.parse("pc-q35-9.2+pve0").to_q35() == "pc-q35-9.2+pve0"


def test_hostpci_facts() -> None:
    mf = HostPci.parse("0000:17:00,pcie=1,x-vga=1", "hostpci3")
    assert mf.multifunction and mf.is_raw and mf.pcie and mf.x_vga and mf.index == 3
    single = HostPci.parse("host=0000:17:00.0;0000:18:00.0", "hostpci0")
    assert single.hosts == ("0000:17:00.0", "0000:18:00.0") and not single.multifunction
    mapped = HostPci.parse("mapping=pro6000,pcie=yes", "hostpci15")
    assert mapped.mapping == "pro6000" and mapped.pcie and not mapped.is_raw
    with pytest.raises(ValidationError, match="hostpci16"):
        HostPci.parse("mapping=x1", "hostpci16")
