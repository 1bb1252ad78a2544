"""pvefix's BAR verdict (pvefix/planner/bar_verdict.py) judged by the firmware itself.

../shared/fw-lab boots Debian's QEMU with real OVMF (edk2 2022.11, 2025.02) and SeaBIOS (1.16.2,
1.16.3) builds and stand-in devices of GPU-sized BARs, and says whether every BAR was placed
(fits), not (does not fit), whether QEMU refused the VM or the firmware never reached its boot
manager (hangs). Three checks:
- every decisive run recorded in fw-lab's findings.jsonl (no boot: its recorded answers);
- the shapes the planner judges in its MMIO case files (tests/planner/cases/), booted;
- hypothesis-generated VMs (machine, firmware set, CPU model and vendor, phys-bits, pdpe1gb,
  RAM, BAR sizes and count, X-PciMmio64Mb; guest-phys-bits where the QEMU has it), booted.
Boots run two at a time (`fwlab.run_many(..., jobs=2)`); the whole module stays within a few
minutes on two cores: edk2 2022.11 at 46+ bits with 1 GiB pages (about 40 s a boot) only where
a planner case needs it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pvefix.planner.bar_verdict import GiB, Shape, verdict
from pvefix.planner.mmio import PVE_Q35_BRIDGES, i440fx_bridges
from tests.planner.mmio_shapes import planner_shapes
from tests.planner.test_bar_verdict import PAD_RUNS
from tests.shared import NEEDS_SHARED, SHARED, fwlab_module, pve_q35_bridges

pytestmark = pytest.mark.conformance

OUTCOME = {"placed": "fits", "not-placed": "does-not-fit", "no-boot-timeout": "firmware-hangs",
           "qemu-refused": "qemu-refuses"}
SETS = {("ovmf", "2022.11"): "edk2-2022.11", ("ovmf", "2025.02"): "edk2-2025.02",
        ("seabios", "1.16.2"): "seabios-1.16.2", ("seabios", "1.16.3"): "seabios-1.16.3"}
UNITS = {"M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
PVE_BRIDGES = PVE_Q35_BRIDGES  # pci.0-pci.3 of qemu-server's pve-q35-4.0.cfg


@pytest.fixture(scope="module")
def fwlab() -> ModuleType:
    return fwlab_module()  # type: ignore[no-any-return]


def _size(text: str) -> int:
    return int(text[:-1]) * UNITS[text[-1]]


def _bars(spec: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in spec.split("+"):
        n, size = part.split("x")
        out += [_size(size)] * int(n)
    return tuple(out)


def _spec(bars: tuple[int, ...]) -> str:
    sizes = sorted(set(bars), reverse=True)
    return "+".join(f"{bars.count(s)}x{s >> 30}G" for s in sizes)


def firmware_set(shape: Shape) -> str | None:
    """fw-lab's firmware set for the shape's build (`4.2025.02-4` is edk2 2025.02), if any."""
    pattern = r"(20\d\d\.\d\d)" if shape.firmware == "ovmf" else r"(\d+\.\d+\.\d+)"
    m = re.search(pattern, shape.version or "")
    return SETS.get((shape.firmware, m.group(1))) if m else None


def _machine(machine: str) -> str:
    """The machine for fw-lab's QEMU: the family, pinned to 7.0 where the shape is pinned at or
    before it (AMD's RAM move above 1 TiB starts after 7.0); a newer pin is what the family
    does today (fw-lab's QEMU may not know it)."""
    family = "q35" if "q35" in machine else "pc"
    m = re.search(r"-(\d+)\.(\d+)", machine)
    if m and (int(m.group(1)), int(m.group(2))) <= (7, 0):
        return f"pc-{'q35' if family == 'q35' else 'i440fx'}-7.0"
    return family


def config(shape: Shape, cpu: str = "qemu64", label: str = "") -> dict[str, Any]:
    """The fw-lab run that stands for `shape` (vendor, width and 1 GiB pages set explicitly); on
    q35 as Proxmox lays it out (`proxmox_layout`)."""
    assert shape.vendor is not None
    cfg: dict[str, Any] = {
        "firmware_set": firmware_set(shape), "machine": _machine(shape.machine),
        "cpu": cpu, "vendor": shape.vendor, "phys_bits": str(shape.phys_bits),
        "pdpe1gb": shape.pdpe1gb, "ram": f"{shape.ram >> 30}G", "bars": _spec(shape.bars),
        "dev": "testdev", "label": label,
        "timeout": 90 if firmware_set(shape) == "edk2-2022.11" and shape.pdpe1gb else 45,
    }
    if shape.mmio64_mb is not None:
        cfg["mmio64_mb"] = str(shape.mmio64_mb)
    if shape.guest_phys_bits:
        cfg["cpu_extra"] = [f"guest-phys-bits={shape.guest_phys_bits}"]
    if "q35" in cfg["machine"]:
        cfg["topo"], cfg["qemu_extra"] = proxmox_layout(shape)
    else:
        cfg["qemu_extra"] = i440fx_layout(shape)
    return cfg


def i440fx_layout(shape: Shape) -> list[str]:
    """The pci-bridges qemu-server adds to an i440fx VM (pci.1 at 1e.0, pci.2 at 1f.0, pci.3
    at 05.0: the shape's padded buses) and the balloon where the shape has other 64-bit BARs
    (on the root bus, at a slot QEMU picks: fw-lab's stand-ins take the first ones)."""
    extra: list[str] = []
    for n, slot in list(zip((1, 2, 3), (0x1e, 0x1f, 0x5), strict=True))[:shape.padded_buses]:
        extra += ["-device", f"pci-bridge,id=pci.{n},chassis_nr={n},bus=pci.0,addr={slot:#x}"]
    if shape.others64:
        extra += ["-device", "virtio-balloon-pci,bus=pci.0"]
    return extra


def fixed_layout_pads(shape: Shape) -> int:
    """The hotplug-capable bridges fw-lab's `--topo proxmox` plus pve-q35-4.0.cfg's pci-bridges
    leave without a device when the shape's BARs take root ports 1..n."""
    return PVE_BRIDGES + max(0, 4 - len(shape.bars))


def proxmox_layout(shape: Shape) -> tuple[str, list[str]]:
    """`--topo proxmox` (qemu-server's four fixed root ports, one device each from port 1) with
    pve-q35-4.0.cfg's DMI bridge and SHPC pci-bridges pci.0-pci.3, the balloon on pci.0 where
    the shape has other 64-bit BARs, and one more empty root port for each padded bus the shape
    has beyond that layout's (GPUs on hostpci4 and up leave fixed ports empty)."""
    extra = pve_q35_bridges()
    if shape.others64:
        extra += ["-device", "virtio-balloon-pci,bus=pci.0,addr=0x3"]
    more = shape.padded_buses - fixed_layout_pads(shape)
    assert more >= 0, f"{shape}: fewer padded buses than Proxmox's q35 layout has"
    for i in range(more):
        extra += ["-device", f"pcie-root-port,id=empty{i},bus=pcie.0,addr={0x18 + i:#x},"
                             f"chassis={40 + i},slot={40 + i}"]
    return "proxmox", extra


def _judge(fwlab: ModuleType, cases: list[tuple[str, Shape, str]]) -> None:
    """Boot every case (two at a time) and compare. A disagreement is booted once more, alone:
    under a loaded machine fw-lab has, rarely, read a VM whose firmware had placed nothing
    ("resource allocation failed") that placed every BAR when booted again; a verdict that
    the second boot still contradicts fails the test."""
    cases = [c for c in cases if verdict(c[1]).outcome != "must-be-measured"]  # no claim
    configs = [config(s, cpu, label) for label, s, cpu in cases]
    got = fwlab.run_many(configs, jobs=2)
    wrong = []
    for (label, shape, _), cfg, fw in zip(cases, configs, got, strict=True):
        assert fw["outcome"] != "error", f"{label}: fw-lab: {fw.get('why')}"
        mine = verdict(shape)
        if OUTCOME[fw["outcome"]] != mine.outcome:
            again = fwlab.run(cfg)
            if OUTCOME.get(again["outcome"]) == mine.outcome:
                print(f"{label}: first boot {fw['outcome']} ({fw.get('why')}), second boot"
                      f" {again['outcome']} as pvefix says")
                continue
            wrong.append(f"{label} {shape}: firmware {fw['outcome']} ({fw.get('why')},"
                         f" {fw.get('bars_span_h')}), again {again['outcome']}; pvefix"
                         f" {mine.outcome} ({mine.why})")
    assert not wrong, "\n".join(wrong)


def _recorded() -> Iterator[tuple[str, Shape, dict[str, Any]]]:
    path = SHARED / "fw-lab" / "findings.jsonl"
    if not path.is_file():
        pytest.skip(f"{NEEDS_SHARED}: {path} is absent")
    for line in path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        run = json.loads(line)
        for fwset, expect in run["expect"].items():
            kind, version = fwset.split("-")
            vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(expect.get("vendor", ""))
            if vendor is None:  # QEMU refused: no vCPU to ask; the model's (TCG) or the one set
                asked = run.get("vendor")
                vendor = asked if asked in ("intel", "amd") else (
                    "intel" if run.get("cpu", "kvm64") in ("kvm64", "Skylake-Server") else "amd")
            phys = run.get("phys_bits")
            bits = expect.get("guest_phys_bits") or (int(phys) if phys and phys.isdigit() else 40)
            pdpe1gb = expect.get("pdpe1gb")
            if pdpe1gb is None:
                pdpe1gb = run.get("pdpe1gb", run.get("cpu") in ("Skylake-Server", "max"))
            yield run["label"], Shape(
                "ovmf" if kind == "edk2" else "seabios", version, vendor, bits, bool(pdpe1gb),
                _size(run.get("ram", "2G")),
                _bars(run.get("bars", "1x32G")), run.get("machine", "q35"),
                mmio64_mb=int(run["mmio64_mb"]) if run.get("mmio64_mb") else None,
            ), expect


def test_every_recorded_run_of_fw_lab() -> None:
    """FINDINGS.md's 180 decisive runs (claims 1-17), as findings.jsonl records them: the same
    outcome, and the same number of BARs placed."""
    wrong = []
    for label, shape, expect in _recorded():
        mine = verdict(shape)
        want = OUTCOME[expect["outcome"]]
        placed = expect.get("bars_assigned")
        if mine.outcome != want or (placed is not None and mine.placed != placed):
            wrong.append(f"{label} {shape.firmware} {shape.version}: recorded {want}"
                         f" ({placed} placed), pvefix {mine.outcome} ({mine.why})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.timeout(900)  # about 16 boots, two at a time; a hang costs its 45 s timeout
def test_the_planner_cases_boot_as_judged(fwlab: ModuleType) -> None:
    """Each planner MMIO case's VM, as it is and with the cpu line the plan writes, booted on
    the firmware build its host facts name (cases whose build fw-lab has; guest-phys-bits only
    where this QEMU has it)."""
    guest_bits = _supports_guest_phys_bits(fwlab)
    seen: set[Shape] = set()
    cases = []
    for label, shape in planner_shapes():
        if (firmware_set(shape) is None or shape in seen or max(shape.bars) < 8 * GiB
                or (shape.guest_phys_bits and not guest_bits) or _slow(shape)
                or ("q35" in shape.machine and shape.padded_buses < fixed_layout_pads(shape))):
            continue
        seen.add(shape)
        cases.append((label, shape, "qemu64"))
    assert cases, "no planner case names a firmware build fw-lab has"
    _judge(fwlab, cases)


def _slow(shape: Shape) -> bool:
    """edk2 2022.11 at 46+ bits with 1 GiB pages and much RAM: 40 s a boot on an idle machine,
    325 s on this loaded one (1.5 TiB, 52 bits: placed as pvefix says, 112-114 TiB); the
    recorded runs D08, A04, A05 hold the same rules."""
    return (firmware_set(shape) == "edk2-2022.11" and shape.pdpe1gb and shape.phys_bits >= 46
            and shape.ram > 64 * GiB)


def _supports_guest_phys_bits(fwlab: ModuleType) -> bool:
    probe = fwlab.run({"cpu": "qemu64", "cpu_extra": ["guest-phys-bits=40"], "bars": "1x1G",
                       "firmware_set": "seabios-1.16.3", "timeout": 20})
    return probe["outcome"] != "qemu-refused"


@st.composite
def shapes(draw: st.DrawFn, guest_bits: bool) -> tuple[str, Shape, str]:
    kind, version = draw(st.sampled_from(sorted(SETS)))
    cpu = draw(st.sampled_from(["qemu64", "kvm64", "x86-64-v2-AES", "Skylake-Server"]))
    bits = draw(st.sampled_from([38, 39, 40, 40, 41, 42, 44, 46, 48]))
    pdpe1gb = draw(st.booleans())
    if version == "2022.11" and pdpe1gb and bits >= 46:
        bits = 45  # 40 s a boot there; the planner cases carry the few that need it
    big = draw(st.sampled_from([16, 32, 64, 128, 256]))
    bars = tuple(sorted(draw(st.lists(st.sampled_from([big, big, max(big // 2, 16)]),
                                      min_size=1, max_size=8)), reverse=True))
    ram = draw(st.sampled_from([2, 8, 64, 200, 480, 800, 900, 1500]))
    mmio = None
    if kind == "ovmf" and draw(st.integers(0, 3)) == 0:
        mmio = draw(st.sampled_from([32, 64, 128, 256, 512, 1024])) << 10
    machine = draw(st.sampled_from(["q35", "pc"]))
    # Proxmox's q35: 4 pci-bridges and the fixed root ports no GPU holds (GPUs on hostpci4 and
    # up leave theirs empty); i440fx: none modelled
    high = draw(st.integers(0, min(len(bars), 4)))
    padded = (PVE_BRIDGES + 4 - min(len(bars), 4) + high if machine == "q35"
              else len(i440fx_bridges(None, {})))  # Proxmox's pci.1 and pci.2
    shape = Shape(kind, version, draw(st.sampled_from(["intel", "amd"])), bits, pdpe1gb,
                  ram * GiB, tuple(b * GiB for b in bars), machine,
                  draw(st.sampled_from([None, 40, 44])) if guest_bits else None, mmio,
                  draw(st.sampled_from([0, 1 << 20])), padded)
    return f"gen-{kind}-{version}", shape, cpu


@pytest.mark.timeout(900)  # 24 boots, two at a time
def test_generated_vms_boot_as_judged(fwlab: ModuleType) -> None:
    """12 examples of two generated VMs each (one pair boots at a time, on both cores; the first
    pair is hypothesis's simplest); pvefix's verdict equals the firmware's for each."""
    guest_bits = _supports_guest_phys_bits(fwlab)

    @settings(max_examples=12, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(shapes(guest_bits), min_size=2, max_size=2))
    def run(cases: list[tuple[str, Shape, str]]) -> None:
        _judge(fwlab, cases)

    run()


@pytest.mark.timeout(600)  # 18 boots of a few seconds each, two at a time
def test_the_hotplug_padding_runs_boot_as_recorded(fwlab: ModuleType) -> None:
    """tests/planner/hotplug_pad_runs.json booted again: each run gives what it recorded (the
    model is held to the same rows without booting in tests/planner/test_bar_verdict.py)."""
    rows = json.loads(PAD_RUNS.read_text())["runs"]
    configs = []
    for row in rows:
        cfg = {k: v for k, v in row["run"].items() if k != "pve_bridges"}
        if row["run"]["pve_bridges"]:
            cfg["qemu_extra"] = pve_q35_bridges()
        configs.append(cfg)
    wrong = []
    for row, cfg, fw in zip(rows, configs, fwlab.run_many(configs, jobs=2), strict=True):
        recorded = (row["outcome"], row["bars_assigned"])
        if fw.get("bars_assigned") == 0 < row["bars_assigned"]:
            fw = fwlab.run(cfg)  # read before OVMF turned decoding on (a loaded machine)
        if (fw["outcome"], fw.get("bars_assigned")) != recorded:
            wrong.append(f"{row['run']['label']}: recorded {row['outcome']} "
                         f"{row['bars_assigned']}, now {fw['outcome']} "
                         f"{fw.get('bars_assigned')} ({fw.get('why')})")
    assert not wrong, "\n".join(wrong)
