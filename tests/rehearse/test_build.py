"""The rehearsal's QEMU command line: each part the next start's keys decide, and the stand-ins."""

from __future__ import annotations

import pytest

from pvefix.rehearse.build import (
    HostCpu,
    Inputs,
    Job,
    NodeFacts,
    RehearseRefused,
    available_machine,
    build_job,
    firmware,
    for_accel,
    stand_ins,
)
from pvefix.rehearse.command import ProxmoxRefuses

FW = NodeFacts(qemu="/usr/bin/kvm",
               qemu_version="QEMU emulator version 9.2.0 (pve-qemu-kvm_9.2.0-5)",
               firmware_dir="/fw",
               firmware_files=("OVMF_CODE.fd", "OVMF_VARS.fd", "OVMF_CODE_4M.fd",
                               "OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.fd",
                               "OVMF_VARS_4M.ms.fd"))
AMD52 = HostCpu("AuthenticAMD", 52)


def test_the_machine_type_is_proxmoxs_or_its_base_where_the_nodes_qemu_lacks_it() -> None:
    assert available_machine("q35+pve1", FW) == ("q35+pve1", [])  # Proxmox's QEMU
    debian = NodeFacts(qemu="q", qemu_version="QEMU emulator version 7.2.22 (Debian 1:7.2)")
    kind, notes = available_machine("q35+pve0", debian)
    assert kind == "q35" and "Proxmox's" in notes[0]
    listed = NodeFacts(qemu="q", machines=frozenset({"q35", "pc"}))
    assert available_machine("q35+pve0", listed)[0] == "q35"
    # a type the node's QEMU does not know stays: QEMU's refusal is the verdict
    assert available_machine("pc-q35-99.0+pve0", listed)[0] == "pc-q35-99.0+pve0"


def test_tcg_gets_the_hosts_width_and_vendor_and_no_kvm_only_flags() -> None:
    kvm = ("qemu64,+kvm_pv_unhalt,+kvm_pv_eoi,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3,+aes,"
           "+pdpe1gb,enforce,guest-phys-bits=39,host-phys-bits=true")
    assert for_accel(kvm, "kvm", AMD52)[:2] == (kvm, 52)
    cpu, bits, _ = for_accel(kvm, "tcg", AMD52)
    assert bits == 52
    assert cpu == ("qemu64,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3,+aes,+pdpe1gb,"
                   "guest-phys-bits=39,phys-bits=52,vendor=AuthenticAMD")
    cpu, bits, notes = for_accel("host,+kvm_pv_eoi", "tcg", HostCpu("GenuineIntel", 46))
    assert (cpu, bits) == ("max,phys-bits=46,vendor=GenuineIntel", 46) and notes
    # a named model keeps its own vendor; no phys-bits: QEMU's default
    assert for_accel("Skylake-Server,enforce", "tcg", AMD52)[:2] == ("Skylake-Server", None)
    with pytest.raises(RehearseRefused, match="phys-bits are unknown"):
        for_accel("qemu64,host-phys-bits=true", "tcg", HostCpu(None, None))


def test_firmware_is_the_nodes_code_file_and_a_fresh_vars_copy() -> None:
    argv, kind, template, notes = firmware({"bios": "ovmf"}, FW, False, True)
    assert kind == "ovmf" and template == "/fw/OVMF_VARS.fd" and notes == []
    assert "file=/fw/OVMF_CODE.fd" in argv[1] and argv[3].endswith("file=vars.fd")
    four = {"bios": "ovmf", "efidisk0": "local-lvm:vm-100-disk-0,efitype=4m"}
    argv, _, template, _ = firmware(four, FW, False, True)
    assert "file=/fw/OVMF_CODE_4M.secboot.fd" in argv[1] and template == "/fw/OVMF_VARS_4M.fd"
    assert not any("efidisk" in a or "/dev/" in a or "vm-100" in a for a in argv)
    ms = firmware({**four, "efidisk0": "x:1,efitype=4m,pre-enrolled-keys=1"}, FW, False, True)
    assert ms[2] == "/fw/OVMF_VARS_4M.ms.fd"
    assert "file=/fw/OVMF_CODE_4M.fd" in firmware(four, FW, False, False)[0][1]  # pc: no SMM
    assert firmware({}, FW, True, True) == ([], "seabios", None, [])
    seabios = NodeFacts(qemu="q", firmware_dir="/sb", firmware_files=("bios-256k.bin",))
    assert firmware({}, seabios, True, True)[0] == ["-bios", "/sb/bios-256k.bin"]
    with pytest.raises(RehearseRefused, match="no OVMF code file"):
        firmware({"bios": "ovmf"}, seabios, True, True)


