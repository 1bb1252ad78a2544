"""Generated VMs, rehearsed as an admin rehearses them and run through fw-lab with Proxmox's
topology (conformance: `make conformance`; bounded: five VMs from a fixed seed, one TCG boot of
fw-lab beside one of pvefix at a time: 53-63 s on the 2-core CI machine at a load of 7-10;
300 s at most).

Each VM is a Proxmox config drawn from a fixed seed (firmware set, CPU vendor, model,
phys-bits, 1 GiB pages, RAM, BAR count and size, X-PciMmio64Mb, memory hotplug) whose
[PENDING] section changes part of it. It lives on a simulated node of its own: a copy of the
kpro6 host tree whose CPU vendor is the VM's and whose eight GPUs have the VM's BAR size, the
VM running with its [PENDING] changes. `pvefix rehearse VMID` rehearses the VM's next start
there (API + SSH; the simulator's node runs rehearse's node script for real, with this
machine's QEMU and the firmware folder of fw-lab's set given by `--firmware-dir`). fw-lab
boots the same next start with `--topo proxmox` (q35's four root ports, empty ones included),
pve-q35's pci-bridges, and the pci-bridges and virtio functions of Proxmox's own command
(tests/shared.py proxmox_function_words; the VMs draw the balloon, virtio NICs, disks, SCSI,
the agent and a virtio GPU). kpro6's GPUs have no I/O BAR; their 32 MiB BAR3 is taken off here,
so each has one 64-bit BAR as fw-lab's `ivshmem` stand-ins do. The outcomes and the addresses
of the placed BARs must agree.

Memory hotplug (`hotplug` with `memory`, `numa: 1`): fw-lab has no option for it, but its
`--qemu-extra` words are appended to its command and QEMU merges every `-m` into one set of
memory options (the last value of each key counts: fw-lab's `-m 1024` and Proxmox's
`-m size=1024,slots=255,maxmem=M` give Proxmox's layout), so fw-lab boots Proxmox's own
memory words: `-m`, the `ram-node0` backend with its `-numa` node (its `cpus=` narrowed to
fw-lab's single vCPU) and every `mem-dimmN` backend with its `pc-dimm`, as qemu-server's
config_to_command (../shared/pve-oracle) gives them for the next start, never pvefix's.
fw-lab's RAM overlap check is blind there (with a NUMA memory device `info mtree` shows the
RAM aliases as i/o, not ram; pvefix's node script reads both): it would miss only BARs over
the RAM, and no firmware placed one there. A hotplug config Proxmox refuses (no NUMA; a
memory size that is no whole number of DIMMs, e.g. 65536) must be `qemu-refused` with
Proxmox's reason, with no boot on either side.

fw-lab reads query-pci 1 s after OVMF writes BootOrder; on a loaded machine OVMF may not have
turned the BARs' decoding on by then (seen once in this test: both stand-ins unprogrammed where
five more runs of the same VM placed them at pvefix's addresses; pvefix's node script reads
again until they show, tests/rehearse/test_node_settle.py). That race only makes fw-lab say
not-placed, so where pvefix says placed and fw-lab not, fw-lab is asked once more, and its
second answer must agree.
"""

from __future__ import annotations

import itertools
import json
import random
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pvefix.hosttree import materialize_scenario
from pvefix.main import main
from pvefix.rehearse.flow import sections
from pvefix.sim.serve import write_ready_file
from tests.shared import SHARED, fwlab_module, proxmox_function_words, pve_q35_bridges

pytestmark = pytest.mark.conformance
G = 1 << 30
FIRMWARE = SHARED / "fw-lab" / "firmware"
SETS = {"edk2-2025.02": "ovmf", "edk2-2022.11": "ovmf", "seabios-1.16.3": "seabios",
        "seabios-1.16.2": "seabios"}
VENDORS = {"amd": "AuthenticAMD", "intel": "GenuineIntel"}
OUTCOMES = {"placed": "placed", "not-placed": "not-placed", "no-boot-timeout": "no-boot",
            "qemu-refused": "qemu-refused"}
TIMEOUT = 90  # s until "would not boot": generous for TCG under load
VMID = 9100
# kpro6's eight GPUs (RTX PRO 6000: BAR1 is the 64-bit one), one behind each root complex
GPUS = tuple(f"0000:{bus:02x}:00.0" for bus in range(0x01, 0x100, 0x20))
SEED = 31  # three firmware sets, both vendors, 32 and 128 GiB BARs, i440fx; memory hotplug
# placed (OVMF, SeaBIOS) and refused (65536 MiB: not a whole number of DIMMs), X-PciMmio64Mb


