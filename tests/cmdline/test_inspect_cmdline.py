"""`pvefix inspect cmdline`: kind detection, text/json/conf output, through the real CLI."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pvefix.commands.inspect_cmdline import detect_kind, inspect_cmdline
from pvefix.main import main

GRUB = '# c\nGRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on"\nGRUB_CMDLINE_LINUX=""\n'
KERNEL = "root=ZFS=rpool/ROOT/pve-1 boot=zfs pci=realloc=off\n"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    (tmp_path / "etc" / "kernel").mkdir(parents=True)
    (tmp_path / "etc" / "default").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc" / "kernel" / "cmdline").write_text(KERNEL)
    (tmp_path / "etc" / "default" / "grub").write_text(GRUB)
    (tmp_path / "proc" / "cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro\n")
    return tmp_path


@pytest.mark.parametrize(
    ("path", "kind", "expected"),
    [
        ("/etc/kernel/cmdline", None, "kernel-cmdline"),
        ("bundle/etc/default/grub", None, "grub"),
        ("bundle/proc/cmdline", None, "proc"),
        ("-", None, "cmdline"),
        ("notes.txt", None, "cmdline"),
        ("-", "grub", "grub"),
        ("/etc/kernel/cmdline", "proc", "proc"),
        ("x", "kernel", "kernel-cmdline"),
    ],
)
def test_the_kind_comes_from_the_name_unless_given(
    path: str, kind: str | None, expected: str
) -> None:
    assert detect_kind(path, kind) == expected


def test_json_is_a_stable_dict(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inspect_cmdline(str(host / "etc/default/grub"), "json", None) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {
        "schema", "kind", "source", "cmdline", "tokens", "init_args", "pci_options",
        "pci_realloc", "findings", "has_root", "grub", "bootloader_tokens",
    }
    assert data["schema"] == "pvefix.cmdline/v1"
    assert data["kind"] == "grub"
    assert data["cmdline"] == "quiet amd_iommu=on"
    assert data["grub"]["GRUB_CMDLINE_LINUX_DEFAULT"]["line"] == 2
    assert [f["code"] for f in data["findings"]] == ["amd-iommu-on"]
    assert data["findings"][0]["line"] == 2


def test_text_lists_tokens_pci_options_and_findings(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inspect_cmdline(str(host / "etc/kernel/cmdline"), "text", None) == 0
    out = capsys.readouterr().out
    assert "root=ZFS=rpool/ROOT/pve-1" in out
    assert "pci options: realloc=off; realloc: off" in out
    assert "root=: present" in out
    assert "pci-realloc-off" in out


def test_conf_re_emits_each_file_exactly(
    host: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    for rel in ("etc/kernel/cmdline", "etc/default/grub", "proc/cmdline"):
        assert inspect_cmdline(str(host / rel), "conf", None) == 0
        assert capsysbinary.readouterr().out == (host / rel).read_bytes()


def test_conf_keeps_bytes_that_are_not_utf8(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    raw = b"root=/dev/sda1 label=\xff\xfe quiet\n"
    (tmp_path / "cmdline").write_bytes(raw)
    assert inspect_cmdline(str(tmp_path / "cmdline"), "conf", "kernel") == 0
    assert capsysbinary.readouterr().out == raw


def test_stdin_is_a_bare_cmdline_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"quiet iommu=pt -- single\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert inspect_cmdline("-", "json", None) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["kind"], data["source"]) == ("cmdline", "<stdin>")
    assert data["init_args"] == ["single"]
    assert [f["code"] for f in data["findings"]] == ["iommu-pt"]


def test_the_cli_wires_the_command_and_maps_errors(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(host / "etc/default/grub")
    assert main(["inspect", "cmdline", path, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "grub"
    bad = host / "grub"
    bad.write_text('GRUB_CMDLINE_LINUX_DEFAULT="open\n')
    assert main(["inspect", "cmdline", str(bad)]) == 1
    assert f"{bad}:1: GRUB_CMDLINE_LINUX_DEFAULT: unterminated" in capsys.readouterr().err


def test_a_missing_file_is_an_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "cmdline", "/nonexistent/etc/kernel/cmdline"]) == 1
    assert "/nonexistent/etc/kernel/cmdline" in capsys.readouterr().err
