"""Where ../shared lives, and one way for a test to need it.

CI has ../shared (the Proxmox corpus, the captured GPU fixtures, the pve-oracle) beside the
project; a user's clone usually does not. Tests that need it skip with a reason that starts with
NEEDS_SHARED, and the summary line counts them (tests/conftest.py), so a clone elsewhere still
passes `make test` and says how much it did not run.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest

SHARED = Path(os.environ.get("PVEFIX_SHARED", Path(__file__).resolve().parents[2] / "shared"))
CORPUS = SHARED / "corpus" / "qemu-server"
FIXTURES = SHARED / "fixtures"
ORACLE = SHARED / "pve-oracle"
NEEDS_SHARED = "needs ../shared"


def shared_path(relative: str) -> Path:
    """The path under ../shared, or skip the calling test saying what is missing."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{NEEDS_SHARED}: {path} is absent (set PVEFIX_SHARED to point at it)")
    return path


def shared_available(relative: str = "") -> bool:
    return (SHARED / relative).exists()


def fwlab_module(check: bool = True) -> Any:
    """../shared/fw-lab's `fwlab` module (real QEMU + firmware), or skip the calling test
    saying why: absent, or (with `check`) unable to run here by fw-lab's own readiness probe,
    `fwlab.preflight()`, asked once per test process. Imported without writing a __pycache__
    into ../shared (as root Python would, write bits or not)."""
    import sys

    if not (SHARED / "fw-lab" / "fwlab.py").is_file():
        pytest.skip(f"{NEEDS_SHARED}: {SHARED / 'fw-lab'} is absent")
    old, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    sys.path.insert(0, str(SHARED / "fw-lab"))
    try:
        import fwlab  # type: ignore[import-not-found]
    finally:
        sys.dont_write_bytecode = old
    why = _fwlab_why_not(fwlab) if check else None
    if why:
        pytest.skip(f"{NEEDS_SHARED}: fw-lab: {why}")
    return fwlab


@functools.cache
def _fwlab_why_not(fwlab: Any) -> str | None:
    why: str | None = fwlab.preflight()
    return why


FWLAB_EDK2 = SHARED / "fw-lab" / "firmware" / "edk2-2025.02"  # fw-lab's newest OVMF


def fwlab_edk2_and_qemu() -> Path:
    """fw-lab's edk2 2025.02 firmware folder, for a rehearsal with this machine's QEMU; or
    skip the calling test saying why fw-lab cannot run here (its `preflight()`: QEMU and the
    firmware files)."""
    fwlab_module()
    if not FWLAB_EDK2.is_dir():
        pytest.skip(f"{NEEDS_SHARED}: {FWLAB_EDK2} is absent")
    return FWLAB_EDK2


def pve_q35_bridges() -> list[str]:
    """QEMU arguments for qemu-server pve-q35-4.0.cfg's DMI bridge and its four SHPC
    pci-bridges pci.0-pci.3, there on every Proxmox q35 VM, empty or not: fw-lab's `--topo
    proxmox` lays out the four root ports only, and the firmware pads each bridge too
    (pvefix.planner.bar_verdict.hotplug_pad)."""
    from pvefix.planner.mmio import PVE_Q35_BRIDGES

    out = ["-device", "i82801b11-bridge,id=pcidmi,bus=pcie.0,addr=0x1e"]
    for n in range(PVE_Q35_BRIDGES):
        out += ["-device", f"pci-bridge,id=pci.{n},chassis_nr={n + 1},bus=pcidmi,addr={n + 1:#x}"]
    return out


PROXMOX_FUNCTIONS = ("pci-bridge", "virtio-balloon-pci", "virtio-serial", "virtio-blk-pci",
                     "virtio-net-pci", "virtio-scsi-pci", "virtio-rng-pci", "virtio-vga",
                     "virtio-vga-gl")
_BACKENDS = ("drive=", "netdev=", "chardev=", "rng=", "mac=", "bootindex=", "write-cache=",
             "iothread=", "num_queues=", "host_mtu=", "host_tunnel=", "rx_queue_size=",
             "tx_queue_size=", "max-bytes=", "period=", "free-page-reporting=", "vectors=",
             "mq=", "max_outputs=", "edid=")


def proxmox_function_words(cmdline: str, root_slots: bool = True) -> list[str]:
    """QEMU arguments for the pci-bridges and virtio functions of Proxmox's own command
    (../shared/pve-oracle config_to_command), on Proxmox's buses and slots, with their
    backends taken off (a virtio disk on a null block device): what fw-lab boots beside its
    stand-ins to judge a rehearsal of the same VM. `root_slots` False: devices on i440fx's
    root bus pci.0 get whatever slot QEMU gives (fw-lab's own stand-ins take the first slots
    there; the slot does not move a BAR)."""
    import itertools
    import shlex

    words = shlex.split(cmdline)
    out: list[str] = []
    for opt, value in itertools.pairwise(words):
        model = value.split(",", 1)[0]
        if opt != "-device" or model not in PROXMOX_FUNCTIONS:
            continue
        props = [p for p in value.split(",")[1:] if not p.startswith(_BACKENDS)]
        if not root_slots and "bus=pci.0" in props:
            props = [p for p in props if not p.startswith(("bus=", "addr="))]
        ident = next((p[3:] for p in props if p.startswith("id=")), "")
        if model == "virtio-blk-pci":
            props.insert(0, f"drive=null-{ident}")
            out += ["-blockdev", f"driver=null-co,node-name=null-{ident},read-zeroes=on"]
        out += ["-device", ",".join([model.replace("-gl", ""), *props])]
    return out
