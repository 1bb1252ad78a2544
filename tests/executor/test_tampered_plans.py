"""A plan file is data, never authority: apply re-derives every step and refuses a file that
says something else, naming the difference; nothing is written and no command from it runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pvefix.errors import EXIT_REFUSED, PvefixError, RefusedError
from pvefix.executor.snapshot import list_snapshots
from pvefix.flow.planfile import load_plan_file
from pvefix.planner import plan as make_plan
from pvefix.sources.live import read_live
from tests.executor.conftest import Node


def _tampered(n: Node, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    plan = make_plan(read_live(n.conn(), 100))
    data = plan.to_json_dict()
    edit(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


def _host_change(data: dict[str, Any]) -> dict[str, Any]:
    phase = next(p for p in data["phases"] if p["number"] == 2)
    change: dict[str, Any] = phase["changes"][0]
    return change


def _set_refresh(data: dict[str, Any]) -> None:
    _host_change(data)["refresh_command"] = ["sh", "-c", "touch /tmp/pvefix-pwned"]


def _set_text(data: dict[str, Any]) -> None:
    data["host_files_after"]["/etc/kernel/cmdline"] = "root=ZFS=rpool/ROOT/pve-1 init=/bin/sh\n"


def _set_after(data: dict[str, Any]) -> None:
    _host_change(data)["after"] = "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt init=/bin/sh"


def _set_before(data: dict[str, Any]) -> None:
    _host_change(data)["before"] = "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet"


@pytest.mark.parametrize(
    "edit,named",
    [
        (_set_refresh, "refresh_command"),
        (_set_text, "/etc/kernel/cmdline: the saved plan writes other text"),
        (_set_after, "host.cmdline.iommu_pt: after"),
        (_set_before, "host.cmdline.iommu_pt: before"),
    ],
    ids=["refresh-command", "file-text", "after", "before"],
)
def test_a_tampered_plan_is_refused_naming_the_difference(
    node: Callable[..., Node], tmp_path: Path, edit: Callable[[dict[str, Any]], None], named: str
) -> None:
    n = node("kpro6")
    path = _tampered(n, tmp_path, edit)
    before = n.fingerprint(100)
    with pytest.raises(RefusedError) as caught:
        n.apply(100, 2, plan=load_plan_file(path), reboot_host=False)
    assert caught.value.exit_code == EXIT_REFUSED
    assert named in str(caught.value)
    assert n.fingerprint(100) == before
    assert list_snapshots(n.state_dir) == []
    assert n.sim.state.read_host("/tmp/pvefix-pwned") is None


def test_a_vm_change_that_claims_no_root_need_is_refused(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("kpro6")

    def edit(data: dict[str, Any]) -> None:
        change = data["phases"][0]["changes"][0]
        change["needs_root_pam"] = not change["needs_root_pam"]

    with pytest.raises(RefusedError, match="needs_root_pam"):
        n.apply(100, 1, plan=load_plan_file(_tampered(n, tmp_path, edit)))


@pytest.mark.parametrize(
    "content,why",
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"schema": "pvefix.plan/v1", "x": ' + b"9" * 5000 + b"}", "not a plan file"),
        (b"{", "not JSON"),
    ],
    ids=["invalid-utf8", "deep", "huge-int", "truncated"],
)
def test_a_hostile_plan_file_is_a_clear_error(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    with pytest.raises(PvefixError, match=why):
        load_plan_file(path)
