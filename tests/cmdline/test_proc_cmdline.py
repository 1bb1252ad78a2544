"""/proc/cmdline: read only; boot loader tokens are not configuration. Real captured output."""

from __future__ import annotations

import pytest

from pvefix.cmdline import ProcCmdline, lint, pci_options, pci_realloc_state
from pvefix.errors import RefusedError

GRUB_BOOT = (
    "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet amd_iommu=on\n"
)
SYSTEMD_BOOT = (
    "initrd=\\EFI\\proxmox\\6.8.12-4-pve\\initrd.img-6.8.12-4-pve "
    "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
)


def test_the_real_firecracker_cmdline_round_trips(firecracker_proc_cmdline: str) -> None:
    proc = ProcCmdline.parse(firecracker_proc_cmdline)
    assert proc.render() == firecracker_proc_cmdline
    assert proc.cmdline.render() == firecracker_proc_cmdline


def test_the_real_cmdline_has_realloc_off_and_init_args(firecracker_proc_cmdline: str) -> None:
    proc = ProcCmdline.parse(firecracker_proc_cmdline)
    line = proc.cmdline
    assert pci_options(line) == ["realloc=off"]
    assert pci_realloc_state(line) == "off"
    assert line.get("console") == ["ttyS0"]
    assert line.get("mitigations") == ["auto,no_guest_host,no_guest_guest"]
    assert line.init_args[0] == "--firecracker-init"
    assert "--auth-required" in line.init_args
    assert not line.has("addr"), "init arguments are not kernel parameters"
    assert proc.bootloader_tokens == ()


def test_the_real_cmdline_lints_to_realloc_off_only(firecracker_proc_cmdline: str) -> None:
    found = ProcCmdline.parse(firecracker_proc_cmdline).findings()
    assert [(f.code, f.token, f.line) for f in found] == [
        ("pci-realloc-off", "pci=realloc=off", 1)
    ]


def test_editing_a_copy_of_the_real_cmdline_changes_only_the_pci_token(
    firecracker_proc_cmdline: str,
) -> None:
    from pvefix.cmdline import ensure_pci_option

    line = ProcCmdline.parse(firecracker_proc_cmdline).cmdline
    assert ensure_pci_option(line, "realloc")
    expected = firecracker_proc_cmdline.replace(" pci=realloc=off ", " pci=realloc ")
    assert line.render() == expected


@pytest.mark.parametrize(
    ("text", "loader", "config"),
    [
        (GRUB_BOOT, ("BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve",),
         "root=/dev/mapper/pve-root ro quiet amd_iommu=on\n"),
        (SYSTEMD_BOOT, ("initrd=\\EFI\\proxmox\\6.8.12-4-pve\\initrd.img-6.8.12-4-pve",),
         "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"),
    ],
)
def test_boot_loader_tokens_are_set_apart(text: str, loader: tuple[str, ...], config: str) -> None:
    proc = ProcCmdline.parse(text)
    assert proc.bootloader_tokens == loader
    assert proc.config_cmdline.render() == config
    assert proc.render() == text


def test_findings_ignore_the_boot_loader_tokens() -> None:
    found = ProcCmdline.parse(GRUB_BOOT).findings()
    assert [f.code for f in found] == ["amd-iommu-on"]
    assert lint(ProcCmdline.parse("initrd=a initrd=b quiet").config_cmdline) == []


@pytest.mark.parametrize(
    "edit", [("ensure", "iommu", "pt"), ("remove", "quiet"), ("ensure_pci_option", "realloc")]
)
def test_writing_proc_cmdline_is_refused(edit: tuple[str, ...]) -> None:
    proc = ProcCmdline.parse(GRUB_BOOT)
    with pytest.raises(RefusedError, match=r"^/proc/cmdline: is read only"):
        getattr(proc, edit[0])(*edit[1:])
    assert proc.render() == GRUB_BOOT
