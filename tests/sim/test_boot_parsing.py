"""The boot loader model's parsers: /proc/cmdline prefixes and /etc/default/grub."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pvefix.sim.boot import BootLoader, grub_cmdline, grub_values, split_prefix
from pvefix.sim.faults import parse_inject

token = st.from_regex(r"[a-z_]{1,8}(=[A-Za-z0-9/._:-]{1,12})?", fullmatch=True)


@given(prefix=st.lists(st.sampled_from(["BOOT_IMAGE=/boot/vmlinuz-6.8", "initrd=\\EFI\\i"]),
                       max_size=2),
       rest=st.lists(token, max_size=8))
def test_split_prefix_keeps_every_token_in_order(prefix: list[str], rest: list[str]) -> None:
    got_prefix, got_rest = split_prefix(" ".join(prefix + rest))
    assert got_prefix == prefix
    assert got_rest == [t for t in rest if not t.startswith(("BOOT_IMAGE=", "initrd="))]


@given(installed=st.lists(token, min_size=1, max_size=8))
def test_after_a_reboot_the_loader_prefix_stays_and_the_installed_line_follows(
    installed: list[str],
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        loader = BootLoader(Path(tmp) / "boot.json")
        loader.install(" ".join(installed))
        after = loader.next_proc_cmdline("initrd=\\EFI\\x root=ZFS=a boot=zfs")
    assert after.split() == ["initrd=\\EFI\\x", *installed]


def test_without_an_install_a_reboot_boots_the_running_cmdline(tmp_path: Path) -> None:
    loader = BootLoader(tmp_path / "boot.json")
    running = "BOOT_IMAGE=/boot/vmlinuz-6.8.12-11-pve root=/dev/mapper/pve-root ro quiet"
    assert loader.next_proc_cmdline(running) == running


def test_grub_values_take_the_last_assignment_and_drop_quotes() -> None:
    text = (
        '# GRUB_CMDLINE_LINUX_DEFAULT="commented"\n'
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
        "GRUB_CMDLINE_LINUX_DEFAULT='quiet intel_iommu=on'\n"
        'GRUB_CMDLINE_LINUX="root=ZFS=rpool/ROOT/pve-1 boot=zfs"\n'
    )
    assert grub_values(text) == {
        "GRUB_CMDLINE_LINUX_DEFAULT": "quiet intel_iommu=on",
        "GRUB_CMDLINE_LINUX": "root=ZFS=rpool/ROOT/pve-1 boot=zfs",
    }


def test_grub_cmdline_puts_root_first_then_linux_then_default() -> None:
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\nGRUB_CMDLINE_LINUX="nomodeset"\n'
    running = "BOOT_IMAGE=/boot/vmlinuz root=/dev/mapper/pve-root ro quiet"
    assert grub_cmdline(text, running) == "root=/dev/mapper/pve-root ro nomodeset quiet iommu=pt"


def test_inject_specs_parse_into_settings() -> None:
    assert parse_inject(["latency=20", "fail-write=3", "lock=100:backup", "edit-between"]) == {
        "latency_ms": 20, "fail_write": 3, "edit_between": True, "lock": {100: "backup"},
    }
