"""The rehearsal's QEMU command line: showcmd parsing and each part the plan's keys decide."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import PvefixError
from pvefix.rehearse.build import (
    HostCpu,
    Inputs,
    NodeFacts,
    RehearseRefused,
    build_job,
    cpu_from_config,
    firmware,
    for_accel,
    machine_type,
    mmio_args,
    options,
    parse_showcmd,
    ram_mb,
    stand_ins,
)

SHOWCMD = """/usr/bin/kvm \\
  -id 100 \\
  -name 'llm-serve' \\
  -daemonize \\
  -blockdev '{"driver":"raw","file":{"driver":"file","filename":\
"/usr/share/pve-edk2-firmware//OVMF_CODE_4M.secboot.fd"},"node-name":"pflash0","read-only":true}' \\
  -smp '192,sockets=2,cores=96,maxcpus=192' \\
  -nodefaults \\
  -cpu 'qemu64,+aes,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3' \\
  -m 1572864 \\
  -device 'vfio-pci,host=0000:01:00.0,id=hostpci0,bus=pci.0,addr=0x10' \\
  -machine 'pflash0=pflash0,pflash1=drive-efidisk0,hpet=off,type=pc-i440fx-10.1+pve0'
"""
FW = NodeFacts(qemu="/usr/bin/kvm", firmware_dir="/fw",
               firmware_files=("OVMF_CODE_4M.fd", "OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.fd",
                               "OVMF_VARS_4M.ms.fd"))
AMD52 = HostCpu("AuthenticAMD", 52)


def test_showcmd_pretty_is_read_as_its_words() -> None:
    words = parse_showcmd(SHOWCMD)
    opts = options(words)
    assert words[0] == "/usr/bin/kvm"
    assert ("-daemonize", None) in opts and ("-nodefaults", None) in opts
    assert ("-m", "1572864") in opts
    assert dict(opts)["-machine"].endswith("type=pc-i440fx-10.1+pve0")


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")),
                        min_size=1, max_size=20), max_size=12))
def test_showcmd_parsing_gives_back_any_quoted_words(values: list[str]) -> None:
    words = ["/usr/bin/kvm"]
    for v in values:
        words += ["-x", v]
    pretty = " \\\n  ".join(shlex.quote(w) for w in words)
    assert parse_showcmd(pretty) == words


@pytest.mark.parametrize("text", ["", "   ", "500 unable to find configuration file",
                                  "/usr/bin/kvm 'unterminated"])
def test_showcmd_that_is_no_command_line_is_an_error(text: str) -> None:
    with pytest.raises(PvefixError, match="qm showcmd printed no command line"):
        parse_showcmd(text)


def test_machine_type_follows_the_plan_and_the_nodes_qemu() -> None:
    assert machine_type("pc-i440fx-10.1+pve0", None, None, frozenset()) == (
        "pc-i440fx-10.1+pve0", [])
    assert machine_type("pc-i440fx-10.1+pve0", None, "q35", frozenset())[0] == "q35+pve0"
    assert machine_type("pc", None, "pc-q35-8.1,viommu=intel", frozenset())[0] == "pc-q35-8.1"
    kind, notes = machine_type("pc+pve0", None, "q35", frozenset({"q35", "pc"}))
    assert kind == "q35" and "Proxmox's" in notes[0]
    # a type the node's QEMU does not know stays: QEMU's refusal is the verdict
    assert machine_type(None, None, "pc-q35-99.0", frozenset({"q35"}))[0] == "pc-q35-99.0"


@pytest.mark.parametrize(("cpu", "expected"), [
    (None, "kvm64,+lahf_lm,+sep,enforce,+kvm_pv_eoi,+kvm_pv_unhalt"),
    ("x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb",
     "qemu64,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3,+aes,+pdpe1gb,enforce,+kvm_pv_eoi,"
     "+kvm_pv_unhalt,host-phys-bits=true"),
    ("host", "host,+kvm_pv_eoi,+kvm_pv_unhalt"),
    ("Skylake-Server,hidden=1,phys-bits=46", "Skylake-Server,enforce,kvm=off,+kvm_pv_eoi,"
     "+kvm_pv_unhalt,phys-bits=46"),
])
def test_cpu_as_qemu_server_builds_it(cpu: str | None, expected: str) -> None:
    assert cpu_from_config(cpu) == expected


def test_a_custom_cpu_model_is_refused_with_the_reason() -> None:
    with pytest.raises(RehearseRefused, match="custom CPU model"):
        cpu_from_config("custom-mymodel")


def test_tcg_gets_the_hosts_width_and_vendor_and_no_kvm_only_flags() -> None:
    kvm = cpu_from_config("x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb")
    assert for_accel(kvm, "kvm", AMD52)[:2] == (kvm, 52)
    cpu, bits, _ = for_accel(kvm, "tcg", AMD52)
    assert bits == 52
    assert cpu == ("qemu64,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3,+aes,+pdpe1gb,phys-bits=52,"
                   "vendor=AuthenticAMD")
    cpu, bits, notes = for_accel("host,+kvm_pv_eoi", "tcg", HostCpu("GenuineIntel", 46))
    assert (cpu, bits) == ("max,phys-bits=46,vendor=GenuineIntel", 46) and notes
    # a named model keeps its own vendor; no phys-bits: QEMU's default
    assert for_accel("Skylake-Server,enforce", "tcg", AMD52)[:2] == ("Skylake-Server", None)
    with pytest.raises(RehearseRefused, match="phys-bits are unknown"):
        for_accel("qemu64,host-phys-bits=true", "tcg", HostCpu(None, None))


def test_ram_from_showcmd_unless_the_plan_changes_memory() -> None:
    assert ram_mb("1572864", "1572864", "1572864") == 1572864
    assert ram_mb("size=4096,slots=255,maxmem=4194304M", "4096", "4096") == 4096
    assert ram_mb("4096", "4096", "8192") == 8192
    assert ram_mb(None, None, None) == 512


def test_only_window_moving_args_are_kept() -> None:
    kept, notes = mmio_args("-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144 "
                            "-set device.hostpci0.x-nv-gpudirect-clique=0")
    assert kept == ["-fw_cfg", "name=opt/ovmf/X-PciMmio64Mb,string=262144"]
    assert "x-nv-gpudirect-clique" in notes[0]
    assert mmio_args("-global q35-pcihost.pci-hole64-size=2048G")[0] == [
        "-global", "q35-pcihost.pci-hole64-size=2048G"]
    assert mmio_args(None) == ([], [])


def test_firmware_is_the_nodes_code_file_and_a_fresh_vars_copy() -> None:
    opts = options(parse_showcmd(SHOWCMD))
    argv, kind, template, notes = firmware(opts, {"bios": "ovmf"}, FW, False)
    assert kind == "ovmf" and template == "/fw/OVMF_VARS_4M.fd" and not notes
    assert "file=/fw/OVMF_CODE_4M.secboot.fd" in argv[1] and argv[3].endswith("file=vars.fd")
    assert not any("efidisk" in a or "/dev/" in a for a in argv)  # the VM's EFI disk: never
    ms = firmware(opts, {"bios": "ovmf", "efidisk0": "x:1,efitype=4m,pre-enrolled-keys=1"},
                  FW, False)
    assert ms[2] == "/fw/OVMF_VARS_4M.ms.fd"
    assert firmware(opts, {}, FW, True) == ([], "seabios", None, [])
    seabios = NodeFacts(qemu="q", firmware_dir="/sb", firmware_files=("bios-256k.bin",))
    assert firmware([], {}, seabios, True)[0] == ["-bios", "/sb/bios-256k.bin"]
    with pytest.raises(RehearseRefused, match="no OVMF code file"):
        firmware(opts, {"bios": "ovmf"}, seabios, True)


def test_fallback_to_the_plain_4m_build_is_said() -> None:
    plain = NodeFacts(qemu="q", firmware_dir="/fw",
                      firmware_files=("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"))
    argv, _, _, notes = firmware(options(parse_showcmd(SHOWCMD)), {"bios": "ovmf"}, plain, True)
    assert "file=/fw/OVMF_CODE_4M.fd" in argv[1] and "secboot" in notes[0]


def test_stand_ins_sit_where_qemu_server_puts_the_devices() -> None:
    planned = {"hostpci0": "0000:01:00,pcie=1", "hostpci5": "mapping=pool,pcie=1",
               "hostpci1": "0000:02:00.0", "hostpci6": "0000:03:00.0"}
    functions = {"hostpci0": [("0000:01:00.0", 128 << 30), ("0000:01:00.1", 1 << 30)],
                 "hostpci5": [("pool", 64 << 30)], "hostpci1": [("0000:02:00.0", 32 << 30)],
                 "hostpci6": []}
    devices = stand_ins(planned, functions, q35=True)
    assert [(d.id, d.bus) for d in devices] == [
        ("hostpci0.0", "ich9-pcie-port-1"), ("hostpci0.1", "ich9-pcie-port-1"),
        ("hostpci1", "pci.0"), ("hostpci5", "ich9-pcie-port-6")]
    with pytest.raises(PvefixError, match="pcie=1 needs a q35"):
        stand_ins(planned, functions, q35=False)


def _job(planned: dict[str, str], accel: str = "tcg") -> list[str]:
    inputs = Inputs(showcmd=parse_showcmd(SHOWCMD), today={"bios": "ovmf", "memory": "1572864"},
                    planned=planned, functions={"hostpci0": [("0000:01:00.0", 128 << 30)],
                                                "hostpci4": [("0000:81:00.0", 128 << 30)]},
                    node=FW, host=AMD52, accel=accel)
    return build_job(inputs).argv


def test_the_job_keeps_nothing_of_the_vm_but_what_places_bars() -> None:
    argv = _job({"bios": "ovmf", "memory": "1572864", "machine": "q35",
                 "cpu": "x86-64-v2-AES,phys-bits=host,flags=+pdpe1gb",
                 "hostpci0": "0000:01:00.0,pcie=1", "hostpci4": "0000:81:00.0,pcie=1"})
    text = " ".join(argv)
    for gone in ("vfio", "-daemonize", "-blockdev", "-numa", "-vnc", "-netdev", "-pidfile",
                 "efidisk", "/var/run", "hugepages", "-smp 192"):
        assert gone not in text, gone
    assert argv[argv.index("-machine") + 1] == "type=q35+pve0,memory-backend=ram0"
    assert "memory-backend-file,id=ram0,size=1572864M,mem-path=ram,share=on" in argv
    assert "pci-testdev,membar=131072M,id=hostpci4,bus=ich9-pcie-port-5,addr=0x0.0" in argv
    assert any(a.startswith("pcie-root-port,id=ich9-pcie-port-5,") for a in argv)
    assert argv[:2] == ["-accel", "tcg,tb-size=64"] and "-display" in argv


def test_an_unchanged_cpu_comes_from_showcmd() -> None:
    argv = _job({"bios": "ovmf", "memory": "1572864"}, accel="kvm")
    assert argv[argv.index("-cpu") + 1] == (
        "qemu64,+aes,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3")
    assert argv[argv.index("-machine") + 1].startswith("type=pc-i440fx-10.1+pve0,")
