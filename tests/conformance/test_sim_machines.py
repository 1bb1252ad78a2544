"""The simulator's machine decisions are qemu-server's (Machine.pm), cross-checked with its code:
the machine a VM runs (Windows pinning, +pveN per QEMU version), the pin a Windows ostype sets,
and the starts refused because the installed QEMU cannot run the machine."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest

from pvefix.sim.machines import pinned_for_windows, running_machine, version_error
from tests.sim.conftest import own  # noqa: F401  (the fixture)
from tests.simkit import wait_task

pytestmark = pytest.mark.conformance

QEMUS = ["9.2.0", "10.0.2", "10.1.2", "11.0.0"]
MACHINES = ["", "q35", "pc", "q35,viommu=virtio", "pc-q35-9.2", "pc-i440fx-8.1+pve0",
            "pc-q35-10.0+pve1", "pc-q35-11.0", "pc-q35-9.2+pve3"]
OSTYPES = ["l26", "win11", "win10", "w2k8", "other"]
METAS = [None, "creation-qemu=9.2.0,ctime=1", "creation-qemu=8.1.5,ctime=1"]
VENDORS = ["GenuineIntel", "AuthenticAMD"]


def _unnamed(message: str) -> str:
    """A refusal without the node it names (one oracle process keeps its first node name)."""
    return re.sub(r"node '[^']*'$", "node NODE", message.strip())


def _resolved(cmdline: str, qemu: str) -> str | None:
    """The machine QEMU runs for `-machine type=T`: an alias (pc, q35) is the binary's own
    version (what query-machines then reports as current), with the +pveN passed."""
    m = re.search(r"type=([^,' ]+)", cmdline)
    if not m:
        return None
    short = ".".join(qemu.split(".")[:2])
    alias = re.fullmatch(r"(pc|q35)(\+pve\d+)", m.group(1))
    if alias:
        family = "q35" if alias.group(1) == "q35" else "i440fx"
        return f"pc-{family}-{short}{alias.group(2)}"
    return m.group(1)


def _config(machine: str, ostype: str, meta: str | None) -> str:
    text = f"ostype: {ostype}\nmemory: 2048\n"
    text += f"machine: {machine}\n" if machine else ""
    return text + (f"meta: {meta}\n" if meta else "")


@pytest.mark.parametrize("qemu", QEMUS)
def test_the_machine_a_vm_runs_and_the_starts_refused_are_proxmoxs(
    oracle: Any, qemu: str
) -> None:
    wrong: list[str] = []
    for machine, ostype, meta, vendor in itertools.product(MACHINES, OSTYPES, METAS, VENDORS):
        res = oracle.cmd(_config(machine, ostype, meta), qemu_version=qemu, nodename="pve",
                         cpu_vendor=vendor)
        refusal = version_error(machine or None, qemu, ostype, meta, "pve")
        where = f"qemu {qemu}, {vendor}, machine {machine!r}, ostype {ostype}, meta {meta}"
        if not res.ok:
            if refusal is None or res.error is None or _unnamed(refusal) != _unnamed(res.error):
                wrong.append(f"{where}: Proxmox refuses {res.error!r}, simulator {refusal!r}")
            continue
        if refusal is not None:
            wrong.append(f"{where}: Proxmox starts it, simulator refuses {refusal!r}")
            continue
        runs = _resolved(res.cmdline or "", qemu)
        says = running_machine(machine or None, qemu, ostype, meta, vendor)
        if says != runs:
            wrong.append(f"{where}: runs {runs}, simulator says {says}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("qemu", QEMUS)
def test_a_windows_ostype_pins_the_machine_as_proxmox_pins_it(oracle: Any, qemu: str) -> None:
    for machine, ostype in itertools.product(MACHINES, OSTYPES):
        answer = oracle.ask("machine", machine, qemu_version=qemu, ostype=ostype)
        pinned = answer.get("pinned_on_create") or None
        want = pinned if pinned and pinned != machine else None
        got = pinned_for_windows(machine or None, ostype, qemu)
        assert got == want, f"qemu {qemu}, machine {machine!r}, ostype {ostype}"


def test_qm_set_ostype_pins_an_unversioned_machine_like_proxmox(
    oracle: Any, own: Callable[..., Any],  # noqa: F811
) -> None:
    info, _, ticket = own()  # kpro6: QEMU 10.1.2; VM 101 is stopped, no machine line
    vm = ticket.nodes(info.node).qemu(101)
    vm.config.put(ostype="win11")
    want = oracle.ask("machine", "", qemu_version="10.1.2", ostype="win11")["pinned_on_create"]
    assert vm.config.get()["machine"] == want
    vm.config.put(ostype="win10", machine="q35")  # an explicit machine is honoured as given
    assert vm.config.get()["machine"] == "q35"
    wait_task(ticket, vm.status.start.post())
    status = vm.status.current.get()
    meta = vm.config.get().get("meta")
    res = oracle.cmd(_config("q35", "win10", meta), qemu_version="10.1.2",
                     cpu_vendor="AuthenticAMD")
    assert status["running-machine"] == _resolved(res.cmdline or "", "10.1.2")
