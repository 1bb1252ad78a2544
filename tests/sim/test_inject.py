"""Fault injection: latency, the Nth write failing, a concurrent edit, a lock, an SSH cut."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import paramiko
import pytest
from proxmoxer.core import ResourceException

from tests.simkit import ssh


def test_latency_is_added_to_every_request(own: Callable[..., Any]) -> None:
    _, token, ticket = own()
    ticket("_sim/inject").post(latency=150)
    start = time.monotonic()
    token.version.get()
    assert time.monotonic() - start >= 0.15


def test_the_nth_write_fails_once(own: Callable[..., Any]) -> None:
    info, token, ticket = own()
    ticket("_sim/inject").post(spec="fail-write=2")
    vm = token.nodes(info.node).qemu(101).config
    vm.put(cores=2)
    with pytest.raises(ResourceException) as err:
        vm.put(cores=3)
    assert err.value.status_code == 500
    assert "simulated failure of write #2" in err.value.content
    vm.put(cores=5)
    assert vm.get()["cores"] == 5


def test_another_user_edits_between_read_and_write(own: Callable[..., Any]) -> None:
    info, token, ticket = own()
    ticket("_sim/inject").post(spec="edit-between")
    vm = token.nodes(info.node).qemu(101).config
    digest = vm.get()["digest"]
    with pytest.raises(ResourceException) as err:
        vm.put(cores=2, digest=digest)
    assert err.value.content == "checksum mismatch (file change by other user?)"
    assert "edited by another user" in vm.get()["description"]


def test_a_lock_given_on_the_command_line_is_in_the_config(own: Callable[..., Any]) -> None:
    info, token, _ = own(inject=["lock=100:snapshot"])
    assert token.nodes(info.node).qemu(100).config.get()["lock"] == "snapshot"


def test_ssh_transfer_is_cut_after_k_bytes(own: Callable[..., Any]) -> None:
    info, _, ticket = own()
    ticket("_sim/inject").post(spec="ssh-disconnect=1000")
    sftp = ssh(info).open_sftp()
    cut = (OSError, EOFError, paramiko.SSHException)
    with pytest.raises(cut), sftp.open("/root/big.bin", "wb") as fh:
        for _ in range(64):
            fh.write(b"x" * 1024)
            fh.flush()
    # the next connection works again (one-shot)
    sftp2 = ssh(info).open_sftp()
    with sftp2.open("/root/ok.txt", "w") as fh:
        fh.write("fine")
    assert sftp2.stat("/root/ok.txt").st_size == 4
