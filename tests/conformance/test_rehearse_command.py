"""The rehearsal's QEMU command holds Proxmox's placement-deciding parts: for generated VM configs
with a [PENDING] section (values and deletes), the command pvefix builds for the next start
(vmconfig/nextstart.py) has the machine type, `-cpu` and its bits, `-m` with memory hotplug's
slots/maxmem and DIMMs, the OVMF code file, the `-fw_cfg` and pci-hole64 words and each passed
device's bus and slot, and the pci-bridges and virtio functions (each one's model, bus and slot:
the balloon, the agent's and spice's serial, virtio disks, NICs, SCSI, the RNG, a virtio GPU)
that qemu-server's own config_to_command (the oracle's `cmd`) gives that next start; where
Proxmox refuses the memory layout, pvefix refuses it too (conformance: `make conformance`)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pvefix.rehearse.build import HostCpu, Inputs, NodeFacts, build_job
from pvefix.rehearse.command import ProxmoxRefuses
from pvefix.rehearse.flow import sections

pytestmark = pytest.mark.conformance

HOST_BITS = 46  # what the oracle's host reports (pve_oracle.pl mocks get_host_phys_address_bits)
FILES = ("OVMF_CODE.fd", "OVMF_VARS.fd", "OVMF_CODE_4M.fd", "OVMF_CODE_4M.secboot.fd",
         "OVMF_VARS_4M.fd", "OVMF_VARS_4M.ms.fd")
EFIDISKS = ("local-lvm:vm-100-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M",
            "local-lvm:vm-100-disk-0,efitype=4m,size=4M", "local-lvm:vm-100-disk-0,size=128K")
MEMORY_REFUSALS = ("NUMA needs", "Total memory is bigger", "minimum memory", "custom NUMA",
                   "must be aligned")


@st.composite
def cpus(draw: st.DrawFn) -> str:
    model = draw(st.sampled_from(["kvm64", "qemu64", "host", "x86-64-v2-AES", "x86-64-v3",
                                  "EPYC", "Skylake-Server"]))
    parts = [model]
    phys = draw(st.sampled_from([None, "host", "39", "40", "43", "46", "48", "52"]))
    if phys:
        parts.append(f"phys-bits={phys}")
    guest = draw(st.sampled_from([None, 39, 44, 46]))
    if guest:
        parts.append(f"guest-phys-bits={guest}")
    flags = draw(st.lists(st.sampled_from(["+pdpe1gb", "-pdpe1gb", "+aes"]), unique=True,
                          max_size=2))
    if flags:
        parts.append("flags=" + ";".join(flags))
    if draw(st.booleans()):
        parts.append("hidden=1")
    return ",".join(parts)


@st.composite
def configs(draw: st.DrawFn) -> dict[str, str]:
    q35 = draw(st.booleans())
    out: dict[str, str | None] = {
        "machine": draw(st.sampled_from(["q35", "pc-q35-8.1", "pc-q35-9.2+pve1"] if q35 else
                                        [None, "pc", "pc-i440fx-9.2"])),
        "ostype": draw(st.sampled_from([None, "l26", "win11"])),
        "cpu": draw(st.one_of(st.none(), cpus())),
        "memory": draw(st.sampled_from(["2048", "4096", "8192", "600000", "1572864"])),
        "hotplug": draw(st.sampled_from([None, "1", "0", "disk,network,memory", "memory"])),
        "numa": draw(st.sampled_from([None, "0", "1", "1", "1"])),
        "sockets": draw(st.sampled_from([None, "2"])),
        "bios": draw(st.sampled_from([None, "ovmf"])),
        "efidisk0": draw(st.sampled_from([None, *EFIDISKS])),
    }
    args = draw(st.lists(st.sampled_from([
        "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144",
        "-global q35-pcihost.pci-hole64-size=2048G",
        "-set device.hostpci0.x-nv-gpudirect-clique=0"]), unique=True, max_size=2))
    out["args"] = " ".join(args) or None
    for n in draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 6]), unique=True, max_size=5)):
        out[f"hostpci{n}"] = f"0000:0{n + 1}:00.0" + (
            ",pcie=1" if q35 and draw(st.booleans()) else "")
    out.update(draw(devices()))
    return {k: v for k, v in out.items() if v is not None}


@st.composite
def devices(draw: st.DrawFn) -> dict[str, str]:
    """The devices that give a VM virtio functions, or not."""
    out = {"balloon": draw(st.sampled_from([None, "0", "1024"])),
           "agent": draw(st.sampled_from([None, "1", "0", "enabled=1,type=isa"])),
           "vga": draw(st.sampled_from([None, "std", "qxl", "virtio", "std,clipboard=vnc"])),
           "scsihw": draw(st.sampled_from([None, "lsi", "virtio-scsi-pci",
                                           "virtio-scsi-single"])),
           "rng0": draw(st.sampled_from([None, "source=/dev/urandom"]))}
    for n in draw(st.lists(st.sampled_from([0, 1, 6, 7]), unique=True, max_size=2)):
        model = draw(st.sampled_from(["virtio", "e1000"]))
        out[f"net{n}"] = f"{model}=BC:24:11:00:00:0{n},bridge=vmbr0"
    for kind, numbers in (("virtio", [0, 5, 6]), ("scsi", [0, 2])):
        for n in draw(st.lists(st.sampled_from(numbers), unique=True, max_size=2)):
            out[f"{kind}{n}"] = f"local:100/vm-100-disk-{kind}{n}.raw,size=1G"
    return {k: v for k, v in out.items() if v is not None}


@st.composite
def staged(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A config file whose main section is one generated config and whose [PENDING] section
    sets some keys of another and deletes some keys; and that file's next start."""
    now, then = draw(configs()), draw(configs())
    moved = draw(st.lists(st.sampled_from(sorted(then)), unique=True, max_size=4)) if then \
        else []
    gone = draw(st.lists(st.sampled_from(sorted(now)), unique=True, max_size=3)) if now else []
    gone = [k for k in gone if k not in moved]
    text = "".join(f"{k}: {v}\n" for k, v in now.items())
    if moved or gone:
        text += "\n[PENDING]\n" + "".join(f"{k}: {then[k]}\n" for k in moved)
        text += f"delete: {','.join(gone)}\n" if gone else ""
    return text, sections(text, "100.conf")[1]


