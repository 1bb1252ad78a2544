"""Which hostpci changes Proxmox keeps to root@pam (API2/Qemu.pm check_hostpci_perm: the old
value and the new one), and that every planned change of such an entry says so."""

from __future__ import annotations

import pytest

from pvefix.planner.model import Risk, VmConfigChange
from pvefix.vmconfig.hostpci import hostpci_change_needs_root


@pytest.mark.parametrize(
    ("before", "after", "root"),
    [
        (None, "mapping=pro6000", False),
        ("mapping=pro6000", "mapping=pro6000,pcie=1", False),
        (None, "0000:01:00.0", True),  # raw device
        ("mapping=pro6000,romfile=a.rom", "mapping=pro6000,romfile=a.rom,pcie=1", True),  # kept
        ("mapping=pro6000,romfile=a.rom", "mapping=pro6000,pcie=1", True),  # removed: old value
        (None, "mapping=pro6000,romfile=a.rom", True),  # added
        ("mapping=pro6000,romfile=a.rom", None, True),  # the entry deleted
        ("mapping=pro6000", None, False),
    ],
)
def test_hostpci_change_needs_root(before: str | None, after: str | None, root: bool) -> None:
    assert hostpci_change_needs_root("hostpci0", before, after) is root


def test_a_planned_romfile_change_is_marked_whoever_builds_it() -> None:
    def change(key: str, before: str, after: str) -> VmConfigChange:
        return VmConfigChange(
            id="x", rule="r", key=key, before=before, after=after, reason="r",
            risk=Risk(level="low", text="t"), inverse="i", disruption="vm-restart",
        )

    assert change("hostpci2", "mapping=m,romfile=v.rom", "mapping=m,romfile=v.rom,pcie=1")\
        .needs_root_pam
    assert not change("hostpci2", "mapping=m", "mapping=m,pcie=1").needs_root_pam
    assert not change("args", "romfile", "x").needs_root_pam  # only hostpciN values are read


def test_the_plan_says_romfile_not_raw_device() -> None:
    import json

    from pvefix.planner import plan
    from pvefix.render.plan_text import render_plan_text
    from tests.planner.loader import CASES, build_state

    case = json.loads((CASES / "romfile-mapped-token.json").read_text())
    text = render_plan_text(plan(build_state(case)))
    assert "needs root@pam (romfile)" in text
    assert "raw device" not in text
