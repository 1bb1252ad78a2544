"""Comparing observed VMs and nodes with a desired state: equivalent forms hold, a difference
only in [PENDING] or only in the configured cmdline is drift with a label, exit codes follow."""

from __future__ import annotations

from pvefix.check.compare import build_report, compare_node, compare_vm, same_value
from pvefix.check.report import AT_COLD_START, AT_HOST_REBOOT, CheckItem
from pvefix.desired import (
    CmdlineRules,
    DesiredState,
    HostPciRule,
    MachineRule,
    NodeDesired,
    VmDesired,
)
from pvefix.observed import ObservedNode, ObservedVm, vm_from_api, vm_from_config


def vm(current: dict[str, str], after: dict[str, str] | None = None, *,
       running_machine: str | None = None) -> ObservedVm:
    return ObservedVm(
        vmid=100, node="pve1", status="running" if running_machine else "stopped",
        running_machine=running_machine, current=current,
        next=dict(current if after is None else after),
    )


def item(items: list[CheckItem], prop: str) -> CheckItem:
    found = [i for i in items if i.property == prop]
    assert len(found) == 1, [i.property for i in items]
    return found[0]


Q35 = VmDesired(machine=MachineRule(family="q35"))


def test_a_family_matches_every_version_of_it() -> None:
    for value in ("q35", "pc-q35-9.2", "pc-q35-9.2+pve0", "pc-q35-10.1+pve1,viommu=virtio"):
        assert item(compare_vm(Q35, vm({"machine": value})), "machine").status == "ok", value


def test_no_machine_line_is_i440fx_and_drifts_from_q35() -> None:
    got = item(compare_vm(Q35, vm({})), "machine")
    assert got.status == "drift"
    assert got.actual == "(absent: pc, i440fx) [i440fx]"


def test_an_exact_machine_ignores_the_order_of_its_sub_options_but_not_the_version() -> None:
    rule = VmDesired(machine=MachineRule(exact="pc-q35-9.2+pve1,viommu=virtio"))
    same = vm({"machine": "viommu=virtio,pc-q35-9.2+pve1"})
    other = vm({"machine": "pc-q35-9.0+pve1,viommu=virtio"})
    assert item(compare_vm(rule, same), "machine").status == "ok"
    assert item(compare_vm(rule, other), "machine").status == "drift"


def test_property_strings_compare_whatever_the_order_of_their_parts() -> None:
    assert same_value("pcie=1,x-vga=1", "x-vga=1,pcie=1")
    assert same_value("host,flags=+pdpe1gb", "flags=+pdpe1gb,host")
    assert not same_value("pcie=1,x-vga=1", "pcie=1,x-vga=0")
    assert not same_value("host", "kvm64")
    rule = VmDesired(hostpci={"hostpci0": HostPciRule(mapping="gpu", pcie=True, x_vga=True)},
                     keys={"agent": "enabled=1,fstrim_cloned_disks=1"})
    got = compare_vm(rule, vm({"hostpci0": "x-vga=1,pcie=1,mapping=gpu",
                               "agent": "fstrim_cloned_disks=1,enabled=1"}))
    assert [i.status for i in got] == ["ok", "ok", "ok", "ok"]


def test_raw_host_ids_compare_with_or_without_the_domain() -> None:
    rule = VmDesired(hostpci={"hostpci0": HostPciRule(host="0000:41:00.0")})
    assert compare_vm(rule, vm({"hostpci0": "41:00.0,pcie=1"}))[0].status == "ok"


def test_a_fix_only_in_pending_is_drift_that_waits_for_a_cold_start() -> None:
    rule = VmDesired(hostpci={"hostpci0": HostPciRule(pcie=True)})
    got = compare_vm(rule, vm({"hostpci0": "mapping=gpu"}, {"hostpci0": "mapping=gpu,pcie=1"},
                              running_machine="pc-q35-10.1+pve0"))[0]
    assert got.status == "drift"
    assert got.when == f"only in [PENDING]: {AT_COLD_START}"
    assert got.actual == "pcie=0 (pending: pcie=1)"


def test_a_pending_change_that_undoes_the_fix_is_drift_too() -> None:
    got = compare_vm(Q35, vm({"machine": "q35"}, {}, running_machine="pc-q35-10.1+pve0"))
    assert item(got, "machine").when == f"[PENDING] undoes it: {AT_COLD_START}"
    assert item(got, "machine (running)").status == "ok"


def test_a_running_machine_of_the_old_family_is_drift_until_the_next_cold_start() -> None:
    got = compare_vm(Q35, vm({"machine": "q35"}, running_machine="pc-i440fx-10.1+pve0"))
    assert item(got, "machine").status == "ok"
    running = item(got, "machine (running)")
    assert running.status == "drift"
    assert running.when is not None and running.when.endswith(AT_COLD_START)


def test_absent_keys_and_a_closed_config() -> None:
    rule = VmDesired(closed=True, keys={"cpu": "host"}, absent=("args",), free=("name",),
                     machine=MachineRule(family="i440fx"))
    ok = compare_vm(rule, vm({"cpu": "host", "name": "x", "lock": "backup"}))
    assert all(i.status == "ok" for i in ok)
    bad = compare_vm(rule, vm({"cpu": "host", "args": "-x", "tags": "a"}))
    assert item(bad, "args (absent)").status == "drift"
    assert item(bad, "unexpected keys").actual == "tags"  # args is reported as absent-drift