def _vm(rng: random.Random) -> dict[str, Any]:
    """One generated VM: its firmware set, vendor, BARs and config file text (the main
    section a running VM started with, [PENDING] what it will start with next)."""
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
    if rng.random() < 0.5:  # memory hotplug staged; Proxmox refuses it without NUMA
        later["hotplug"] = "disk,network,usb,memory"
        if rng.random() < 0.8:
            later["numa"] = "1"
    count, gib = rng.choice([1, 2, 4, 8]), rng.choice([32, 128, 128])
    for i in range(count):
        now[f"hostpci{i}"] = GPUS[i] + (",pcie=1" if q35 else "")
    now.update(_virtio(random.Random(rng.random())))
    text = "".join(f"{k}: {v}\n" for k, v in now.items())
    text += "\n[PENDING]\n" + "".join(f"{k}: {v}\n" for k, v in later.items())
    return {"fwset": fwset, "vendor": rng.choice(sorted(VENDORS)), "bars": (count, gib),
            "text": text, "bits": bits, "cpu": cpu, "pdpe1gb": bool(flags),
            "hotplug": "hotplug" in later}


def _virtio(rng: random.Random) -> dict[str, str]:
    """The VM's other devices that take window space (its own stream, so the draws above stay
    the seed's): the balloon or not, virtio NICs (one past net5: on pci.1), disks, SCSI, the
    agent, a virtio GPU."""
    out: dict[str, str] = {}
    if rng.random() < 0.3:
        out["balloon"] = "0"
    for n in rng.sample([0, 1, 6], rng.randint(0, 2)):
        out[f"net{n}"] = f"virtio=BC:24:11:00:00:{n:02x},bridge=vmbr0"
    if rng.random() < 0.5:
        out["virtio0"] = "local:9100/vm-9100-disk-0.raw,size=8G"
    if rng.random() < 0.5:
        out["scsihw"] = rng.choice(["virtio-scsi-pci", "virtio-scsi-single"])
        out["scsi0"] = "local:9100/vm-9100-disk-1.raw,size=8G"
    if rng.random() < 0.5:
        out["agent"] = "1"
    if rng.random() < 0.3:
        out["vga"] = "virtio"
    return out


def _tree(vm: dict[str, Any], where: Path) -> Path:
    """kpro6's host tree with the VM's CPU vendor, every GPU's BAR1 of the VM's size, and the
    VM (running: its [PENDING] waits for the next start)."""
    materialize_scenario("kpro6", where)
    meta_path = where / "pvefix-host.json"
    meta = json.loads(meta_path.read_text())
    meta["cpu"]["vendor"] = VENDORS[vm["vendor"]]
    if vm["vendor"] == "intel":
        meta["cpu"]["model"] = "Intel(R) Xeon(R) 6960P"
    machine = "pc-q35-10.1+pve0" if "machine: q35" in vm["text"] else "pc-i440fx-10.1+pve0"
    meta["vms"][str(VMID)] = {"status": "running", "running_machine": machine,
                              "uptime": 86400, "qmpstatus": "running"}
    meta_path.write_text(json.dumps(meta, indent=2))
    size = vm["bars"][1] * G
    for resource in (where / "sys" / "devices").glob("pci*/*/*/resource"):
        if resource.parent.name not in GPUS:
            continue
        lines = resource.read_text().splitlines()
        start, _, flags = lines[1].split()
        lines[1] = f"{start} 0x{int(start, 16) + size - 1:016x} {flags}"
        lines[3] = " ".join(["0x" + "0" * 16] * 3)  # BAR3: one 64-bit BAR, as fw-lab's
        resource.write_text("\n".join(lines) + "\n")
    (where / "etc" / "pve" / "qemu-server" / f"{VMID}.conf").write_text(vm["text"])
    return where


def _memory_words(cmdline: str) -> list[str]:
    """Proxmox's memory-hotplug words of its command: `-m`, the NUMA node's backend and node
    (on fw-lab's one vCPU), each DIMM's backend and device."""
    words = shlex.split(cmdline)
    out: list[str] = []
    for opt, value in itertools.pairwise(words):
        if opt == "-m" or (opt in ("-object", "-device") and
                           ("id=mem-dimm" in value or "id=dimm" in value
                            or "id=ram-node" in value)):
            out += [opt, value]
        elif opt == "-numa":
            out += [opt, ",".join("cpus=0" if p.startswith("cpus=") else p
                                  for p in value.split(","))]
    return out