def test_fallback_to_the_plain_4m_build_is_said() -> None:
    plain = NodeFacts(qemu="q", firmware_dir="/fw",
                      firmware_files=("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"))
    four = {"bios": "ovmf", "efidisk0": "x:1,efitype=4m,pre-enrolled-keys=1"}
    argv, _, template, notes = firmware(four, plain, True, True)
    assert "file=/fw/OVMF_CODE_4M.fd" in argv[1] and "secboot" in notes[0]
    assert template == "/fw/OVMF_VARS_4M.fd"



def test_the_nodes_own_folder_never_stands_one_image_in_for_another() -> None:
    """On the node's own folder the rehearsal boots exactly the file Proxmox's start opens: a
    2 MiB OVMF_CODE.fd missing (pve-edk2-firmware-legacy not installed) is refused, never
    replaced by the 4 MiB image, a build of its own since pve-edk2-firmware 4.2023.08. A
    folder given with --firmware-dir (one build) lends its other image, and the note says
    what a Proxmox node would have run instead."""
    only4m = NodeFacts(qemu="q", firmware_dir="/usr/share/pve-edk2-firmware",
                       firmware_files=("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd", "OVMF_VARS.fd"))
    with pytest.raises(RehearseRefused, match="stops without it"):
        firmware({"bios": "ovmf"}, only4m, False, True)
    argv, _, _, notes = firmware({"bios": "ovmf"}, only4m, True, True)
    assert "OVMF_CODE_4M.fd" in argv[1]
    assert "edk2 2023.02" in notes[0] and "pve-edk2-firmware-legacy" in notes[0]
    plain = NodeFacts(qemu="q", firmware_dir="/fw",
                      firmware_files=("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"))
    secboot = {"bios": "ovmf", "efidisk0": "x:1,efitype=4m"}
    with pytest.raises(RehearseRefused, match=r"OVMF_CODE_4M\.secboot\.fd"):
        firmware(secboot, plain, False, True)

def test_stand_ins_sit_where_qemu_server_puts_the_devices() -> None:
    planned = {"hostpci0": "0000:01:00,pcie=1", "hostpci5": "mapping=pool,pcie=1",
               "hostpci1": "0000:02:00.0", "hostpci6": "0000:03:00.0"}
    functions = {"hostpci0": [("0000:01:00.0", 128 << 30), ("0000:01:00.1", 1 << 30)],
                 "hostpci5": [("pool", 64 << 30)], "hostpci1": [("0000:02:00.0", 32 << 30)],
                 "hostpci6": []}
    devices = stand_ins(planned, functions, q35=True)
    assert [(d.id, d.bus, d.addr) for d in devices] == [
        ("hostpci0.0", "ich9-pcie-port-1", "0x0.0"), ("hostpci0.1", "ich9-pcie-port-1", "0x0.1"),
        ("hostpci1", "pci.0", "0x11"), ("hostpci5", "ich9-pcie-port-6", "0x0")]
    with pytest.raises(ProxmoxRefuses, match="pcie=1 needs a q35"):
        stand_ins(planned, functions, q35=False)


