"""Generated VMs, rehearsed and run through fw-lab with Proxmox's topology (conformance:
`make conformance`, bounded: four VMs, fw-lab two at a time; six took 4 minutes on the
loaded 2-core CI machine, four about 2.5; 300 s at most).

Each VM is a Proxmox config drawn from a fixed seed (firmware set, CPU vendor, model,
phys-bits, 1 GiB pages, RAM, BAR count and size, X-PciMmio64Mb) with a [PENDING] section that
changes part of it. pvefix rehearses its next start (nextstart.py), with its own command
builder, node script and verdict through the local session; fw-lab boots the same next start
with `--topo proxmox` (q35's four root ports, empty ones included). The outcomes and the
addresses of the placed BARs must agree.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from pvefix.rehearse.build import HostCpu, Inputs, build_job
from pvefix.rehearse.flow import sections
from pvefix.rehearse.runner import read_facts, run_job
from pvefix.rehearse.verdict import judge
from pvefix.target.local import LocalShell
from pvefix.target.node import LocalNode
from tests.shared import SHARED, fwlab_module

pytestmark = pytest.mark.conformance
G = 1 << 30
FIRMWARE = SHARED / "fw-lab" / "firmware"
SETS = {"edk2-2025.02": "ovmf", "edk2-2022.11": "ovmf", "seabios-1.16.3": "seabios",
        "seabios-1.16.2": "seabios"}
VENDORS = {"amd": "AuthenticAMD", "intel": "GenuineIntel"}
OUTCOMES = {"placed": "placed", "not-placed": "not-placed", "no-boot-timeout": "no-boot",
            "qemu-refused": "qemu-refused"}
TIMEOUT = 90  # s until "would not boot": generous for TCG under load


def _vm(rng: random.Random) -> dict[str, Any]:
    """One generated VM: its firmware set, vendor, BARs and config file text."""
    fwset = rng.choice(sorted(SETS))
    ovmf = SETS[fwset] == "ovmf"
    q35 = ovmf or rng.random() < 0.5
    bits = rng.choice([None, 40, 44, 46, 46])
    cpu = rng.choice(["qemu64", "x86-64-v2-AES", "kvm64"])
    flags = "+pdpe1gb" if rng.random() < 0.5 else None
    now = {"memory": "2048", "cpu": cpu, "machine": "q35" if q35 else "pc"}
    if ovmf:
        now["bios"] = "ovmf"
    later: dict[str, str] = {
        "cpu": ",".join([cpu, *([f"phys-bits={bits}"] if bits else []),
                         *([f"flags={flags}"] if flags else [])]),
        "memory": str(rng.choice([2048, 8192, 65536]))}
    if ovmf and bits and bits >= 44 and rng.random() < 0.7:
        later["args"] = f"-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string={rng.choice([131072, 524288])}"
    count, gib = rng.choice([1, 2, 4, 8]), rng.choice([32, 128, 128])
    for i in range(count):
        now[f"hostpci{i}"] = f"0000:{i + 1:02x}:00.0" + (",pcie=1" if q35 else "")
    text = "".join(f"{k}: {v}\n" for k, v in now.items())
    text += "\n[PENDING]\n" + "".join(f"{k}: {v}\n" for k, v in later.items())
    return {"fwset": fwset, "vendor": rng.choice(sorted(VENDORS)), "bars": (count, gib),
            "text": text, "bits": bits, "cpu": cpu, "pdpe1gb": bool(flags)}


def _lab(vm: dict[str, Any], config: dict[str, str]) -> dict[str, Any]:
    count, gib = vm["bars"]
    q35 = config["machine"] == "q35"
    out: dict[str, Any] = {"firmware_set": vm["fwset"], "machine": config["machine"],
                           "cpu": vm["cpu"], "vendor": vm["vendor"], "bars": f"{count}x{gib}G",
                           "ram": f"{int(config['memory']) // 1024}G", "dev": "testdev",
                           "timeout": TIMEOUT, "topo": "proxmox" if q35 else "root"}
    if vm["bits"]:
        out["phys_bits"] = str(vm["bits"])
    if vm["pdpe1gb"]:
        out["pdpe1gb"] = True
    if "args" in config:
        out["mmio64_mb"] = int(config["args"].rsplit("=", 1)[1])
    return out


def _pvefix(vm: dict[str, Any], config: dict[str, str]) -> tuple[str, list[str], str]:
    count, gib = vm["bars"]
    functions = {f"hostpci{i}": [(f"0000:{i + 1:02x}:00.0", gib * G)] for i in range(count)}
    shell = LocalNode(LocalShell(timeout=30), "this host")
    node = read_facts(shell, "this host", str(FIRMWARE / vm["fwset"]), ["qemu-system-x86_64"])
    job = build_job(Inputs(planned=config, functions=functions, node=node,
                           host=HostCpu(VENDORS[vm["vendor"]], 52), accel="tcg",
                           explicit_firmware_dir=True))
    result = run_job(shell, job, node, vmid=9100, timeout=TIMEOUT, watch_stdin=False,
                     where="this host")
    outcome, message, bars = judge(result, job)
    return outcome, sorted(hex(b.address) for b in bars
                           if b.status == "placed" and b.address is not None), message


@pytest.mark.timeout(300)
def test_generated_next_starts_get_fw_labs_verdict() -> None:
    fwlab = fwlab_module()
    rng = random.Random(54)  # three firmware sets, X-PciMmio64Mb, 128 GiB BARs, i440fx
    vms = [_vm(rng) for _ in range(4)]
    configs = [sections(vm["text"], "gen.conf")[1] for vm in vms]
    assert all("[PENDING]" in vm["text"] for vm in vms)
    labs = fwlab.run_many([_lab(vm, c) for vm, c in zip(vms, configs, strict=True)], jobs=2)
    for vm, config, lab in zip(vms, configs, labs, strict=True):
        outcome, placed, message = _pvefix(vm, config)
        assert outcome == OUTCOMES.get(lab["outcome"]), (vm, message, lab.get("why"))
        if outcome in ("placed", "not-placed"):
            assert placed == sorted(a for a in lab["bar_addrs"] if a), vm