def opts_of(cmdline: str) -> list[tuple[str, str]]:
    words = shlex.split(cmdline)
    return [(w, words[i + 1]) for i, w in enumerate(words[:-1]) if w.startswith("-")]


def _values(opts: list[tuple[str, str]], name: str) -> list[str]:
    return [v for n, v in opts if n == name]


def _type(opts: list[tuple[str, str]]) -> str:
    machine = _values(opts, "-machine")[-1]
    return next(p[5:] for p in machine.split(",") if p.startswith("type="))


def _code_file(opts: list[tuple[str, str]]) -> str | None:
    for name, value in opts:
        m = re.search(r'"filename":"([^"]+)"},"node-name":"pflash0"', value) if \
            name == "-blockdev" else re.search(r"if=pflash,unit=0,.*file=([^,]+)", value) if \
            name == "-drive" else None
        if m:
            return m.group(1).rsplit("/", 1)[-1]
    return None


def _dimms(opts: list[tuple[str, str]]) -> list[str]:
    return [re.sub(r"^memory-backend-\w+,", "", v).split(",mem-path")[0]
            for v in _values(opts, "-object") if "id=mem-dimm" in v]


def _cpu_set(value: str) -> set[str]:
    return {p for p in value.split(",") if not p.startswith("hv_")}


def compare(ours: Any, opts: list[tuple[str, str]], config: dict[str, str]) -> None:
    mine = opts_of(shlex.join(ours.argv))
    assert ours.machine == _type(opts)
    assert _cpu_set(ours.cpu) == _cpu_set(_values(opts, "-cpu")[-1])
    assert _values(mine, "-m") == _values(opts, "-m")
    assert _dimms(mine) == _dimms(opts)
    if config.get("bios") == "ovmf":
        assert _code_file(mine) == _code_file(opts)
    assert _values(mine, "-fw_cfg") == _values(opts, "-fw_cfg")
    hole = [v for v in _values(opts, "-global") if "pci-hole64" in v]
    assert [v for v in _values(mine, "-global") if "pci-hole64" in v] == hole
    assert _functions(mine) == _functions(opts)
    buses = {}
    for value in _values(opts, "-device"):
        if value.startswith("vfio-pci,"):
            props = dict(p.split("=", 1) for p in value.split(",")[1:] if "=" in p)
            buses[props["id"]] = (props["bus"], props["addr"])
    for d in ours.stand_ins:
        theirs = buses.get(d.id) or buses.get(f"{d.id}.0")  # one stand-in per entry here
        assert theirs is not None and (d.bus, d.addr.split(".")[0]) == (
            theirs[0], theirs[1].split(".")[0]), (d, buses)  # the entry's slot


