"""bar_verdict's own rules, without firmware: what an unknown version gives, and the facts it
was built on (the firmware itself judges it in tests/conformance/test_firmware_window.py)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from pvefix.planner.bar_verdict import GiB, Shape, TiB, layout, verdict

SHAPES = st.builds(
    Shape,
    firmware=st.sampled_from(["ovmf", "seabios"]),
    version=st.just(None),
    vendor=st.sampled_from(["intel", "amd"]),
    phys_bits=st.integers(36, 52),
    pdpe1gb=st.booleans(),
    ram=st.sampled_from([2, 8, 64, 480, 800, 1500]).map(lambda g: g * GiB),
    bars=st.lists(st.sampled_from([16, 32, 64, 128, 256]).map(lambda g: g * GiB),
                  min_size=1, max_size=8).map(lambda b: tuple(sorted(b, reverse=True))),
    machine=st.sampled_from(["q35", "pc", "pc-q35-7.0"]),
    mmio64_mb=st.sampled_from([None, 32768, 262144, 1048576, 1 << 27]),
)
MEASURED = {"ovmf": ("2022.11", "2025.02"), "seabios": ("1.16.2", "1.16.3")}


@given(SHAPES)
def test_an_unknown_version_is_must_be_measured_exactly_where_the_builds_differ(
        shape: Shape) -> None:
    known = {verdict(replace(shape, version=v)).outcome for v in MEASURED[shape.firmware]}
    unknown = verdict(shape)
    if len(known) > 1:
        assert unknown.outcome == "must-be-measured" and unknown.measure
    elif unknown.outcome != "must-be-measured":
        assert {unknown.outcome} == known


@given(SHAPES)
def test_qemu_refusing_does_not_depend_on_the_firmware(shape: Shape) -> None:
    refused = layout(shape).refused is not None
    for firmware in ("ovmf", "seabios"):
        for version in MEASURED[firmware]:
            got = verdict(replace(shape, firmware=firmware, version=version)).outcome
            assert (got == "qemu-refuses") == refused


def test_the_q35_hole_counts_and_amd_moves_ram_above_1_tib() -> None:
    """FINDINGS.md claims 11, 12 (fw-lab runs F03, F08, F10)."""
    f03 = Shape("ovmf", "2025.02", "intel", 39, False, 480 * GiB, (32 * GiB,))
    assert verdict(f03).outcome == "qemu-refuses"
    assert verdict(replace(f03, machine="pc")).outcome != "qemu-refuses"  # i440fx: a 2 GiB hole
    f08 = Shape("ovmf", "2025.02", "amd", 46, True, 980 * GiB, (32 * GiB,))
    assert layout(f08).above_start == TiB
    assert layout(replace(f08, machine="pc-q35-7.0")).above_start == 4 * GiB


def test_guest_phys_bits_make_ovmf_trust_and_cap_the_width() -> None:
    """edk2 >= 202408: a reported guest-phys-bits makes any width valid and caps it."""
    intel40 = Shape("ovmf", "2025.02", "intel", 40, False, 2 * GiB, (64 * GiB,))
    assert verdict(intel40).outcome == "does-not-fit"  # untrusted: the 32 GiB classic window
    assert verdict(replace(intel40, guest_phys_bits=40)).outcome == "fits"  # 128 GiB window
    assert verdict(replace(intel40, version="2022.11", guest_phys_bits=40)).outcome == (
        "does-not-fit")  # 2022.11 does not read it
    wide = Shape("ovmf", "2025.02", "amd", 46, True, 2 * GiB, (1 * TiB,))
    assert verdict(wide).outcome == "fits"
    assert verdict(replace(wide, guest_phys_bits=40)).outcome == "does-not-fit"
