"""Parsing the raw fact files: each fact read, defaults as documented, odd facts named."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.collect.facts import Facts, boot, cluster_nodes, cpu, memory_bytes, versions, vm_state
from pvefix.errors import ParseError


def _facts(folder: Path, **files: str) -> Facts:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", "-")).write_text(text)
    return Facts(folder)


def test_a_cluster_takes_its_nodes_from_pvecm_and_from_the_tree(tmp_path: Path) -> None:
    table = (
        "\nMembership information\n----------------------\n    Nodeid      Votes Name\n"
        "         1          1 pve1 (local)\n         2          1 pve2\n"
    )
    facts = _facts(tmp_path, pvecm_nodes=table)
    (tmp_path / "pvecm-nodes.rc").write_text("0\n")
    assert cluster_nodes(facts, "pve1", ["pve3"]) == ["pve1", "pve2", "pve3"]


def test_a_single_node_without_corosync_is_its_own_cluster(tmp_path: Path) -> None:
    facts = _facts(tmp_path, pvecm_nodes="")
    (tmp_path / "pvecm-nodes.rc").write_text("2\n")
    assert cluster_nodes(facts, "kpro6", []) == ["kpro6"]
    assert cluster_nodes(Facts(tmp_path / "none"), "kpro6", []) == ["kpro6"]


def test_plain_pveversion_gives_the_manager_version_without_qemu(tmp_path: Path) -> None:
    facts = _facts(
        tmp_path,
        pveversion="pve-manager/8.4.1/2a5fa54a8503f96d (running kernel: 6.8.12-9-pve)\n",
        uname_r="6.8.12-9-pve\n",
    )
    got = versions(facts)
    assert (got.pve, got.kernel, got.qemu) == ("8.4.1", "6.8.12-9-pve", None)


def test_pveversion_without_a_manager_line_is_named(tmp_path: Path) -> None:
    facts = _facts(tmp_path, pveversion="bash: pveversion: command not found\n", uname_r="6\n")
    with pytest.raises(ParseError, match=r"\.pvefix-facts/pveversion: expected a 'pve-manager"):
        versions(facts)


@given(kib=st.integers(min_value=0, max_value=2**50))
def test_memtotal_in_kib_becomes_bytes(tmp_path_factory: pytest.TempPathFactory, kib: int) -> None:
    folder = tmp_path_factory.mktemp("mem")
    facts = _facts(folder, meminfo=f"MemTotal:       {kib} kB\n")
    assert memory_bytes(facts) == kib * 1024


def test_an_odd_memtotal_line_is_named(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"meminfo: expected 'MemTotal: N kB'"):
        memory_bytes(_facts(tmp_path, meminfo="MemTotal: lots\n"))


@given(
    sockets=st.integers(min_value=1, max_value=4),
    cores=st.integers(min_value=1, max_value=8),
    smt=st.integers(min_value=1, max_value=2),
)
def test_cpuinfo_counts_sockets_and_physical_cores(
    tmp_path_factory: pytest.TempPathFactory, sockets: int, cores: int, smt: int
) -> None:
    lines = []
    for _ in range(smt):
        for s in range(sockets):
            for c in range(cores):
                lines += ["vendor_id\t: GenuineIntel", "model name\t: Intel(R) Xeon(R) Gold 6430",
                          f"physical id\t: {s}", f"core id\t\t: {c}", f"cpu cores\t: {cores}"]
    folder = tmp_path_factory.mktemp("cpu")
    threads = sockets * cores * smt
    got = cpu(_facts(folder, cpuinfo="\n".join(lines) + "\n", nproc=f"{threads}\n"))
    assert (got.sockets, got.cores, got.threads) == (sockets, sockets * cores, threads)
    assert (got.vendor, got.model) == ("GenuineIntel", "Intel(R) Xeon(R) Gold 6430")


def test_cpuinfo_without_topology_lines_is_one_socket(tmp_path: Path) -> None:
    facts = _facts(
        tmp_path, cpuinfo="vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n", nproc="16\n"
    )
    got = cpu(facts)
    assert (got.sockets, got.cores, got.threads) == (1, 16, 16)


def test_secure_boot_defaults_to_off_without_mokutil(tmp_path: Path) -> None:
    assert boot(_facts(tmp_path, boot_mode="efi\n")).secureboot is False
    (tmp_path / "mokutil-sb-state").write_text("SecureBoot enabled\n")
    assert boot(Facts(tmp_path)).secureboot is True
    (tmp_path / "boot-mode").write_text("bios\n")
    with pytest.raises(ParseError, match="boot-mode: expected efi or legacy-bios"):
        boot(Facts(tmp_path))


@pytest.mark.parametrize(
    ("text", "status", "machine", "lock"),
    [
        ("qmpstatus: running\nrunning-machine: pc-q35-9.2+pve1\nstatus: running\nuptime: 5\n",
         "running", "pc-q35-9.2+pve1", None),
        ("lock: backup\nname: x\nstatus: stopped\nuptime: 0\n", "stopped", None, "backup"),
    ],
)
def test_qm_status_verbose_gives_the_run_state(
    tmp_path: Path, text: str, status: str, machine: str | None, lock: str | None
) -> None:
    facts = _facts(tmp_path, **{"qm-status-100": text, "qm-status-100.rc": "0\n"})
    got = vm_state(facts, "100")
    assert (got.status, got.running_machine, got.lock) == (status, machine, lock)


def test_a_failed_qm_status_is_named_with_its_message(tmp_path: Path) -> None:
    facts = _facts(
        tmp_path,
        **{"qm-status-100": "", "qm-status-100.rc": "2\n",
           "qm-status-100.stderr": "Configuration file 'nodes/x/qemu-server/100.conf' does "
                                   "not exist\n"},
    )
    with pytest.raises(ParseError, match=r"qm-status-100: qm status failed \(exit 2\): Config"):
        vm_state(facts, "100")


def test_pveversion_names_the_ovmf_build_and_skips_a_missing_package(tmp_path: Path) -> None:
    """pve-edk2-firmware(-ovmf) decides how OVMF places the MMIO window (bar_verdict.py); a
    package `pveversion -v` lists as not installed is no version."""
    text = ("proxmox-ve: 9.1.0 (running kernel: 6.17.2-1-pve)\npve-manager: 9.1.1 (running"
            " version: 9.1.1/42db4a6cf33dac83)\npve-edk2-firmware: not correctly installed\n"
            "pve-edk2-firmware-ovmf: 4.2025.02-4\npve-qemu-kvm: 10.1.2-1\n")
    got = versions(_facts(tmp_path, pveversion=text, uname_r="6.17.2-1-pve\n"))
    assert (got.qemu, got.edk2) == ("10.1.2", "4.2025.02-4")
    older = text.replace("pve-edk2-firmware: not correctly installed\npve-edk2-firmware-ovmf:"
                         " 4.2025.02-4\n", "pve-edk2-firmware: 4.2023.08-4\n")
    assert versions(_facts(tmp_path / "8", pveversion=older, uname_r="6\n")).edk2 == "4.2023.08-4"
