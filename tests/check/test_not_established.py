"""check's closed world: an "ok" whose claim rests on an input of the VM's next start that pvefix
does not model (pvefix.closedworld; the planner's pvefix.planner.closed config_gaps) is not
established: UNKNOWN (exit 1, as docs/check.md's table has it for what could not be checked),
naming the input. Drift stays drift; inputs that are modelled or inert change nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.check.compare import build_report, compare_node, compare_vm
from pvefix.check.report import CheckItem
from pvefix.closedworld.config_keys import INPUTS_INERT
from pvefix.desired import (
    CmdlineRules,
    DesiredState,
    HostPciRule,
    MachineRule,
    NodeDesired,
    VmDesired,
)
from pvefix.errors import EXIT_ERROR, EXIT_OK
from pvefix.observed import ObservedNode, ObservedVm

BASE = {"machine": "q35", "hostpci0": "0000:01:00.0,pcie=1", "memory": "65536",
        "cpu": "host", "numa": "1"}
RULE = VmDesired(machine=MachineRule(family="q35"),
                 hostpci={"hostpci0": HostPciRule(host="0000:01:00.0", pcie=True)},
                 keys={"cpu": "host"})


def observed(extra: dict[str, str], base: dict[str, str] = BASE) -> ObservedVm:
    values = {**base, **extra}
    return ObservedVm(vmid=100, node="pve1", status="stopped", current=values, next=values)


def item(items: list[CheckItem], prop: str) -> CheckItem:
    (found,) = [i for i in items if i.property == prop]
    return found


def test_the_vm_as_modelled_is_ok_and_exits_0() -> None:
    items = compare_vm(RULE, observed({}))
    assert {i.status for i in items} == {"ok"}, [(i.property, i.status) for i in items]
    report = build_report(DesiredState(vms={100: RULE}), {100: observed({})}, {})
    assert report.exit_code == EXIT_OK


def test_an_args_machine_leaves_the_machine_not_established() -> None:
    """qemu-server appends args after its own options and QEMU keeps the last -machine: the
    config's `machine: q35` is there, what runs is not established."""
    items = compare_vm(RULE, observed({"args": "-machine type=pc"}))
    got = item(items, "machine")
    assert got.status == "unknown"
    assert got.detail.startswith("not established: machine (args-word -machine)")
    assert "args: -machine type=pc" in got.detail
    assert item(items, "hostpci0.pcie").status == "ok", "-machine touches no pcie claim"
    report = build_report(DesiredState(vms={100: RULE}),
                          {100: observed({"args": "-machine type=pc"})}, {})
    assert report.exit_code == EXIT_ERROR


def test_an_unknown_args_word_leaves_every_claimed_item_not_established() -> None:
    items = compare_vm(RULE, observed({"args": "-frobnicate on"}))
    for prop in ("machine", "hostpci0.pcie", "hostpci0.host", "cpu"):
        assert item(items, prop).status == "unknown", prop


def test_memory_hotplug_leaves_the_cpu_pin_not_established() -> None:
    """cpu feeds the BAR verdict; memory hotplug moves the window by a range pvefix does not
    size (Memory.pm), so "cpu: host ok" no longer says the BARs fit."""
    got = item(compare_vm(RULE, observed({"hotplug": "network,disk,memory"})), "cpu")
    assert got.status == "unknown" and "config-key hotplug" in got.detail


def test_drift_stays_drift_whatever_else_the_config_holds() -> None:
    items = compare_vm(RULE, observed({"machine": "pc", "args": "-machine type=pc"}))
    assert item(items, "machine").status == "drift"


def test_an_unmodelled_input_only_counts_where_its_value_can_change_a_claim() -> None:
    """kvm: 1 is the default; hotplug without memory adds no DIMM slots."""
    items = compare_vm(RULE, observed({"kvm": "1", "hotplug": "network,disk"}))
    assert {i.status for i in items} == {"ok"}


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([i.name for i in INPUTS_INERT if not i.name.endswith("N")]),
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789=,-", min_size=1, max_size=12))
def test_an_inert_key_never_changes_a_verdict(name: str, value: str) -> None:
    items = compare_vm(RULE, observed({name: value}))
    assert {i.status for i in items} == {"ok"}, (name, value)


@pytest.mark.parametrize("extra", [{"hookscript": "local:snippets/h.pl"},
                                   {"vmstate": "local:100/vm-100-state-s.raw"}])
def test_a_hook_or_a_saved_state_leaves_the_devices_not_established(
        extra: dict[str, str]) -> None:
    items = compare_vm(RULE, observed(extra))
    assert item(items, "hostpci0.host").status == "unknown"
    assert item(items, "machine").status == "ok", "neither touches the machine claim"


HOST = NodeDesired(cmdline=CmdlineRules(required=("iommu=pt",), forbidden=("amd_iommu=on",)))


def host(line: str) -> ObservedNode:
    return ObservedNode(name="pve1", loader="systemd-boot", configured=line,
                        configured_source="/etc/kernel/cmdline", running=line)


@pytest.mark.parametrize("token", ["amd_iommu=force_enable", "intel_iommu=sm_on", "iommu=soft",
                                   "amd_iommu=pgtbl_v2", "pci=off"])
def test_a_required_iommu_parameter_is_not_established_beside_an_unmodelled_token(
        token: str) -> None:
    (required, forbidden) = compare_node(HOST, host(f"root=x iommu=pt {token}"))
    assert required.status == "unknown"
    assert required.detail.startswith("not established: host-iommu (kernel-param ")
    assert token in required.detail
    assert forbidden.status == "ok", "an absent forbidden token is read as it is"


@pytest.mark.parametrize("token", ["quiet", "pcie_aspm=off", "nomodeset",
                                   "pcie_acs_override=id:1:2", "video=efifb:off"])
def test_a_token_that_touches_no_host_iommu_claim_leaves_the_verdict_alone(token: str) -> None:
    """Inert, outside every family, or unmodelled for other claims (the groups, the start)."""
    got = compare_node(HOST, host(f"root=x iommu=pt {token}"))
    assert [i.status for i in got] == ["ok", "ok"]
