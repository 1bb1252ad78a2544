"""The rehearsal's verdict, from what the node script read over QMP (pure).

Per stand-in BAR (BAR2 of `pci-testdev`): **placed** at an address when the firmware programmed
it, it ends at or below 2^bits, and it overlaps no RAM, bits being the usable width
(planner/bar_verdict.py usable_phys_bits: the lowest of the vCPU's phys-bits as QEMU realised
them, the host's, and guest-phys-bits); **beyond reach** when it ends above that limit (the
guest cannot use it: the firmware may program BARs the guest will ignore, and under KVM no
guest reaches above the host's width); **not placed** otherwise. For the VM: `placed` (every BAR
placed), `not-placed`, `no-boot` (the firmware did not reach its boot manager in time: this VM
would not boot), `qemu-refused` (QEMU would not start this configuration: its message), or
`error` (the rehearsal itself failed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pvefix.console.terminal import Terminal
from pvefix.planner.bar_verdict import usable_phys_bits
from pvefix.planner.mmio import fmt_size
from pvefix.rehearse.build import Job, StandIn

REHEARSE_SCHEMA = "pvefix.rehearse/v1"
Outcome = Literal["placed", "not-placed", "no-boot", "qemu-refused", "error"]
BarStatus = Literal["placed", "not-placed", "beyond-reach", "overlaps-ram"]
_WRAP = 1 << 64
_SANE = 1 << 57  # above: a wrapped or sizing-mask value, never a programmed address


@dataclass(frozen=True)
class BarVerdict:
    id: str
    host: str
    size: int
    status: BarStatus
    address: int | None = None

    @property
    def end(self) -> int | None:
        return None if self.address is None else self.address + self.size


@dataclass
class Verdict:
    vmid: int
    node: str
    config: str  # "next start" | "phase N" | "the plan's end"
    outcome: Outcome
    message: str
    accel: str
    qemu: str
    machine: str
    cpu: str
    ram_mb: int
    firmware: str
    bars: list[BarVerdict] = field(default_factory=list)
    phys_bits: int | None = None
    vendor: str | None = None
    boot_s: float | None = None
    peak_rss_mb: int | None = None
    notes: list[str] = field(default_factory=list)
    # What the next start holds that can move a BAR and the rehearsal did not boot
    # (pvefix/rehearse/unmodelled.py): non-empty, the outcome is the firmware's without them.
    not_established: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "placed" and not self.not_established

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["schema"] = REHEARSE_SCHEMA
        out["ok"] = self.ok
        out["bars"] = [{**asdict(b), "address": None if b.address is None else hex(b.address),
                        "end": None if b.end is None else hex(b.end)} for b in self.bars]
        return out


def _walk(buses: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for bus in buses:
        for dev in bus.get("devices") or ():
            yield dev
            bridge = dev.get("pci_bridge") or {}
            yield from _walk([bridge]) if bridge.get("devices") else ()


def bar_verdicts(query_pci: Sequence[Mapping[str, Any]], stand_ins: Sequence[StandIn],
                 bits: int, ram: Sequence[Sequence[int]]) -> list[BarVerdict]:
    """Each stand-in's BAR2 as the firmware left it, judged against `bits` and the RAM."""
    found = {str(d.get("qdev_id")): d for d in _walk(query_pci)}
    out: list[BarVerdict] = []
    for s in stand_ins:
        region = next((r for r in (found.get(s.id) or {}).get("regions") or ()
                       if r.get("bar") == 2), None)
        addr = int(region["address"]) % _WRAP if region else 0
        if not 0 < addr < _SANE:
            out.append(BarVerdict(s.id, s.host, s.size, "not-placed"))
            continue
        end = addr + s.size
        status: BarStatus = "placed"
        if end > 1 << bits:
            status = "beyond-reach"
        elif any(addr < hi and end > lo for lo, hi in ram):
            status = "overlaps-ram"
        out.append(BarVerdict(s.id, s.host, s.size, status, addr))
    return out


def judge(result: Mapping[str, Any], job: Job) -> tuple[Outcome, str, list[BarVerdict]]:
    """The outcome, its one-line message and the BARs, from the node script's `run` output."""
    kind = result.get("outcome")
    if kind == "booted":
        vcpu = result.get("phys-bits")
        bits = usable_phys_bits(vcpu if isinstance(vcpu, int) else (job.phys_bits or 40),
                                job.host_bits, job.guest_phys_bits) or 40
        bars = bar_verdicts(result.get("query_pci") or [], job.stand_ins, bits,
                            result.get("ram") or [])
        bad = [b for b in bars if b.status != "placed"]
        if not bars:
            return "placed", "the firmware booted; no passed device has a 64-bit BAR", bars
        if not bad:
            return "placed", f"all {len(bars)} BARs placed below 2^{bits}", bars
        kinds = ", ".join(sorted({b.status for b in bad}))
        return "not-placed", f"{len(bad)} of {len(bars)} BARs not usable ({kinds})", bars
    if kind == "timeout":
        slow = (" (under TCG a slow firmware looks the same: give --boot-timeout more, or "
                "rehearse where KVM is usable)" if job.accel == "tcg" else "")
        return ("no-boot", f"the firmware did not reach its boot manager in "
                f"{result.get('boot_s', 0):g} s: this VM would not boot{slow}", [])
    if kind == "refused":
        text = str(result.get("qemu_output") or "").strip().splitlines()
        return "qemu-refused", (text[-1] if text else "QEMU exited at once"), []
    return "error", str(result.get("why") or "the rehearsal did not run"), []


HEADS = {"placed": "ALL PLACED", "not-placed": "NOT PLACED", "no-boot": "WOULD NOT BOOT",
         "qemu-refused": "QEMU REFUSES", "error": "ERROR"}


def bar_line(b: BarVerdict) -> str:
    where = "" if b.address is None else f" at {b.address:#x}-{b.end or 0:#x}"
    status = {"placed": "placed", "not-placed": "NOT placed",
              "beyond-reach": "beyond the vCPU's reach", "overlaps-ram": "overlaps RAM"}
    return f"{b.id} ({b.host}, {fmt_size(b.size)}): {status[b.status]}{where}"


def render_text(v: Verdict, term: Terminal | None = None) -> str:
    """The verdict as `pvefix rehearse` prints it (plan and apply --rehearse too); with `term`
    (a terminal), each line filled to its width: an address or a size is a word, never
    split."""
    head = HEADS[v.outcome]
    lines = [f"rehearsal of VM {v.vmid} on {v.node}, {v.config}",
             f"  {v.qemu} ({v.accel.upper()}), {v.firmware}, machine {v.machine}, "
             f"{v.ram_mb} MiB RAM (sparse)",
             f"  -cpu {v.cpu}"]
    if v.phys_bits is not None:
        lines.append(f"  vCPU: {v.phys_bits} phys-bits, {v.vendor or 'vendor unknown'}")
    lines += [f"  {bar_line(b)}" for b in v.bars]
    timing = []
    if v.boot_s is not None:
        timing.append(f"{v.boot_s:g} s")
    if v.peak_rss_mb is not None:
        timing.append(f"peak {v.peak_rss_mb} MiB")
    said = f"{head}: {v.message}" + (f" ({', '.join(timing)})" if timing else "")
    if v.not_established:
        said = (f"NOT ESTABLISHED: without what the rehearsal left out (below), the firmware"
                f" says {said}")
    lines.append(said)
    lines += [f"  not booted: {x}" for x in v.not_established]
    lines += [f"note: {n}" for n in v.notes]
    text = "\n".join(lines)
    return (text if term is None else term.fit(text, hang=2)) + "\n"
