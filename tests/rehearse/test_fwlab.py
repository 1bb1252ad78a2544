"""For real: pvefix rehearse's command and verdict against fw-lab's, with real QEMU and the
firmware sets of ../shared/fw-lab (conformance: `make conformance`).

Each config is given twice: as a Proxmox VM config for pvefix (its stand-ins, ports, -cpu, RAM
and firmware built by pvefix.rehearse, run by its node script through the local session), and
as fw-lab options. The outcome, the number of BARs placed and their addresses must agree.
fw-lab also boots the pci-bridges and virtio functions of Proxmox's own command for the config
(../shared/pve-oracle config_to_command: the balloon, on unless `balloon: 0`, and the rest),
so the rehearsal's own copies of them are held to Proxmox's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pvefix.rehearse.build import HostCpu, Inputs, build_job
from pvefix.rehearse.runner import read_facts, run_job
from pvefix.rehearse.verdict import judge
from pvefix.target.local import LocalShell
from pvefix.target.node import LocalNode
from tests.shared import SHARED, fwlab_module, proxmox_function_words, pve_q35_bridges

pytestmark = pytest.mark.conformance
G = 1 << 30
FIRMWARE = SHARED / "fw-lab" / "firmware"


@pytest.fixture(scope="module")
def fwlab() -> Any:
    return fwlab_module()  # type: ignore[no-any-return]


# (name, fw-lab firmware set, Proxmox config keys, bar count x GiB, fw-lab options, timeout:
# generous where the firmware boots, so a loaded machine's slow TCG is not a "would not boot")
CASES: list[tuple[str, str, dict[str, str], tuple[int, int], dict[str, Any], int]] = [
    ("B06 no 1G pages: OVMF caps at 40 bits", "edk2-2025.02",
     {"machine": "q35", "bios": "ovmf", "cpu": "x86-64-v2-AES,phys-bits=46"}, (8, 128),
     {"cpu": "x86-64-v2-AES", "phys_bits": "46"}, 120),
    ("B08 the story VM's phase 1", "edk2-2025.02",
     {"machine": "q35", "bios": "ovmf", "cpu": "x86-64-v2-AES,phys-bits=46,flags=+pdpe1gb"},
     (8, 128), {"cpu": "x86-64-v2-AES", "phys_bits": "46", "pdpe1gb": True}, 120),
    ("D05 X-PciMmio64Mb too small for four", "edk2-2025.02",
     {"machine": "q35", "bios": "ovmf", "cpu": "qemu64",
      "args": "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=524288"}, (4, 128),
     {"cpu": "qemu64", "mmio64_mb": 524288}, 120),
    ("A01 edk2 2022.11, one 32G BAR", "edk2-2022.11",
     {"machine": "q35", "bios": "ovmf", "cpu": "qemu64"}, (1, 32), {"cpu": "qemu64"}, 120),
    ("E07 SeaBIOS 1.16.3 at the top of 46 bits", "seabios-1.16.3",
     {"machine": "q35", "cpu": "qemu64,phys-bits=46"}, (8, 128),
     {"cpu": "qemu64", "phys_bits": "46"}, 120),
    ("E03 SeaBIOS 1.16.2 on i440fx", "seabios-1.16.2",
     {"cpu": "qemu64"}, (4, 128), {"machine": "pc", "cpu": "qemu64"}, 120),
    ("F02 RAM beyond 40 bits: QEMU refuses", "edk2-2025.02",
     {"machine": "q35", "bios": "ovmf", "cpu": "qemu64", "memory": str(1100 * 1024)}, (1, 32),
     {"cpu": "qemu64", "ram": "1100G"}, 120),
    ("V01 the balloon in an exact 32 GiB window", "edk2-2025.02",
     {"machine": "q35", "bios": "ovmf", "cpu": "qemu64,phys-bits=46",
      "args": "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=32768"}, (1, 32),
     {"cpu": "qemu64", "phys_bits": "46", "mmio64_mb": 32768}, 120),
    ("V02 i440fx's pci-bridges in an exact 128 GiB window", "edk2-2025.02",
     {"machine": "pc", "bios": "ovmf", "cpu": "qemu64,phys-bits=46", "balloon": "0",
      "args": "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=131072"}, (1, 128),
     {"machine": "pc", "cpu": "qemu64", "phys_bits": "46", "mmio64_mb": 131072}, 120),
    ("D06 window does not fit: OVMF hangs", "edk2-2025.02",
     {"machine": "q35", "bios": "ovmf", "cpu": "qemu64",
      "args": "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=1048576"}, (8, 128),
     {"cpu": "qemu64", "mmio64_mb": 1048576}, 30),
]
OUTCOMES = {"placed": "placed", "not-placed": "not-placed", "no-boot-timeout": "no-boot",
            "qemu-refused": "qemu-refused"}


def _config(keys: dict[str, str], count: int) -> dict[str, str]:
    config = {"memory": "2048", **keys}
    pcie = ",pcie=1" if "q35" in config.get("machine", "") else ""
    for i in range(count):
        config[f"hostpci{i}"] = f"0000:{i + 1:02x}:00.0{pcie}"
    return config


def _pvefix(fwset: str, keys: dict[str, str], bars: tuple[int, int],
            timeout: int, vmid: int = 9000) -> tuple[str, list[str | None], str]:
    count, gib = bars
    config = _config(keys, count)
    functions = {f"hostpci{i}": [(f"0000:{i + 1:02x}:00.0", gib * G)] for i in range(count)}
    shell = LocalNode(LocalShell(timeout=30), "this host")
    node = read_facts(shell, "this host", str(FIRMWARE / fwset), ["qemu-system-x86_64"])
    inputs = Inputs(planned=config, functions=functions, node=node,
                    host=HostCpu("AuthenticAMD", 48), accel="tcg", explicit_firmware_dir=True)
    job = build_job(inputs)
    result = run_job(shell, job, node, vmid=vmid, timeout=timeout, watch_stdin=False,
                     where="this host")
    outcome, message, verdicts = judge(result, job)
    return outcome, [None if b.status != "placed" or b.address is None else hex(b.address)
                     for b in verdicts], message


@pytest.mark.parametrize(("name", "fwset", "keys", "bars", "lab", "timeout"), CASES,
                         ids=[c[0].split()[0] for c in CASES])
def test_the_rehearsal_says_what_fw_lab_says(fwlab: Any, oracle: Any, name: str, fwset: str,
                                             keys: dict[str, str], bars: tuple[int, int],
                                             lab: dict[str, Any], timeout: int) -> None:
    count, gib = bars
    proxmox = oracle.cmd("".join(f"{k}: {v}\n" for k, v in _config(keys, count).items()))
    words = proxmox_function_words(proxmox.cmdline or "")
    topo: dict[str, Any] = {"qemu_extra": words}
    if "q35" in keys.get("machine", ""):  # Proxmox's ports and pci-bridges
        topo = {"topo": "proxmox", "qemu_extra": pve_q35_bridges() + words}
    lab_config = {"firmware_set": fwset, "bars": f"{count}x{gib}G", "dev": "testdev",
                  "vendor": "amd", "timeout": timeout, **topo, **lab}
    expected = fwlab.run(lab_config)
    outcome, addrs, message = _pvefix(fwset, keys, bars, timeout)
    if outcome == "placed" and expected["outcome"] == "not-placed" and not expected.get(
            "bars_assigned"):
        # fw-lab reads query-pci 1 s after OVMF's BootOrder; on a loaded machine the boot
        # manager may not have turned decoding on by then (every BAR reads unassigned):
        # that signature is booted again.
        expected = fwlab.run(lab_config)
    assert outcome == OUTCOMES[expected["outcome"]], (name, message, expected.get("why"))
    placed = sorted(a for a in addrs if a)
    if outcome in ("placed", "not-placed"):
        assert placed == sorted(a for a in expected["bar_addrs"] if a), name
    if outcome == "qemu-refused":
        assert "phys-bits too low" in message and "phys-bits too low" in expected["why"]


def test_the_rehearsal_leaves_nothing_behind(fwlab: Any, tmp_path: Path) -> None:
    import tempfile

    # A VMID no other test uses: the other rehearsals may run beside this one (xdist workers)
    # and their folders come and go meanwhile.
    ours = "pvefix-rehearse-9001-*"
    before = {p.name for p in Path(tempfile.gettempdir()).glob(ours)}
    _pvefix("edk2-2025.02", {"machine": "q35", "bios": "ovmf", "cpu": "qemu64"}, (1, 32), 60,
            vmid=9001)
    after = {p.name for p in Path(tempfile.gettempdir()).glob(ours)}
    assert after <= before
