"""The parts of Proxmox's command the rehearsal builds from the next start (pure): memory
hotplug's maxmem and DIMMs, Proxmox's refusals, custom CPU models, guest-phys-bits, the OVMF
files; and the usable width a BAR must stay below (planner/bar_verdict.usable_phys_bits)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.planner.bar_verdict import usable_phys_bits
from pvefix.rehearse.build import Job, StandIn
from pvefix.rehearse.command import (
    Cpu,
    ProxmoxRefuses,
    cpu_of,
    dimm_sizes,
    max_hotplug_mb,
    memory_of,
    ovmf_files,
)
from pvefix.rehearse.verdict import judge
from pvefix.vmconfig.cpu_models import parse_cpu_models

VENDORS = {"EPYC": "AuthenticAMD", "qemu64": "default", "kvm64": "default", "host": "default"}


@pytest.mark.parametrize(("phys", "reported", "host", "mb"), [
    ("46", "qemu64", 52, 4 << 20),  # 2^45 bytes, capped at 4 TiB
    ("43", "qemu64", 52, 1 << 21),  # odd: rounded down to 42 bits
    (None, "kvm64", 46, 1 << 19),  # a named model: the host's width, at most 40
    (None, "host", 39, 1 << 17),  # host: the host's width (38 after rounding)
    ("host", "qemu64", 42, 1 << 21),
    (None, "qemu64", None, 1 << 15),  # width unknown: Memory.pm's 36
])
def test_maxmem_is_memory_pms(phys: str | None, reported: str, host: int | None,
                              mb: int) -> None:
    assert max_hotplug_mb(Cpu("x", phys, None), reported, host) == mb


@given(st.integers(1024, 1 << 20), st.sampled_from([512, 1024]))
def test_dimms_cover_the_memory_in_doubling_sizes(total: int, first: int) -> None:
    dimms = dimm_sizes(total, 1024, first)
    assert 1024 + sum(dimms) >= total
    assert not dimms or 1024 + sum(dimms[:-1]) < total  # no DIMM more than needed
    for n, size in enumerate(dimms):
        assert size == first << (n // 32)


def test_memory_hotplug_and_proxmoxs_refusals() -> None:
    cpu = Cpu("qemu64", "46", None)
    mem = memory_of({"memory": "4096", "hotplug": "memory", "numa": "1"}, cpu, 52)
    assert (mem.m, mem.static_mb, mem.total_mb) == ("size=1024,slots=255,maxmem=4194304M",
                                                    1024, 4096)
    assert memory_of({"memory": "4096", "hotplug": "1"}, cpu, 52).m == "4096"
    huge = memory_of({"memory": "8192", "hotplug": "memory", "numa": "1", "sockets": "2",
                      "hugepages": "1024"}, cpu, 52)
    assert huge.static_mb == 2048 and set(huge.dimms) == {1024}
    for config, why in [({"hotplug": "memory"}, "NUMA needs"),
                        ({"hotplug": "memory", "numa": "1", "memory": "600000",
                          "cpu": "kvm64"}, "bigger than 524288MB"),
                        ({"hotplug": "memory", "numa": "1", "memory": "512"}, "minimum"),
                        ({"hotplug": "memory", "numa": "1", "numa0": "cpus=0,memory=512"},
                         "custom NUMA")]:
        bits = Cpu("kvm64", None, None) if "cpu" in config else cpu
        with pytest.raises(ProxmoxRefuses, match=why):
            memory_of(config, bits, 46)


@given(st.integers(1024, 1 << 22))
def test_hotplug_memory_is_the_dimms_exactly_or_refused(total: int) -> None:
    """Memory.pm: the DIMMs (at most 256) add up to the memory exactly; where the last one
    would pass it, Proxmox refuses (`memory size (M) must be aligned to S for hotplugging`)."""
    config = {"memory": str(total), "hotplug": "memory", "numa": "1"}
    try:
        mem = memory_of(config, Cpu("qemu64", "46", None), 52)
    except ProxmoxRefuses as exc:
        assert "Total memory is bigger" in exc.message or (
            f"memory size ({total}) must be aligned to" in exc.message)
        return
    # foreach_dimm stops after 8 x 32 DIMMs, short of the memory or not
    assert mem.total_mb == total or (len(mem.dimms) == 256 and mem.total_mb < total)


def test_hotplug_memory_not_a_whole_number_of_dimms_is_refused() -> None:
    cpu = Cpu("qemu64", "46", None)
    with pytest.raises(ProxmoxRefuses, match=r"memory size \(65536\) must be aligned to 2048"):
        memory_of({"memory": "65536", "hotplug": "memory", "numa": "1"}, cpu, 52)
    # 1024 static + 32 x 512 + 32 x 1024 + 8 x 2048
    assert memory_of({"memory": "66560", "hotplug": "memory", "numa": "1"}, cpu, 52).dimms[-1] \
        == 2048


def test_custom_models_guest_phys_bits_and_vendors() -> None:
    models = parse_cpu_models("cpu-model: big\n    reported-model EPYC\n    phys-bits 48\n"
                              "    flags +pdpe1gb\n    hidden 1\n")
    cpu = cpu_of({"cpu": "custom-big,guest-phys-bits=44"}, models, VENDORS)
    props = set(cpu.value.split(","))
    assert cpu.value.startswith("EPYC,") and cpu.phys == "48" and cpu.guest_phys == 44
    assert {"+pdpe1gb", "kvm=off", "enforce", "vendor=AuthenticAMD", "phys-bits=48",
            "guest-phys-bits=44"} <= props
    own = cpu_of({"cpu": "custom-big,phys-bits=40,flags=-pdpe1gb"}, models, VENDORS)
    assert "phys-bits=40" in own.value and "-pdpe1gb" in own.value
    assert "+pdpe1gb" not in own.value  # the VM's flag wins over its model's
    with pytest.raises(ProxmoxRefuses, match=r"not defined in cpu-models\.conf"):
        cpu_of({"cpu": "custom-other"}, models, VENDORS)
    host = cpu_of({"cpu": "host"}, None, VENDORS)
    assert "enforce" not in host.value and "vendor=" not in host.value


def test_ovmf_files_follow_the_efidisk_and_smm() -> None:
    assert ovmf_files({}, True) == ("OVMF_CODE.fd", "OVMF_VARS.fd")
    four = {"efidisk0": "local:1,efitype=4m"}
    assert ovmf_files(four, True) == ("OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.fd")
    assert ovmf_files(four, False) == ("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd")
    keys = {"efidisk0": "local:1,efitype=4m,pre-enrolled-keys=1"}
    assert ovmf_files(keys, True) == ("OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.ms.fd")


@given(st.one_of(st.none(), st.integers(32, 57)), st.one_of(st.none(), st.integers(32, 57)),
       st.one_of(st.none(), st.integers(32, 57)))
def test_usable_bits_are_the_lowest_known(vcpu: int | None, host: int | None,
                                          guest: int | None) -> None:
    known = [b for b in (vcpu, host, guest) if b is not None]
    assert usable_phys_bits(vcpu, host, guest) == (min(known) if known else None)


def _booted_at(address: int) -> dict[str, object]:
    dev = {"qdev_id": "hostpci0", "regions": [{"bar": 2, "address": address}]}
    return {"outcome": "booted", "phys-bits": 46, "query_pci": [{"devices": [dev]}], "ram": []}


@pytest.mark.parametrize(("host", "guest", "status"), [
    (46, None, "placed"), (39, None, "beyond-reach"), (46, 39, "beyond-reach"),
    (None, None, "placed")])
def test_a_bar_above_the_hosts_or_the_guests_width_is_not_usable(
        host: int | None, guest: int | None, status: str) -> None:
    job = Job(argv=[], accel="tcg", machine="q35", cpu="qemu64", ram_mb=2048,
              firmware="ovmf", vars_template=None,
              stand_ins=[StandIn("hostpci0", "0000:01:00.0", 32 << 30, "ich9-pcie-port-1")],
              phys_bits=46, guest_phys_bits=guest, host_bits=host)
    address = 56 << 40  # 56 TiB: below 2^46, above 2^39
    outcome, message, bars = judge(_booted_at(address), job)
    assert bars[0].status == status
    assert (outcome == "placed") == (status == "placed"), message