def test_every_64_bit_bar_of_an_entry_is_a_function_of_its_slot_up_to_eight() -> None:
    """A function's other 64-bit BARs (a GPU's BAR3) follow the entry's own functions in its
    slot, for a multi-function entry too; a slot holds 8 functions, and BARs beyond them are
    named as not booted (the verdict is then not established)."""
    from pvefix.rehearse.build import BarShape

    planned = {"hostpci0": "0000:01:00,pcie=1", "hostpci1": "0000:02:00,pcie=1",
               "machine": "q35"}
    functions = {"hostpci0": [("0000:01:00.0", 128 << 30), ("0000:01:00.1", 1 << 30)],
                 "hostpci1": [(f"0000:02:00.{f}", 16 << 30) for f in range(4)]}
    shapes = {"0000:01:00.0": BarShape(128 << 30, False, (32 << 20,)),
              **{f"0000:02:00.{f}": BarShape(16 << 30, False, (1 << 20, 2 << 20))
                 for f in range(4)}}
    left: list[str] = []
    devices = stand_ins(planned, functions, q35=True, shapes=shapes, left_out=left)
    first = [(d.id, d.addr, d.size) for d in devices if d.bus == "ich9-pcie-port-1"]
    assert first == [("hostpci0.0", "0x0.0", 128 << 30), ("hostpci0.1", "0x0.1", 1 << 30),
                     ("hostpci0.0-bar1", "0x0.2", 32 << 20)]
    second = [d.addr for d in devices if d.bus == "ich9-pcie-port-2"]
    assert second == [f"0x0.{f}" for f in range(8)]  # 4 functions + 4 of their 8 other BARs
    assert left == [
        "hostpci1 (0000:02:00,pcie=1): 4 of its functions' 12 64-bit BARs: a slot holds 8 "
        "stand-in functions"]
    alone: list[str] = []
    stand_ins({"hostpci0": planned["hostpci0"]}, functions, True, shapes, alone)
    assert alone == []


def _job(planned: dict[str, str], accel: str = "tcg", node: NodeFacts = FW) -> Job:
    inputs = Inputs(planned=planned, functions={"hostpci0": [("0000:01:00.0", 128 << 30)],
                                                "hostpci4": [("0000:81:00.0", 128 << 30)]},
                    node=node, host=AMD52, accel=accel)
    return build_job(inputs)


def test_the_job_keeps_nothing_of_the_vm_but_what_places_bars() -> None:
    argv = _job({"bios": "ovmf", "memory": "1572864", "machine": "q35",
                 "cpu": "x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb",
                 "efidisk0": "local-lvm:vm-100-disk-0,efitype=4m",
                 "hostpci0": "0000:01:00.0,pcie=1", "hostpci4": "0000:81:00.0,pcie=1"}).argv
    text = " ".join(argv)
    for gone in ("vfio", "-daemonize", "-blockdev", "-numa", "-vnc", "-netdev", "-pidfile",
                 "efidisk", "/var/run", "hugepages", "-smp 192", "vm-100", "-chardev"):
        assert gone not in text, gone
    assert argv[argv.index("-machine") + 1] == "type=q35+pve1,memory-backend=ram0"
    assert "memory-backend-file,id=ram0,size=1572864M,mem-path=ram,share=on" in argv
    assert "pci-testdev,membar=131072M,id=hostpci4,bus=ich9-pcie-port-5,addr=0x0" in argv
    assert "virtio-balloon-pci,id=balloon0,bus=pci.0,addr=0x3" in argv  # on unless balloon: 0
    assert any(a.startswith("pcie-root-port,id=ich9-pcie-port-5,") for a in argv)
    assert argv[:2] == ["-accel", "tcg,tb-size=64"] and "-display" in argv
    assert argv[argv.index("-sandbox") + 1].startswith("on,")