def test_pending_rows_from_the_api_give_both_views() -> None:
    rows = [
        {"key": "digest", "value": "abc"},
        {"key": "cores", "value": 4},
        {"key": "hostpci0", "value": "mapping=gpu", "pending": "mapping=gpu,pcie=1"},
        {"key": "args", "value": "-x", "delete": 1},
        {"key": "cpu", "pending": "host"},
    ]
    got = vm_from_api(100, "pve1", rows, {"status": "running", "running-machine": "pc-q35-9.2"})
    assert got.current == {"cores": "4", "hostpci0": "mapping=gpu", "args": "-x"}
    assert got.next == {"cores": "4", "hostpci0": "mapping=gpu,pcie=1", "cpu": "host"}
    assert got.running_machine == "pc-q35-9.2"


def test_a_config_file_with_pending_gives_the_same_views() -> None:
    text = ("cores: 4\nhostpci0: mapping=gpu\nargs: -x\n\n[PENDING]\ncpu: host\n"
            "delete: args\nhostpci0: mapping=gpu,pcie=1\n")
    got = vm_from_config(100, "pve1", text, "stopped", None)
    assert got.current == {"cores": "4", "hostpci0": "mapping=gpu", "args": "-x"}
    assert got.next == {"cores": "4", "hostpci0": "mapping=gpu,pcie=1", "cpu": "host"}


HOST = NodeDesired(cmdline=CmdlineRules(required=("iommu=pt",), forbidden=("amd_iommu=on",)))


def node(configured: str | None, running: str | None, problem: str | None = None
         ) -> ObservedNode:
    return ObservedNode(name="pve1", loader="systemd-boot", configured=configured,
                        configured_source="/etc/kernel/cmdline", running=running,
                        problem=problem)


def test_a_host_parameter_configured_but_not_booted_waits_for_a_host_reboot() -> None:
    got = compare_node(HOST, node("root=x iommu=pt", "root=x"))
    assert got[0].status == "drift"
    assert got[0].when == f"configured, not booted yet: {AT_HOST_REBOOT}"
    assert got[0].actual == "configured: iommu=pt; booted: absent"


def test_a_host_parameter_lost_from_the_config_is_drift_before_the_reboot() -> None:
    got = compare_node(HOST, node("root=x", "root=x iommu=pt"))
    assert got[0].status == "drift"
    assert got[0].when is not None and got[0].when.endswith(AT_HOST_REBOOT)


def test_a_host_that_lost_it_on_both_sides_is_plain_drift_and_names_are_kernel_equal() -> None:
    got = compare_node(HOST, node("root=x amd-iommu=on", "root=x amd_iommu=on"))
    assert [i.status for i in got] == ["drift", "drift"]
    assert got[0].when is None and got[1].actual == (
        "configured: amd-iommu=on; booted: amd_iommu=on")


def test_an_unreadable_host_is_unknown_and_fails_the_check() -> None:
    desired = DesiredState(nodes={"pve1": HOST})
    report = build_report(desired, {}, {"pve1": node(None, None, "no SSH access")})
    assert {i.status for i in report.items} == {"unknown"}
    assert report.exit_code == 1


def test_exit_codes_are_0_without_drift_and_2_with_it() -> None:
    desired = DesiredState(vms={100: Q35})
    assert build_report(desired, {100: vm({"machine": "q35"})}, {}).exit_code == 0
    assert build_report(desired, {100: vm({})}, {}).exit_code == 2


def test_a_vm_without_desired_state_and_an_unreadable_one_are_unknown() -> None:
    desired = DesiredState(vms={100: Q35})
    report = build_report(desired, {101: vm({}).model_copy(update={"vmid": 101}),
                                    100: "not a QEMU VM of this cluster"}, {})
    assert [(i.vmid, i.status) for i in report.items] == [(100, "unknown"), (101, "unknown")]
    assert "--only-desired" in report.items[1].detail and report.exit_code == 1


def _fields(got: CheckItem) -> tuple[str, str | None, str | None, str]:
    return got.key, got.want, got.got, got.where


def test_items_carry_key_want_got_and_where_beside_the_prose() -> None:
    rule = VmDesired(machine=MachineRule(family="q35"), absent=("args",), keys={"cpu": "host"},
                     hostpci={"hostpci0": HostPciRule(pcie=True, mapping="gpu")})
    got = compare_vm(rule, vm({"hostpci0": "mapping=gpu", "args": "-x", "cpu": "kvm64"},
                              {"hostpci0": "mapping=gpu", "cpu": "host"},
                              running_machine="pc-i440fx-10.1+pve0"))
    assert _fields(item(got, "machine")) == ("machine", "q35", None, "config")
    assert _fields(item(got, "machine (running)")) == (
        "machine", "q35", "pc-i440fx-10.1+pve0", "running")
    assert _fields(item(got, "hostpci0.pcie")) == ("hostpci0.pcie", "1", "0", "config")
    assert _fields(item(got, "hostpci0.mapping")) == ("hostpci0.mapping", "gpu", "gpu", "config")
    assert _fields(item(got, "args (absent)")) == ("args", None, "-x", "config")
    assert _fields(item(got, "cpu")) == ("cpu", "host", "kvm64", "config")
    # Right now, wrong in [PENDING]: the structured view names [PENDING] and its value.
    undone = compare_vm(Q35, vm({"machine": "q35"}, {}, running_machine="pc-q35-10.1+pve0"))
    assert _fields(item(undone, "machine")) == ("machine", "q35", None, "pending")


def test_cmdline_items_say_where_they_fail_and_what_was_found() -> None:
    waits = compare_node(HOST, node("root=x iommu=pt", "root=x"))
    assert _fields(waits[0]) == ("cmdline:iommu", "iommu=pt", None, "booted")
    lost = compare_node(HOST, node("root=x amd-iommu=on", "root=x amd_iommu=on"))
    assert _fields(lost[1])[0] == "cmdline:amd_iommu"
    assert _fields(lost[1])[2:] == ("amd-iommu=on", "configured")
