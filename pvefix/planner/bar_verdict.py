"""Does the firmware place every large 64-bit BAR? One verdict for one VM shape (pure).

`verdict(Shape(...))` answers for a machine type, a firmware build (OVMF/edk2 or SeaBIOS, and
its version), the vCPU's vendor, phys-bits, 1 GiB pages and guest-phys-bits, the RAM, the BARs
and X-PciMmio64Mb: `fits`, `does-not-fit`, `qemu-refuses`, `firmware-hangs`, or
`must-be-measured` where the answer depends on a behaviour that the firmware version given does
not pin down. The planner (rules/bar_space.py) and the firmware conformance test
(tests/conformance/test_firmware_window.py, judged by ../shared/fw-lab) both use it.

Each rule is read from the sources and checked against fw-lab's runs (../shared/fw-lab/
FINDINGS.md, claim numbers in brackets):
- QEMU hw/i386/pc.c pc_memory_init: RAM below 4 GiB is at most 2 GiB on q35 (2.75 GiB when all
  RAM fits there), 3 GiB on i440fx (3.5 GiB); the rest starts at 4 GiB, or at 1 TiB for an AMD
  vCPU when the highest address used would reach the HyperTransport hole at 1012 GiB (machine
  types after 7.0) [12, 13]. QEMU refuses to start ("phys-bits too low") when the RAM's end,
  rounded to 1 GiB, plus the 64-bit PCI hole (32 GiB on q35, 2 GiB on i440fx) passes the
  vCPU's phys-bits [11]. For an AMD vCPU with phys-bits >= 40 it reserves 1012 GiB-1 TiB.
- edk2 OvmfPkg/Library/PlatformInitLib/MemDetect.c: PlatformGetFirstNonAddress (the classic
  window: 32 GiB or X-PciMmio64Mb, up to 16 TiB, above RAM, aligned to its size) [7];
  PlatformAddressWidthFromCpuid (the CPUID width is trusted when >= 41, 40 on AMD, 36/39 on
  Intel, or whenever guest-phys-bits is reported (edk2 >= 202408), which also caps it; then
  capped at 46 bits (47 on edk2 2022.11) and at 40 without 1 GiB pages) [1, 2, 3];
  PlatformDynamicMmioWindow (1/8 of the address space at its top when larger than the classic
  window and above it; moved below the AMD HyperTransport reservation on 2025.02) [4, 5, 6]. A
  trusted width whose classic window does not fit under it hangs OVMF [8]. From edk2 2025.02
  (Debian's build; upstream edk2-stable202505, commit 9ac1704af6) a given X-PciMmio64Mb is the
  exact window, before it only a minimum [6].
- SeaBIOS src/fw/pciinit.c pci_bios_map_devices and src/fw/paravirt.c physbits: 1.16.2 puts the
  window just above RAM, unchecked; 1.16.3 moves it to the top of a trusted width (capped at 46
  bits), 1/8 of it with RAM above 4 GiB, one window lower when that overlaps an e820 entry, and
  aligns root-port windows to 1/2048 of the top with RAM above 4 GiB [9, 10].
Fact by fact, with the fw-lab runs that decide it (../shared/fw-lab/findings.jsonl; every one
is replayed by the conformance test, outcome and BAR count):
- An X-PciMmio64Mb window above 2 TiB and below 16 TiB is "must be measured": on edk2 2025.02
  4 TiB and 8 TiB windows left most BARs unplaced where 2 TiB and 16 TiB (D07) placed them
  all (runs z-8x128G-4194304, z-8x256G-8388608, z-2x1024G-4194304, x-2G-2097152 of this
  change; the rule behind it is not known).
- X-PciMmio64Mb is the exact window from edk2 2025.02 (a 64 GiB value replaced the 8 TiB
  dynamic window: D08), a minimum on 2022.11 (D08, F05, G15); 2025.02 is the boundary this
  model uses (Proxmox: pve-edk2-firmware 4.2025.02; versions between 2022.11 and 2025.02 are
  not measured, and where the two behaviours differ the verdict is "must be measured"). A
  value that does not fit a trusted width hangs OVMF: D06, D09, D12, G04, G05; with an
  untrusted width the BARs land above the vCPU's reach: D03.
- A trusted width whose RAM already passes OVMF's cap also hangs: 1500 GiB of RAM, phys-bits
  46 without 1 GiB pages (AMD), on 2022.11 and 2025.02 (runs hang-edk2-2022.11 and
  hang-edk2-2025.02 of this change, 60 s timeout; the planner case
  ovmf-phys-host-without-pdpe1gb says "will not boot").
- guest-phys-bits caps OVMF's width (edk2 >= 202408): from the edk2 source; Debian 12's QEMU
  7.2 has no guest-phys-bits, so fw-lab could not boot it here.
- OVMF's 1 GiB-page cap (40 bits): A02/A03, A09/A10, A11-A14, B03/B04, B06/B08; trust rule:
  A08, A15, A21-A25, B12; 46-bit cap (47 on 2022.11): A04, A05, A17, A19, A20; 1/8 window:
  A01, A03, A06, A21, A26, B14.
- edk2 2025.02, AMD vCPU at 40 bits: the window at 768-896 GiB (A01, H01, H02, B16) and not
  placed over 800 GiB of RAM (F06); 1012 GiB-1 TiB unusable in a classic window (D05, D10).
- SeaBIOS 1.16.2 just above RAM, unchecked (E01-E15, G11); 1.16.3 at the top of a trusted
  width, capped at 46 (E07-E10, E15, G01-G03, G13, F16), broken for AMD at 40 bits (E03-E05,
  E14, F07); X-PciMmio64Mb means nothing to SeaBIOS (H05).
- QEMU's start check counts q35's 32 GiB hole: F01-F04, F14; AMD RAM moved above 1 TiB: F08,
  F09, F10; RAM below 4 GiB: F11, F12.
- Hotplug padding: edk2 OvmfPkg PciHotPlugInitDxe GetResourcePadding reserves, for each
  hotplug-capable bridge QEMU gives no reservation hint (a PCIe root port, an SHPC pci-bridge),
  1/256 of a 64-bit window above 32 GiB rounded up to a power of two; a bridge with a device
  takes at least that. Measured on edk2 2022.11 and 2025.02 with Proxmox's layout (four fixed
  root ports, four pci-bridges): tests/planner/hotplug_pad_runs.json, runs P1-P19 (1 GiB per
  bridge in a 130-132 GiB window, none in a 32 GiB one; the GPU's BAR is the one dropped).
  Other edk2 builds: not measured, so where it decides, "must be measured". SeaBIOS 1.16.3
  gives each bridge a 64-bit window of 1/2048 of the top when RAM lies above 4 GiB (P11, P12)
  and nothing in the 64-bit window otherwise (P9); that is q35's: i440fx's pci-bridges with
  RAM above 4 GiB are not measured, so there "must be measured".
A BAR counts as placed as fw-lab counts it: programmed, ending within the vCPU's phys-bits and
not overlapping RAM. Not modelled: 5-level paging (OVMF built with PcdUse5LevelPageTable),
memory hotplug (`etc/reserved-memory-end`), BARs that fit below 4 GiB.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from typing import Literal

GiB = 1 << 30
TiB = 1 << 40
U64 = (1 << 64) - 1
HT_START = 1012 * GiB  # AMD HyperTransport reservation, up to 1 TiB
CLASSIC = 32 * GiB  # OVMF's PcdPciMmio64Size
MMIO64_MB_MAX = 0x1000000  # OVMF ignores a larger X-PciMmio64Mb (16 TiB)
# X-PciMmio64Mb windows above 2 TiB and below 16 TiB: fw-lab runs on edk2 2025.02 (2 GiB RAM,
# 46 bits, 1 GiB pages) placed 1 of 8 256 GiB BARs in 4 TiB, none of 8 x 128 GiB in 4 TiB, none
# of 8 x 256 GiB in 8 TiB, yet 2 x 1 TiB in 4 TiB and 8 x 128 GiB in 16 TiB (D07): the rule is
# not known, so such a window is "must be measured".
UNMEASURED_MMIO64 = (2 * TiB, 16 * TiB)

Kind = Literal["ovmf", "seabios"]
Vendor = Literal["intel", "amd"]
Outcome = Literal["fits", "does-not-fit", "qemu-refuses", "firmware-hangs", "must-be-measured"]


@dataclass(frozen=True)
class Shape:
    """One VM as the firmware sees it. `version`: the edk2 release (`2025.02`, or a package
    version holding it: `4.2025.02-4`, `2022.11-6+deb12u2`) or the SeaBIOS release (`1.16.3`);
    None when not known. `vendor` None: not known. `guest_phys_bits`: what CPUID 0x80000008
    reports in EAX[23:16] (None or 0: nothing)."""

    firmware: Kind
    version: str | None
    vendor: Vendor | None
    phys_bits: int
    pdpe1gb: bool
    ram: int
    bars: tuple[int, ...]
    machine: str = "q35"
    guest_phys_bits: int | None = None
    mmio64_mb: int | None = None
    others64: int = 0  # the 64-bit window space the VM's other devices take (virtio functions)
    padded_buses: int = 0  # hotplug-capable bridges the firmware pads (Proxmox q35: hotplug_buses)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    why: str
    placed: int | None = None  # BARs placed (None: QEMU refused or the firmware hangs)
    window: tuple[int, int] | None = None  # the firmware's 64-bit window, [start, end)
    fw_bits: int | None = None  # the width the firmware uses (None: it sizes the space itself)
    ram_end: int = 0
    measure: str | None = None  # must-be-measured: what the answer depends on


@dataclass(frozen=True)
class _Behaviour:
    """What differs between firmware versions; each field names the edk2/SeaBIOS change."""

    cap: int = 46  # OVMF 4-level cap: 47 on edk2 2022.11, 46 on 2025.02
    ht_aware: bool = True  # OVMF keeps its window out of the AMD HT reservation (2025.02)
    exact_mmio64: bool = True  # OVMF takes X-PciMmio64Mb as the exact window (2025.02)
    guest_bits: bool = True  # OVMF reads guest-phys-bits (edk2 >= 202408)
    top: bool = True  # SeaBIOS moves the window to the top of a trusted width (1.16.3)
    misalign: bool = True  # SeaBIOS 1.16.3 aligns root-port windows to top/2048 (fixed after)
    pad64: bool = True  # OVMF pads each hotplug bridge in the 64-bit window (2022.11, 2025.02)


_WHAT = {
    "cap": "OVMF's width cap (47 bits on edk2 2022.11, 46 on 2025.02)",
    "ht_aware": "whether OVMF keeps its window below AMD's 1012 GiB reservation (edk2 2025.02)",
    "exact_mmio64": "whether OVMF takes X-PciMmio64Mb as the exact window (edk2 2025.02) or a"
    " minimum (2022.11)",
    "guest_bits": "whether OVMF reads guest-phys-bits (edk2 202408 and later)",
    "top": "whether SeaBIOS moves the window to the top of the address space (1.16.3)",
    "misalign": "how SeaBIOS aligns root-port windows (1.16.3)",
    "pad64": "whether OVMF reserves 64-bit window space for each hotplug-capable bridge (empty"
    " root ports, pci-bridges; measured on edk2 2022.11 and 2025.02 only)",
    "vendor": "the vCPU's vendor (AMD or Intel)",
}


def _edk2_options(version: str | None) -> dict[str, tuple[object, ...]]:
    m = re.search(r"(20\d\d)\.(\d\d)", version or "")
    both = (False, True)
    if m is None:
        return {"cap": (46, 47), "ht_aware": both, "exact_mmio64": both, "guest_bits": both,
                "pad64": both}
    ym = (int(m.group(1)), int(m.group(2)))
    if ym >= (2025, 2):  # later releases are taken to do what 2025.02 does (edk2's newest
        # PciHotPlugInit.c still pads)
        return {"cap": (46,), "ht_aware": (True,), "exact_mmio64": (True,), "guest_bits": (True,),
                "pad64": (True,)}
    if ym == (2022, 11):
        return {"cap": (47,), "ht_aware": (False,), "exact_mmio64": (False,),
                "guest_bits": (False,), "pad64": (True,)}
    if ym < (2022, 11):  # not measured: what 2022.11 does is the nearest known, and not proven
        return {"cap": (46, 47), "ht_aware": both, "exact_mmio64": both, "guest_bits": (False,),
                "pad64": both}
    return {"cap": (46, 47), "ht_aware": both, "exact_mmio64": both,
            "guest_bits": (True,) if ym >= (2024, 8) else (False,), "pad64": both}


def _seabios_options(version: str | None) -> dict[str, tuple[object, ...]]:
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", version or "")
    if m is None:
        return {"top": (False, True), "misalign": (False, True)}
    v = tuple(int(x) for x in m.groups())
    if v <= (1, 16, 2):
        return {"top": (False,), "misalign": (False,)}
    if v == (1, 16, 3):
        return {"top": (True,), "misalign": (True,)}
    return {"top": (True,), "misalign": (False, True)}


def version_known(firmware: Kind, version: str | None) -> bool:
    """Whether `version` pins every behaviour this model tells apart (a measured build)."""
    opts = _edk2_options(version) if firmware == "ovmf" else _seabios_options(version)
    return all(len(v) == 1 for v in opts.values())


def verdict(shape: Shape) -> Verdict:
    """The firmware's answer for `shape`; `must-be-measured` where versions or the vendor that
    are not known would give different answers."""
    opts = _edk2_options(shape.version) if shape.firmware == "ovmf" else _seabios_options(
        shape.version)
    vendors: tuple[Vendor, ...] = (shape.vendor,) if shape.vendor else ("intel", "amd")
    names = list(opts)
    results: list[tuple[dict[str, object], Verdict]] = []
    for vendor in vendors:
        for combo in itertools.product(*(opts[n] for n in names)):
            chosen = dict(zip(names, combo, strict=True))
            b = replace(_Behaviour(), **chosen)  # type: ignore[arg-type]
            v = _one(replace(shape, vendor=vendor), b)
            results.append(({**chosen, "vendor": vendor}, v))
    outcomes = {v.outcome for _, v in results}
    if len(outcomes) == 1:
        return results[0][1]
    deciding = [k for k in [*names, "vendor"]
                if len({str(c[k]) for c, _ in results}) > 1
                and _matters(results, k)]
    what = "; ".join(_WHAT[k] for k in deciding) or "the firmware version"
    answers = ", ".join(sorted(outcomes))
    return Verdict(
        "must-be-measured",
        f"the answer ({answers}) depends on {what}, which the facts read do not settle",
        ram_end=results[0][1].ram_end, measure=what)


def combine(labelled: list[tuple[str, Verdict]]) -> Verdict:
    """One verdict for several readings of what is not known (each labelled, e.g. "with 1 GiB
    pages"): theirs when they agree, else `must-be-measured` saying what decides."""
    outcomes = {v.outcome for _, v in labelled}
    if len(outcomes) == 1:
        return labelled[0][1]
    measure = "; ".join(
        [f"{label}: {v.outcome}" for label, v in labelled]
        + [v.measure for _, v in labelled if v.measure])
    return Verdict("must-be-measured", f"the answer differs: {measure}",
                   ram_end=labelled[0][1].ram_end, measure=measure)


def _matters(results: list[tuple[dict[str, object], Verdict]], key: str) -> bool:
    """Whether flipping `key` alone changes an outcome somewhere among `results`."""
    by_rest: dict[str, set[str]] = {}
    for chosen, v in results:
        rest = repr(sorted((k, str(x)) for k, x in chosen.items() if k != key))
        by_rest.setdefault(rest, set()).add(v.outcome)
    return any(len(o) > 1 for o in by_rest.values())


@dataclass(frozen=True)
class _Layout:
    low: int  # RAM below 4 GiB
    above_start: int
    above: int  # RAM above 4 GiB
    ht: bool  # QEMU reserves 1012 GiB-1 TiB
    refused: str | None

    @property
    def end(self) -> int:
        return self.above_start + self.above if self.above else self.low

    def ram(self) -> list[tuple[int, int]]:
        out = [(0, self.low)]
        if self.above:
            out.append((self.above_start, self.above_start + self.above))
        return out


def _align(x: int, a: int) -> int:
    return ((x + a - 1) & ~(a - 1)) & U64


def _q35(machine: str) -> bool:
    return "q35" in machine


def _machine_after_7_0(machine: str) -> bool:
    m = re.search(r"-(\d+)\.(\d+)", machine)
    return m is None or (int(m.group(1)), int(m.group(2))) > (7, 0)


def layout(shape: Shape) -> _Layout:
    """Where QEMU puts the RAM, and whether it refuses to start (hw/i386/pc.c, pc_q35/pc_piix)."""
    q35 = _q35(shape.machine)
    lowmem = (2 * GiB if shape.ram >= 0xB0000000 else 0xB0000000) if q35 else (
        3 * GiB if shape.ram >= 0xE0000000 else 0xE0000000)
    low = min(shape.ram, lowmem)
    above = shape.ram - low
    hole = 32 * GiB if q35 else 2 * GiB
    amd = shape.vendor == "amd" and _machine_after_7_0(shape.machine)

    def max_used(start: int) -> int:
        return _align(start + above, GiB) + hole - 1

    start = 4 * GiB
    if amd and max_used(start) >= HT_START:
        start = TiB
    refused = None
    if max_used(start) > (1 << shape.phys_bits) - 1:
        refused = (f"Address space limit {(1 << shape.phys_bits) - 1:#x} < {max_used(start):#x}"
                   f" phys-bits too low ({shape.phys_bits})")
    return _Layout(low, start, above, amd and shape.phys_bits >= 40, refused)


def trusted(bits: int, vendor: Vendor | None) -> bool:
    """OVMF's and SeaBIOS 1.16.3's rule for believing the CPUID width (FINDINGS claim 2)."""
    if bits >= 41:
        return True
    return bits in (36, 39) if vendor == "intel" else bits == 40


def _one(shape: Shape, b: _Behaviour) -> Verdict:
    lay = layout(shape)
    if lay.refused:
        return Verdict("qemu-refuses", f"QEMU refuses to start: {lay.refused}", ram_end=lay.end)
    if shape.firmware == "ovmf":
        return _ovmf(shape, b, lay)
    return _seabios(shape, b, lay)


def _pow2_floor(x: int) -> int:
    return 1 << (x.bit_length() - 1)


def _ovmf_bits(shape: Shape, b: _Behaviour) -> int | None:
    """The width OVMF uses, or None when it does not trust the CPUID one."""
    bits = shape.phys_bits
    gpb = shape.guest_phys_bits if b.guest_bits else None
    if not (gpb or trusted(bits, shape.vendor)):
        return None
    if gpb and bits > gpb:
        bits = gpb
    bits = min(bits, b.cap)
    if not shape.pdpe1gb and bits > 40:
        bits = 40
    return bits


def _ovmf(shape: Shape, b: _Behaviour, lay: _Layout) -> Verdict:
    size, given = CLASSIC, False
    if shape.mmio64_mb is not None and shape.mmio64_mb <= MMIO64_MB_MAX:
        size, given = shape.mmio64_mb << 20, True
    if size == 0:
        return Verdict("does-not-fit", "X-PciMmio64Mb=0 disables OVMF's 64-bit window",
                       placed=0, ram_end=lay.end)
    first = max(4 * GiB, lay.end)
    size = _align(size, GiB)
    base = _align(_align(first, GiB), _pow2_floor(size))
    bits = _ovmf_bits(shape, b)
    how = "classic"
    if bits is not None:
        space, dyn = 1 << bits, 1 << (bits - 3)
        if not (b.exact_mmio64 and given) and size < dyn and base + dyn < space:
            base, size, how = space - dyn, dyn, "dynamic (1/8 of the address space)"
            if b.ht_aware and lay.ht and base < TiB and base + size > HT_START:
                base = (HT_START - size) & ~(size - 1)
        elif given and UNMEASURED_MMIO64[0] < size < UNMEASURED_MMIO64[1]:
            return Verdict(
                "must-be-measured",
                f"OVMF's X-PciMmio64Mb window of {_h(size)} is one fw-lab saw place every BAR and"
                " none (edk2 2025.02: 2 TiB and 16 TiB windows placed 8 BARs, 4 TiB and 8 TiB"
                " ones none): not modelled", fw_bits=bits, window=(base, base + size),
                ram_end=lay.end, measure="a 4-8 TiB X-PciMmio64Mb window (boot it)")
        elif base + size > space:
            return Verdict(
                "firmware-hangs",
                f"OVMF's {_h(size)} classic window at {_h(base)} does not fit its {bits}-bit"
                " address space: OVMF hangs, the VM never boots",
                fw_bits=bits, window=(base, base + size), ram_end=lay.end)
    hi = base + size
    if b.ht_aware and lay.ht and base < TiB and hi > HT_START:
        hi = max(base, HT_START)
    if any(base < e and base + size > s for s, e in lay.ram()) or _pack(
            shape.bars, base, base + size, 1 << 64) < len(shape.bars):
        placed = 0  # PciHostBridgeDxe: a window overlapping RAM or too small places none
    else:
        placed = _pack(shape.bars, base, hi, 1 << shape.phys_bits)
    n = len(shape.bars)
    pad = hotplug_pad(size) if b.pad64 else 0
    extras = ([shape.others64] if shape.others64 else []) + [pad] * (
        shape.padded_buses if pad else 0)
    if placed == n and extras and _pack(
            (*shape.bars, *extras), base, hi, 1 << shape.phys_bits) < n + len(extras):
        return Verdict(
            "does-not-fit", f"OVMF's {how} window {_h(base)}-{_h(base + size)} holds the"
            f" {f'{n} BARs' if n > 1 else 'BAR'} with no room left for"
            f" {_others(shape, pad)}: OVMF then drops a GPU's BAR",
            n - 1, (base, base + size), bits, lay.end)
    return _placed_verdict(shape, placed, (base, base + size), bits, lay,
                           f"OVMF's {how} window")


def hotplug_pad(window: int) -> int:
    """The 64-bit prefetchable space OVMF reserves for each hotplug-capable bridge (a PCIe root
    port or an SHPC pci-bridge) that QEMU gives no reservation hint: the window's 1/256 rounded
    up to a power of two, and none for a window of 32 GiB or less (edk2 OvmfPkg
    PciHotPlugInitDxe GetResourcePadding; the bridge's window is at least this, an empty one
    exactly this). fw-lab runs in tests/planner/hotplug_pad_runs.json."""
    if window <= CLASSIC:
        return 0
    return 1 << (max(window // 256, 1) - 1).bit_length()


def _others(shape: Shape, pad: int) -> str:
    parts = []
    if shape.others64:
        parts.append("the VM's other 64-bit BARs (virtio functions)")
    if pad and shape.padded_buses:
        amount = _h(pad) if pad >= GiB else f"{pad >> 20} MiB"
        parts.append(f"the {amount} OVMF reserves for each of its {shape.padded_buses}"
                     " hotplug-capable bridges (Proxmox's pci-bridges and empty root ports)")
    return " and ".join(parts)


def _pack(bars: tuple[int, ...], lo: int, hi: int, limit: int) -> int:
    """How many BARs fit [lo, hi) below `limit`, largest first, each aligned to its size."""
    cursor, placed = lo, 0
    for size in sorted(bars, reverse=True):
        at = _align(cursor, size)
        if at + size <= min(hi, limit):
            placed += 1
            cursor = at + size
    return placed


def _placed_verdict(shape: Shape, placed: int, window: tuple[int, int], bits: int | None,
                    lay: _Layout, what: str) -> Verdict:
    n = len(shape.bars)
    where = f"{what} {_h(window[0])}-{_h(window[1])}"
    if placed == n:
        return Verdict("fits", f"{where} holds all {n} BARs", placed, window, bits, lay.end)
    return Verdict("does-not-fit", f"{where}: {placed} of {n} BARs placed", placed, window, bits,
                   lay.end)


def _h(x: int) -> str:
    if x >= 1 << 63:
        return f"-{_h((1 << 64) - x)}(wrapped)"
    if x >= TiB and x % TiB == 0:
        return f"{x >> 40} TiB"
    return f"{x >> 30} GiB" if x % GiB == 0 else f"{x / GiB:.2f} GiB"


def _seabios(shape: Shape, b: _Behaviour, lay: _Layout) -> Verdict:
    bits = shape.phys_bits if b.top and trusted(shape.phys_bits, shape.vendor) else None
    top = 1 << min(bits, 46) if bits else 0
    over4g = lay.end - 4 * GiB if lay.above else 0
    pad = bool(bits and bits >= 36 and over4g)
    q35 = _q35(shape.machine)
    if pad and shape.padded_buses and not q35:
        return Verdict(
            "must-be-measured", f"SeaBIOS with RAM above 4 GiB gives each of i440fx's"
            f" {shape.padded_buses} pci-bridges a 64-bit window of its own, whose size and"
            " place fw-lab has not measured (on q35 it has: top/2048 each); with them a"
            " generated VM lost a BAR the same model without them places", window=None,
            fw_bits=bits, ram_end=lay.end,
            measure="i440fx with SeaBIOS and RAM above 4 GiB (boot it)")
    entries: list[tuple[int, int, int]] = []  # (align, size, BAR or 0 for a bridge's pad)
    for bar in shape.bars:
        align = top >> 11 if (q35 and pad and b.misalign) else bar
        entries.append((align, _align(max(bar, align), align), bar))
    if q35 and pad:  # each hotplug-capable bridge gets a 64-bit window of top/2048 (P11, P12)
        entries += [(top >> 11, top >> 11, 0)] * shape.padded_buses
    entries.sort(key=lambda e: (-e[0], -e[1], -e[2]))  # SeaBIOS's order; BARs before pads
    total = sum(e[1] for e in entries)
    base = 4 * GiB + over4g
    if top:
        size = _align(total, GiB)
        if pad:
            size = _align(size, top >> 3)
        if base < (top - size) & U64:
            base = (top - size) & U64
        used = [*lay.ram(), *([(HT_START, TiB)] if lay.ht else [])]
        if any(base < e and base + size > s for s, e in used):
            base = (base - size) & U64
    base = _align(base, GiB)
    pref = _align(_align(base, entries[0][0]), GiB) if entries else base
    start, placed, limit = pref, 0, 1 << shape.phys_bits
    for _, size, bar in entries:
        at = pref & ~(bar - 1) & U64
        pref = (pref + size) & U64
        if bar and 0 < at < 1 << 57 and at + bar <= limit and not any(
                at < e and at + bar > s for s, e in lay.ram()):
            placed += 1
    what = "SeaBIOS's window" + ("" if top else " (just above RAM, unchecked)")
    return _placed_verdict(shape, placed, (start, _align(pref, GiB)), bits, lay, what)


def usable_phys_bits(vcpu: int | None, host: int | None,
                     guest: int | None = None) -> int | None:
    """The address width a guest can really use: the lowest of the vCPU's phys-bits, the
    host's (under KVM no guest reaches above the host CPU's MAXPHYADDR, whatever phys-bits
    the vCPU reports) and guest-phys-bits (what the guest is told it may use). Unknown
    widths (None) do not count; None when none is known. The rehearsal's verdict and the
    planner's BAR-space findings both count a BAR as usable only below 2^this."""
    known = [b for b in (vcpu, host, guest) if b is not None and b > 0]
    return min(known) if known else None