def test_the_vms_virtio_functions_boot_where_proxmox_puts_them_with_no_backend() -> None:
    """Each takes 64-bit window space (mmio.virtio_functions): booted on Proxmox's bus and
    slot, a disk on a null block device, a NIC with no network, virtiofs by a stand-in."""
    job = _job({"machine": "q35", "balloon": "0", "net0": "virtio=BC:24:11:00:00:01,bridge=v",
                "net1": "e1000=BC:24:11:00:00:02,bridge=v", "virtio7": "local:1,size=1G",
                "agent": "enabled=1,type=isa", "virtiofs0": "dirid=a", "vga": "qxl",
                "hostpci0": "0000:01:00.0,pcie=1"})
    argv = job.argv
    devices = [argv[n + 1] for n, a in enumerate(argv) if a == "-device"]
    virtio = [d for d in devices if d.startswith(("virtio", "vhost"))]
    assert virtio == ["virtio-serial,id=spice,bus=pci.0,addr=0x9",
                      "virtio-net-pci,id=net0,bus=pci.0,addr=0x12",
                      "virtio-blk-pci,drive=null-virtio7,id=virtio7,bus=pci.2,addr=0x2",
                      "virtio-rng-pci,id=virtiofs0"]
    assert argv[argv.index("-blockdev") + 1].startswith("driver=null-co,node-name=null-virtio7")
    assert any("virtiofs0: a virtio-rng-pci stands in" in n for n in job.notes)
    i440fx = _job({"machine": "pc", "scsihw": "virtio-scsi-single", "scsi3": "x:1",
                   "hostpci0": "0000:01:00.0"}).argv
    assert [a for a in i440fx if a.startswith("pci-bridge")] == [
        "pci-bridge,id=pci.1,chassis_nr=1,bus=pci.0,addr=0x1e",
        "pci-bridge,id=pci.2,chassis_nr=2,bus=pci.0,addr=0x1f",
        "pci-bridge,id=pci.3,chassis_nr=3,bus=pci.0,addr=0x5"]
    assert "virtio-scsi-pci,id=virtioscsi3,bus=pci.3,addr=0x4" in i440fx
    assert "pci-testdev,membar=131072M,id=hostpci0,bus=pci.0,addr=0x10" in i440fx
    assert "pci-testdev,membar=131072M,id=hostpci4,bus=pci.2,addr=0xd" in _job(
        {"machine": "pc", "hostpci4": "0000:81:00.0"}).argv


def test_memory_hotplug_starts_as_proxmox_starts_it() -> None:
    job = _job({"memory": "4096", "hotplug": "disk,network,memory", "numa": "1",
                "cpu": "x86-64-v2-AES,phys-bits=46", "machine": "q35"})
    argv = job.argv
    assert argv[argv.index("-m") + 1] == "size=1024,slots=255,maxmem=4194304M"
    assert argv[argv.index("-machine") + 1] == "type=q35+pve1"  # RAM on the NUMA node
    assert "node,nodeid=0,cpus=0,memdev=ram-node0" in argv
    dimms = [a for a in argv if a.startswith("pc-dimm,")]
    assert len(dimms) == 6 and job.ram_mb == 1024 and job.dimm_mb == 3072
    assert "memory-backend-file,id=mem-dimm5,size=512M,mem-path=.,share=on" in argv


def test_guest_phys_bits_reach_the_job_and_older_qemu_is_told_so() -> None:
    cpu = "host,guest-phys-bits=39"
    job = _job({"cpu": cpu}, accel="kvm")
    assert "guest-phys-bits=39" in job.cpu and job.guest_phys_bits == 39
    assert job.host_bits == 52 and not job.notes
    old = NodeFacts(qemu="q", qemu_version="QEMU emulator version 7.2.22", firmware_dir="/fw",
                    firmware_files=FW.firmware_files)
    job = _job({"cpu": cpu}, node=old)
    assert "guest-phys-bits" not in job.cpu and job.guest_phys_bits == 39
    assert any("predates guest-phys-bits" in n for n in job.notes)


def test_args_cpu_replaces_the_built_one_and_file_fw_cfg_never_reaches_qemu() -> None:
    job = _job({"cpu": "kvm64", "args": "-cpu host,phys-bits=40 -fw_cfg "
                "name=opt/ovmf/X-PciMmio64Mb,file=/etc/shadow -fw_cfg "
                "name=opt/ovmf/X-PciMmio64Mb,string=65536"}, accel="kvm")
    assert job.cpu == "host,phys-bits=40" and job.phys_bits == 40
    assert "/etc/shadow" not in " ".join(job.argv)
    assert job.argv[-2:] == ["-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=65536"]
    assert any("/etc/shadow" in n for n in job.notes)
