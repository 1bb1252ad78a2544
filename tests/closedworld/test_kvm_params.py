"""The KVM modules' parameters in the host cmdline's closed world: shadow paging (ept=0, npt=0)
leaves bar-space not established, the common passthrough-host options change nothing, and an
unlisted kvm./kvm_intel./kvm_amd. parameter is never passed over."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pvefix.closedworld.kernel_params import FAMILIES, INPUTS, classify
from pvefix.cmdline.tokens import Token
from pvefix.planner import plan
from pvefix.planner.model import Plan, PlanOptions
from tests.planner.loader import build_state

OFF = st.sampled_from(["0", "n", "N", "no", "off", "OFF", "Off"])
ON = st.sampled_from(["1", "y", "Y", "yes", "on", "ON"])
TDP = st.sampled_from(["kvm_intel.ept", "kvm-intel.ept", "kvm_amd.npt", "kvm-amd.npt"])
# The usual KVM options of passthrough guides (and what Proxmox's forum recommends for Windows).
COMMON = ["kvm.ignore_msrs=1", "kvm.report_ignored_msrs=0", "kvm_amd.nested=1",
          "kvm_intel.nested=1", "kvm_intel.enable_apicv=1", "kvm_amd.avic=1",
          "kvm.nx_huge_pages=off", "kvm.tdp_mmu=Y", "kvm_intel.allow_smaller_maxphyaddr=1",
          "kvm_intel.ept=1", "kvm_amd.npt=1", "nokaslr", "mitigations=off"]


def only(raw: str) -> Any:
    got = classify(Token.from_raw(raw))
    assert len(got) == 1, (raw, got)
    return got[0]


@given(TDP, OFF)
def test_shadow_paging_leaves_bar_space_not_established(name: str, value: str) -> None:
    item = only(f"{name}={value}")
    assert item.status == "unmodelled" and item.claims == ("bar-space",), item
    assert "GuestPhysAddrSize" in item.why and "kvm_mmu_max_gfn" in item.source


@given(TDP, st.one_of(ON.map(lambda v: f"={v}"), st.just("")))
def test_two_dimensional_paging_on_or_bare_is_the_default(name: str, value: str) -> None:
    item = only(f"{name}{value}")
    assert item.status == "inert" and item.name.endswith("=1"), item


@given(TDP, st.from_regex(r"[a-mp-xz2-9][a-z0-9]{0,6}", fullmatch=True))
def test_a_value_the_kernel_cannot_parse_is_unmodelled_for_the_start(name: str,
                                                                      value: str) -> None:
    item = only(f"{name}={value}")
    assert item.status == "unmodelled" and "start" in item.claims, (value, item)


def test_the_common_passthrough_host_options_are_listed_inert_with_a_source() -> None:
    for raw in COMMON:
        item = only(raw)
        assert item.status == "inert" and item.source, raw
        assert "not in pvefix's table" not in item.why, raw


@given(st.sampled_from(["kvm.", "kvm_intel.", "kvm-amd."]),
       st.from_regex(r"zz[a-z_]{1,10}", fullmatch=True))
def test_an_unlisted_kvm_parameter_is_unmodelled_for_bar_space_and_the_start(
        module: str, name: str) -> None:
    item = only(f"{module}{name}=0")
    assert item.status == "unmodelled" and item.claims == ("bar-space", "start"), item


def test_the_kvm_family_and_the_memory_layout_decisions() -> None:
    assert {"kvm.", "kvm_intel.", "kvm_amd."} <= set(FAMILIES)
    for raw in ("mem=64G", "memmap=2G$0x100000000", "memmap=exactmap"):
        item = only(raw)
        assert item.status == "unmodelled" and item.claims == ("start",), raw
    for raw in ("kvmclock=1", "no-kvmclock", "kvm-arm.mode=nvhe", "quiet"):
        assert classify(Token.from_raw(raw)) == [], raw
    assert {i.name for i in INPUTS} >= {"kvm_intel.ept=0", "kvm_amd.npt=0", "kvm.ignore_msrs"}


def _plan(extra: str) -> Plan:
    line = f"root=ZFS=rpool/ROOT/pve-1 boot=zfs {extra}".strip()
    booted = f"initrd=\\EFI\\proxmox\\6.17.2-1-pve\\initrd.img-6.17.2-1-pve {line}"
    case = {"scenario": "kpro6", "vmid": 100, "tree": {"write": {
        "/etc/kernel/cmdline": f"{line}\n", "/proc/cmdline": f"{booted}\n"}}}
    return plan(build_state(case), PlanOptions())


def _shape(p: Plan) -> tuple[object, ...]:
    return ([(ph.disruption, [c.id for c in ph.changes]) for ph in p.phases],
            sorted((f.id, f.severity, f.detail) for f in p.findings),
            sorted((n.rule, n.reason) for n in p.noops))


def test_the_common_options_change_nothing_in_the_plan() -> None:
    assert _shape(_plan(" ".join(COMMON[:-2]))) == _shape(_plan(""))


def test_npt_off_leaves_bar_space_not_established_and_keeps_the_host_edit() -> None:
    without, with_ = _plan(""), _plan("kvm_amd.npt=0")
    added = {f.id for f in with_.findings} - {f.id for f in without.findings}
    assert added == {"not-established.bar-space.kernel-param.kvm_amd.npt=0"}
    ids = [c.id for ph in with_.phases for c in ph.changes]
    dropped = [c.id for ph in without.phases for c in ph.changes if c.id not in ids]
    assert "host.cmdline.iommu_pt" in ids, "the host-iommu verdict does not rest on it"
    assert dropped == ["vm.cpu.phys-bits", "guest.cmdline.pci_realloc"], \
        "the bar-space changes rest on the width npt=0 leaves unknown: not planned"
