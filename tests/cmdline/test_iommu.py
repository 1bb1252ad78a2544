"""What a command line does to the IOMMU, as the kernel's own parsers read it (cmdline/iommu.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.cmdline import Cmdline
from pvefix.cmdline.files import esp_refresh_aborts
from pvefix.cmdline.iommu import (
    intel_needs_on,
    intel_setting,
    iommu_enabled,
    off_tokens,
    passthrough_token,
)


@pytest.mark.parametrize(
    ("line", "vendor", "kernel", "enabled"),
    [
        ("root=/dev/sda quiet", "amd", "6.17.2-1-pve", True),
        ("quiet amd_iommu=off", "amd", "6.17.2-1-pve", False),
        ("quiet amd_iommu=fullflush,off", "amd", "6.17.2-1-pve", False),  # any option, by prefix
        ("quiet amd_iommu=off", "intel", "6.17.2-1-pve", True),  # the AMD driver is not used
        ("quiet intel_iommu=off", "intel", "6.8.12-4-pve", False),
        ("quiet intel_iommu=off intel_iommu=on", "intel", "6.8.12-4-pve", True),  # last wins
        ("quiet intel_iommu=on,off", "intel", "6.8.12-4-pve", False),
        ("quiet", "intel", "6.5.13-6-pve", False),  # off by default before 6.8
        ("quiet intel_iommu=on", "intel", "6.5.13-6-pve", True),
        ("quiet", "intel", "6.8.12-4-pve", True),
        ("quiet", "intel", "6.5.0-1-generic", True),  # not a Proxmox kernel: not judged
        ("quiet amd_iommu=off", None, None, False),  # vendor unknown: either one off counts
    ],
)
def test_iommu_enabled(line: str, vendor: str | None, kernel: str | None, enabled: bool) -> None:
    assert iommu_enabled(Cmdline.parse(line), vendor, kernel) is enabled  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "deciding"),
    [
        ("quiet", None),
        ("iommu=pt", "iommu=pt"),
        ("iommu.passthrough=1", "iommu.passthrough=1"),
        ("iommu.passthrough=on", "iommu.passthrough=on"),
        ("iommu.passthrough=y", "iommu.passthrough=y"),
        ("iommu=pt iommu.passthrough=0", None),
        ("iommu.passthrough=0 iommu=pt", "iommu=pt"),
        ("iommu=pt iommu=nopt", None),
        ("iommu=force,pt", "iommu=force,pt"),
        ("iommu.passthrough=maybe", None),  # kstrtobool refuses it: nothing set
    ],
)
def test_passthrough_token(line: str, deciding: str | None) -> None:
    token = passthrough_token(Cmdline.parse(line))
    assert (token.raw if token else None) == deciding


_WORDS = st.sampled_from(
    ["quiet", "root=ZFS=rpool/ROOT/pve-1", "iommu=pt", "iommu=nopt", "iommu.passthrough=1",
     "iommu.passthrough=0", "amd_iommu=on", "intel_iommu=on", "intel_iommu=off", "pci=realloc"]
)


@given(st.lists(_WORDS, max_size=8))
def test_the_last_passthrough_setting_wins(words: list[str]) -> None:
    line = " ".join(words)
    assert passthrough_token(Cmdline.parse(f"{line} iommu.passthrough=1")) is not None
    assert passthrough_token(Cmdline.parse(f"{line} iommu=pt")) is not None
    assert passthrough_token(Cmdline.parse(f"{line} iommu=nopt")) is None
    assert passthrough_token(Cmdline.parse(f"{line} iommu.passthrough=0")) is None


@given(st.lists(_WORDS, max_size=8))
def test_amd_off_anywhere_disables(words: list[str]) -> None:
    line = Cmdline.parse(" ".join([*words, "amd_iommu=off", *words]))
    assert not iommu_enabled(line, "amd", "6.17.2-1-pve")
    assert [t.raw for t in off_tokens(line, "amd")] == ["amd_iommu=off"]


@given(st.lists(_WORDS, max_size=8))
def test_intel_last_on_or_off_wins(words: list[str]) -> None:
    line = " ".join(words)
    assert intel_setting(Cmdline.parse(f"{line} intel_iommu=on"))[0] == "on"
    assert intel_setting(Cmdline.parse(f"{line} intel_iommu=off"))[0] == "off"
    assert iommu_enabled(Cmdline.parse(f"{line} intel_iommu=on"), "intel", "6.5.13-6-pve")


def test_intel_needs_on() -> None:
    assert intel_needs_on("6.5.13-6-pve")
    assert not intel_needs_on("6.8.12-4-pve")
    assert not intel_needs_on(None)


@pytest.mark.parametrize(
    ("text", "aborts"),
    [
        (None, False),  # absent: the hook falls back to /proc/cmdline
        ("root=ZFS=rpool/ROOT/pve-1 boot=zfs\n", False),
        ("quiet intel_iommu=on\n", True),
        ("quiet\nroot=/dev/sda\n", True),  # only the first line is read
        ("", True),
        ("root=UUID=1234", False),  # no newline at all
    ],
)
def test_esp_refresh_aborts(text: str | None, aborts: bool) -> None:
    assert esp_refresh_aborts(text) is aborts