def _functions(opts: list[tuple[str, str]]) -> set[tuple[str, str | None, str | None]]:
    """The pci-bridges and virtio functions of a command: (model, bus, addr) each (an
    i440fx's bridges included: q35's come from pve-q35-4.0.cfg, which pvefix adds itself)."""
    out = set()
    for value in _values(opts, "-device"):
        model = value.split(",", 1)[0]
        if (model.startswith(("virtio-", "vhost-")) and model != "virtio-iommu-pci"
                and model != "virtio-serial-port") or (
                model == "pci-bridge" and "bus=pcidmi" not in value):
            props = dict(p.split("=", 1) for p in value.split(",")[1:] if "=" in p)
            out.add((model.replace("-gl", ""), props.get("bus"), props.get("addr")))
    return out


@pytest.mark.parametrize(("qemu", "vendor"), [("9.2.0", "AuthenticAMD"),
                                             ("11.0.0", "GenuineIntel")])
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(staged())
@example(case=("", {"memory": "4096", "hotplug": "memory", "numa": "1",
                    "cpu": "kvm64,phys-bits=43"}))
@example(case=("", {"memory": "65536", "hotplug": "memory", "numa": "1",
                    "cpu": "kvm64,phys-bits=46"}))  # Proxmox: not a whole number of DIMMs
@example(case=("", {"memory": "65536", "hotplug": "disk,network,memory", "numa": "1",
                    "machine": "q35", "cpu": "host,guest-phys-bits=39", "bios": "ovmf",
                    "efidisk0": EFIDISKS[0], "hostpci0": "0000:01:00.0,pcie=1",
                    "args": "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144"}))
def test_the_next_starts_command_parts_are_proxmoxs(
        oracle: Any, qemu: str, vendor: str, case: tuple[str, dict[str, str]]) -> None:
    _, config = case
    text = "".join(f"{k}: {v}\n" for k, v in config.items())
    res = oracle.cmd(text, vmid=100, qemu_version=qemu, cpu_vendor=vendor)
    functions = {k: [(k, 1 << 30)] for k in config if k.startswith("hostpci")}
    node = NodeFacts(qemu="/usr/bin/kvm",
                     qemu_version=f"QEMU emulator version {qemu} (pve-qemu-kvm)",
                     firmware_dir="/usr/share/pve-edk2-firmware", firmware_files=FILES)
    inputs = Inputs(planned=config, functions=functions, node=node,
                    host=HostCpu(vendor, HOST_BITS), accel="kvm")
    try:
        ours = build_job(inputs)
    except ProxmoxRefuses as exc:
        assert not res.ok, (text, exc.message)
        return
    if not res.ok:
        assert not any(r in (res.error or "") for r in MEMORY_REFUSALS), (text, res.error)
        return  # a refusal outside the command's placement parts
    assert res.cmdline
    compare(ours, opts_of(res.cmdline), config)


@pytest.mark.parametrize(("qemu", "vendor"), [("9.2.0", "GenuineIntel"),
                                             ("11.0.0", "AuthenticAMD")])
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(configs())
def test_the_simulators_showcmd_has_proxmoxs_parts(oracle: Any, qemu: str, vendor: str,
                                                  config: dict[str, str]) -> None:
    """The simulator's `qm showcmd` (what it answers where pvefix or an admin reads it): the
    machine type with its +pveN, `-cpu`, `-m` with memory hotplug, the DIMMs, the OVMF code
    file, i440fx's pci-bridges and the virtio functions are those of Proxmox's
    config_to_command; a config Proxmox refuses, it refuses."""
    from pvefix.errors import PvefixError
    from pvefix.sim.qemu_cmdline import showcmd
    from pvefix.vmconfig import VMConfig

    config = {k: v for k, v in config.items() if not k.startswith("hostpci")}
    text = "".join(f"{k}: {v}\n" for k, v in config.items())
    res = oracle.cmd(text, vmid=100, qemu_version=qemu, cpu_vendor=vendor)
    try:
        shown = showcmd(100, VMConfig.parse(text), [], {}, qemu, HOST_BITS, vendor)
    except PvefixError as exc:
        assert not res.ok, (text, exc.message)
        return
    if not res.ok:
        assert not any(r in (res.error or "") for r in MEMORY_REFUSALS), (text, res.error)
        return
    assert res.cmdline
    mine = opts_of(" ".join(shown.replace("\\\n", " ").split("\n")))
    theirs = opts_of(res.cmdline)
    assert _type(mine) == _type(theirs)
    assert _cpu_set(_values(mine, "-cpu")[0]) == _cpu_set(_values(theirs, "-cpu")[-1])
    assert _values(mine, "-m") == _values(theirs, "-m")
    assert _dimms(mine) == _dimms(theirs)
    if config.get("bios") == "ovmf":
        assert _code_file(mine) == _code_file(theirs)
    assert _functions(mine) == _functions(theirs)
