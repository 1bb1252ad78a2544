"""bar_verdict's own rules, without firmware: what an unknown version gives, and the facts it
was built on (the firmware itself judges it in tests/conformance/test_firmware_window.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pvefix.planner.bar_verdict import GiB, Shape, TiB, hotplug_pad, layout, verdict

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
    padded_buses=st.sampled_from([0, 0, 4, 5, 7, 8]),
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


PAD_RUNS = Path(__file__).with_name("hotplug_pad_runs.json")
OUTCOME = {"placed": "fits", "not-placed": "does-not-fit"}


def pad_run_shape(row: dict[str, object]) -> Shape:
    """The Shape of one fw-lab run of hotplug_pad_runs.json (the runs' vCPU set explicitly)."""
    run = row["run"]
    assert isinstance(run, dict)
    kind, version = run["firmware_set"].split("-")
    bars: list[int] = []
    for part in run["bars"].split("+"):
        n, size = part.split("x")
        bars += [int(size[:-1]) * GiB] * int(n)
    mmio = run.get("mmio64_mb")
    return Shape("ovmf" if kind == "edk2" else "seabios", version, run["vendor"],
                 int(run["phys_bits"]), bool(run.get("pdpe1gb")), int(run["ram"][:-1]) * GiB,
                 tuple(bars), run["machine"], mmio64_mb=int(mmio) if mmio else None,
                 padded_buses=int(str(row["padded_buses"])))


def test_the_hotplug_padding_runs_of_fw_lab() -> None:
    """Every fw-lab run of hotplug_pad_runs.json: the same outcome and BAR count. Among them,
    an empty root port or pci-bridge takes 1 GiB of a 130-132 GiB window on both edk2 builds
    (P2/P3, P13/P14), none of a 32 GiB one (P15), and SeaBIOS 1.16.3 pads only with RAM above
    4 GiB (P9, P11, P12)."""
    rows = json.loads(PAD_RUNS.read_text())["runs"]
    assert len(rows) >= 16
    wrong = []
    for row in rows:
        mine = verdict(pad_run_shape(row))
        if (mine.outcome, mine.placed) != (OUTCOME[row["outcome"]], row["bars_assigned"]):
            wrong.append(f"{row['run']['label']}: fw-lab {row['outcome']} {row['bars_assigned']},"
                         f" pvefix {mine.outcome} {mine.placed} ({mine.why})")
    assert not wrong, "\n".join(wrong)


def test_the_hotplug_pad_is_a_256th_of_the_window_rounded_up() -> None:
    assert hotplug_pad(32 * GiB) == 0
    assert hotplug_pad(128 * GiB) == 512 << 20
    assert hotplug_pad(130 * GiB) == hotplug_pad(132 * GiB) == GiB
    assert hotplug_pad(2 * TiB) == 8 * GiB


@given(SHAPES.filter(lambda s: s.firmware == "ovmf"), st.sampled_from(MEASURED["ovmf"]))
def test_padding_never_makes_an_ovmf_window_fit(shape: Shape, version: str) -> None:
    """More hotplug-capable bridges never turn OVMF's answer into "fits"."""
    padded = verdict(replace(shape, version=version))
    bare = verdict(replace(shape, version=version, padded_buses=0))
    if padded.outcome == "fits":
        assert bare.outcome == "fits"
    if bare.outcome != "fits":
        assert padded.outcome == bare.outcome


def test_seabios_with_i440fxs_bridges_and_ram_above_4g_must_be_measured() -> None:
    """fw-lab (SeaBIOS 1.16.3, `--machine pc` with Proxmox's pci.1 and pci.2, 42 bits, 900 GiB
    RAM, 3x128G+64G; test_firmware_window's generated VM of 2026-12-06): one BAR ends above
    2^42, where the model without bridge windows places all four. On q35 SeaBIOS's bridge
    windows are measured (top/2048 each); on i440fx they are not, so no claim."""
    shape = Shape("seabios", "1.16.3", "intel", 42, True, 900 * GiB,
                  (128 * GiB, 128 * GiB, 128 * GiB, 64 * GiB), "pc", padded_buses=2)
    got = verdict(shape)
    assert got.outcome == "must-be-measured" and got.measure
    assert verdict(replace(shape, padded_buses=0)).outcome == "fits"
    assert verdict(replace(shape, ram=2 * GiB)).outcome != "must-be-measured"  # no pads
