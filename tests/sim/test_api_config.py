"""VM config reads and writes with Proxmox's rules: digest, pending, delete, revert, locks,
root-only raw devices, validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from proxmoxer.core import ResourceException

from tests.simkit import wait_task


def test_config_has_typed_values_and_the_files_digest(kpro6_token: Any, node: str) -> None:
    cfg = kpro6_token.nodes(node).qemu(100).config.get()
    assert cfg["hostpci0"] == "mapping=pro6000"
    assert "machine" not in cfg
    assert cfg["sockets"] == 2  # integers as JSON numbers, as Proxmox sends them
    assert len(cfg["digest"]) == 40


def test_a_put_with_the_current_digest_is_applied(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(101).config
    before = vm.get()
    assert vm.put(cores=6, digest=before["digest"]) is None
    after = vm.get()
    assert after["cores"] == 6
    assert after["digest"] != before["digest"]


def test_a_stale_digest_is_refused_with_proxmoxs_message(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(101).config
    stale = vm.get()["digest"]
    vm.put(cores=6)
    with pytest.raises(ResourceException) as err:
        vm.put(cores=8, digest=stale)
    assert err.value.status_code == 500
    assert err.value.content == "checksum mismatch (file change by other user?)"
    assert vm.get()["cores"] == 6


def test_a_post_is_a_task_that_changes_the_config(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    upid = token.nodes(info.node).qemu(101).config.post(name="renamed")
    assert upid.startswith(f"UPID:{info.node}:") and ":qmconfig:101:root@pam!pvefix:" in upid
    assert wait_task(token, upid)["exitstatus"] == "OK"
    assert token.nodes(info.node).qemu(101).config.get()["name"] == "renamed"


def test_hostpci_on_a_running_vm_waits_in_pending(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    vm.config.put(hostpci0="mapping=pro6000,pcie=1", description="fixed by pvefix")
    assert vm.config.get(current=1)["hostpci0"] == "mapping=pro6000"
    assert vm.config.get()["hostpci0"] == "mapping=pro6000,pcie=1"
    assert vm.config.get(current=1)["description"] == "fixed by pvefix"  # applied at once
    pending = {item["key"]: item for item in vm.pending.get()}
    assert pending["hostpci0"] == {
        "key": "hostpci0", "value": "mapping=pro6000", "pending": "mapping=pro6000,pcie=1",
    }


def test_delete_on_a_stopped_vm_removes_the_key(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(101).config
    vm.put(delete="net0")
    assert "net0" not in vm.get()


def test_delete_on_a_running_vm_is_pending_and_revert_drops_it(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    vm = token.nodes(info.node).qemu(100)
    vm.config.put(delete="hostpci7")
    assert {"key": "hostpci7", "value": "mapping=pro6000", "delete": 1} in vm.pending.get()
    assert "hostpci7" not in vm.config.get()
    vm.config.put(revert="hostpci7")
    assert all("delete" not in item for item in vm.pending.get())
    assert vm.config.get()["hostpci7"] == "mapping=pro6000"


def test_a_locked_vm_refuses_writes_naming_the_lock(own: Callable[..., Any]) -> None:
    info, token, ticket = own()
    ticket("_sim/inject").post(spec="lock=101:backup")
    with pytest.raises(ResourceException) as err:
        token.nodes(info.node).qemu(101).config.put(cores=2)
    assert err.value.status_code == 500
    assert err.value.content == "VM is locked (backup)"
    assert token.nodes(info.node).qemu(101).status.current.get()["lock"] == "backup"


def test_a_token_may_not_set_a_raw_host_device(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    with pytest.raises(ResourceException) as err:
        token.nodes(info.node).qemu(101).config.put(hostpci0="0000:41:00.0")
    assert err.value.status_code == 500
    assert err.value.content == "only root can set 'hostpci0' config for non-mapped devices"


def test_root_with_a_password_ticket_may_set_a_raw_host_device(own: Callable[..., Any]) -> None:
    info, _, ticket = own()
    ticket.nodes(info.node).qemu(101).config.put(hostpci0="0000:41:00.0,pcie=1")
    assert ticket.nodes(info.node).qemu(101).config.get()["hostpci0"] == "0000:41:00.0,pcie=1"


def test_a_token_may_not_set_args(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    with pytest.raises(ResourceException) as err:
        token.nodes(info.node).qemu(101).config.put(args="-set device.hostpci0.x=1")
    assert err.value.content == "only root can set 'args' config"


def test_an_invalid_value_is_a_parameter_error_naming_the_key(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    with pytest.raises(ResourceException) as err:
        token.nodes(info.node).qemu(101).config.put(hostpci0="mapping=pro6000,pcie=maybe")
    assert err.value.status_code == 400
    assert set(err.value.errors) == {"hostpci0"}


def test_every_write_stores_the_file_as_proxmoxs_writer(own: Callable[..., Any]) -> None:
    info, token, _ = own()
    token.nodes(info.node).qemu(100).config.put(machine="q35")
    from pathlib import Path

    text = (Path(info.root) / "etc/pve/qemu-server/100.conf").read_text()
    main, _, pending = text.partition("\n[PENDING]\n")
    keys = [line.split(":")[0] for line in main.splitlines() if not line.startswith("#")]
    assert keys == sorted(keys)
    assert pending == "machine: q35\n"
