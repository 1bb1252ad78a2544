"""Power actions as tasks, and starts that fail the way Proxmox's do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxmoxer.tools import Tasks

from tests.simkit import wait_task


def test_start_with_pcie_on_i440fx_fails_and_leaves_pending_applied(
    own: Callable[..., Any],
) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    vm.config.put(hostpci0="mapping=pro6000,pcie=1")
    assert wait_task(token, vm.status.stop.post())["exitstatus"] == "OK"
    status = wait_task(token, vm.status.start.post())
    assert status["exitstatus"] == (
        "q35 machine model is not enabled at /usr/share/perl5/PVE/QemuServer/PCI.pm line 510."
    )
    assert vm.config.get(current=1)["hostpci0"] == "mapping=pro6000,pcie=1"
    assert not [item for item in vm.pending.get() if "pending" in item]
    assert vm.status.current.get()["status"] == "stopped"


def test_start_applies_pending_written_into_a_stopped_vms_file(
    own: Callable[..., Any],
) -> None:
    info, token, _ = own()
    from tests.simkit import ssh

    client = ssh(info)
    sftp = client.open_sftp()
    with sftp.open("/etc/pve/qemu-server/101.conf", "a") as fh:
        fh.write("\n[PENDING]\nhostpci0: mapping=pro6000,pcie=1\n")
    client.close()
    vm = token.nodes(info.node).qemu(101)
    assert vm.config.get(current=1).get("hostpci0") is None
    status = wait_task(token, vm.status.start.post())
    assert status["exitstatus"].startswith("q35 machine model is not enabled")
    assert vm.config.get(current=1)["hostpci0"] == "mapping=pro6000,pcie=1"


def test_the_task_log_ends_with_the_error(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    upid = vm.status.start.post()
    wait_task(token, upid)
    log = Tasks.decode_log(token.nodes(info.node).tasks(upid).log.get())
    assert log.splitlines()[-1] == "TASK ERROR: VM 100 already running"


def test_a_task_reports_running_before_stopped(own: Callable[..., Any]) -> None:
    info, token, _ = own(task_seconds=1.0)
    upid = token.nodes(info.node).qemu(100).status.stop.post()
    first = token.nodes(info.node).tasks(upid).status.get()
    assert first["status"] == "running" and "exitstatus" not in first
    assert wait_task(token, upid)["status"] == "stopped"


def test_q35_start_resolves_the_running_machine(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    vm.config.put(machine="q35", hostpci0="mapping=pro6000,pcie=1")
    assert vm.status.current.get()["running-machine"] == "pc-i440fx-10.1+pve0"
    wait_task(token, vm.status.stop.post())
    assert wait_task(token, vm.status.start.post())["exitstatus"] == "OK"
    current = vm.status.current.get()
    assert current["status"] == "running"
    assert current["running-machine"] == "pc-q35-10.1+pve0"


def test_api_reboot_is_a_new_qemu_process_so_pending_is_applied(
    own: Callable[..., Any],
) -> None:
    # qemu-server's vm_reboot stops QEMU and qmeventd starts it again (a fresh process).
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    vm.config.put(machine="q35")
    assert wait_task(token, vm.status.reboot.post())["exitstatus"] == "OK"
    assert "machine" not in [i["key"] for i in vm.pending.get() if "pending" in i]
    assert vm.status.current.get()["running-machine"] == "pc-q35-10.1+pve0"


def test_legacy_igd_on_q35_fails_to_start(own: Callable[..., Any]) -> None:
    info, token, ticket = own("windows-igd")
    vm = ticket.nodes(info.node).qemu(301)
    wait_task(ticket, vm.status.stop.post())
    vm.config.put(machine="q35")
    status = wait_task(token, vm.status.start.post())
    assert status["exitstatus"] == "legacy IGD assignment is not compatible with q35"
