"""A vGPU entry (`hostpciN: ...,mdev=TYPE`) is recorded with its type by `desired`, so turning it
into whole-GPU passthrough (which takes the GPU from every other VM's vGPU) is drift, and so is
another vGPU type; the same entry unchanged is not."""

from __future__ import annotations

import pytest

from pvefix.check.compare import compare_vm
from pvefix.desired import DesiredState, dumps_desired, loads_desired
from pvefix.desired.derive import vm_rules
from tests.check.test_compare import item, vm

VGPU = "host=0000:01:00.0,mdev=nvidia-1135,pcie=1"


def test_desired_records_the_vgpu_type() -> None:
    rules = vm_rules(vm({"hostpci0": VGPU}))
    assert rules.hostpci["hostpci0"].mdev == "nvidia-1135"
    text = dumps_desired(DesiredState(vms={100: rules}))
    assert 'mdev = "nvidia-1135"' in text
    assert loads_desired(text).vms[100].hostpci["hostpci0"].mdev == "nvidia-1135"


@pytest.mark.parametrize(("now", "status"), [
    (VGPU, "ok"),
    ("host=0000:01:00.0,pcie=1", "drift"),  # turned into whole-GPU passthrough
    ("host=0000:01:00.0,mdev=nvidia-1136,pcie=1", "drift"),  # another vGPU type
])
def test_a_vgpu_turned_into_full_passthrough_is_drift(now: str, status: str) -> None:
    rules = vm_rules(vm({"hostpci0": VGPU}))
    got = item(compare_vm(rules, vm({"hostpci0": now})), "hostpci0.mdev")
    assert got.status == status, got