def _lab(vm: dict[str, Any], config: dict[str, str], extra: list[str],
         devices: list[str]) -> dict[str, Any]:
    """fw-lab's options for the next start: its stand-ins with no I/O BAR (ivshmem, as
    kpro6's GPUs have none), Proxmox's buses, its virtio functions (`devices`) and memory."""
    count, gib = vm["bars"]
    q35 = config["machine"] == "q35"
    ram = f"{int(config['memory']) // 1024}G" if not extra else "1G"  # hotplug: -m size=
    out: dict[str, Any] = {"firmware_set": vm["fwset"], "machine": config["machine"],
                           "cpu": vm["cpu"], "vendor": vm["vendor"], "bars": f"{count}x{gib}G",
                           "ram": ram, "dev": "ivshmem", "timeout": TIMEOUT,
                           "topo": "proxmox" if q35 else "root",
                           "qemu_extra": extra + (pve_q35_bridges() if q35 else []) + devices}
    if vm["bits"]:
        out["phys_bits"] = str(vm["bits"])
    if vm["pdpe1gb"]:
        out["pdpe1gb"] = True
    if "args" in config:
        out["mmio64_mb"] = int(config["args"].rsplit("=", 1)[1])
    return out


def _rehearse(vm: dict[str, Any], fresh_sim: Any, where: Path,
              capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`pvefix rehearse VMID` against the VM's simulated node: its JSON verdict."""
    info = fresh_sim(str(_tree(vm, where / "tree")))
    ready = where / "ready.json"
    write_ready_file(info, ready)
    main(["rehearse", str(VMID), "--connection", str(ready), "--accel", "tcg",
          "--firmware-dir", str(FIRMWARE / vm["fwset"]), "--boot-timeout", str(TIMEOUT),
          "--format", "json", "--show-command"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    verdict: dict[str, Any] = json.loads(out)
    return verdict


@pytest.mark.timeout(300)
def test_generated_next_starts_rehearsed_on_a_node_get_fw_labs_verdict(
        oracle: Any, fresh_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    fwlab = fwlab_module()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    rng = random.Random(SEED)
    vms = [_vm(rng) for _ in range(5)]
    configs = [sections(vm["text"], f"{VMID}.conf")[1] for vm in vms]
    assert all("[PENDING]" in vm["text"] for vm in vms)
    proxmox = [oracle.cmd("".join(f"{k}: {v}\n" for k, v in config.items()), vmid=VMID,
                          cpu_vendor=VENDORS[vm["vendor"]])
               for vm, config in zip(vms, configs, strict=True)]
    labs = [_lab(vm, config, _memory_words(res.cmdline) if vm["hotplug"] and res.ok else [],
                 proxmox_function_words(res.cmdline or "", config["machine"] == "q35"))
            for vm, config, res in zip(vms, configs, proxmox, strict=True)]
    booted = [i for i, res in enumerate(proxmox) if res.ok]
    with ThreadPoolExecutor(1) as pool:  # fw-lab's boots beside pvefix's, one each at a time
        running = pool.submit(fwlab.run_many, [labs[i] for i in booted], 1)
        verdicts = [_rehearse(vm, fresh_sim, tmp_path / str(n), capsys)
                    for n, vm in enumerate(vms)]
        lab_verdicts = dict(zip(booted, running.result(), strict=True))
    for n, (vm, verdict, res) in enumerate(zip(vms, verdicts, proxmox, strict=True)):
        why = (vm["text"], verdict["message"], verdict.get("boot_s"), verdict.get("command"))
        if not res.ok:  # Proxmox would not start it: neither boots
            assert verdict["outcome"] == "qemu-refused", why
            assert res.error and res.error.rstrip(".") in verdict["message"], (why, res.error)
            continue
        lab = lab_verdicts[n]
        if verdict["outcome"] == "placed" and lab["outcome"] == "not-placed":
            lab = fwlab.run(labs[n])  # fw-lab's read may come before OVMF's decoding: ask again
        assert verdict["outcome"] == OUTCOMES.get(lab["outcome"]), (why, lab.get("why"),
                                                                    lab.get("wall_s"))
        if verdict["outcome"] in ("placed", "not-placed"):
            placed = sorted(b["address"] for b in verdict["bars"] if b["status"] == "placed")
            assert placed == sorted(a for a in lab["bar_addrs"] if a), why
