"""Each change kind is its own model, told apart by `target`; a guest change carries the guest
file's whole text before and after; plan files written before either keep loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from pvefix.errors import PvefixError
from pvefix.flow.planfile import load_plan_file, save_plan
from pvefix.planner import plan as make_plan
from pvefix.planner.model import (
    Change,
    GuestCmdlineChange,
    HostBootChange,
    HostCmdlineChange,
    ManualChange,
    Plan,
    VmConfigChange,
)
from pvefix.state import FileFact, GuestFacts, HostState
from tests.planner.loader import build_state, load_case

CASES = Path(__file__).parent / "cases"
GRUB = '# set by the installer\nGRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
KINDS: dict[str, type] = {"vm-config": VmConfigChange, "host-cmdline": HostCmdlineChange,
         "host-boot": HostBootChange, "guest-cmdline": GuestCmdlineChange,
         "manual": ManualChange}
CHANGE: TypeAdapter[Change] = TypeAdapter(Change)


def guest_state(grub: str | None = GRUB) -> HostState:
    """kpro6 VM 100 with a way into a guest that logs BAR errors and has this GRUB file."""
    state = build_state(load_case(CASES / "guest-access.json"))
    assert state.guest is not None
    files = {"/etc/default/grub": FileFact.of("/etc/default/grub", grub)}
    return state.model_copy(update={"guest": GuestFacts(
        **{**state.guest.model_dump(), "files": files})})


def changes_of(plan: Plan) -> list[Any]:
    return [c for p in plan.phases for c in p.changes]


def test_every_change_is_the_model_of_its_target_and_survives_a_json_round_trip() -> None:
    plan = make_plan(guest_state())
    seen = {c.target for c in changes_of(plan)}
    assert seen == {"vm-config", "host-cmdline", "guest-cmdline"}, seen
    for c in changes_of(plan):
        assert type(c) is KINDS[c.target], (c.id, type(c).__name__)
    again = Plan.model_validate(plan.to_json_dict())
    assert again == plan
    assert [type(c) for c in changes_of(again)] == [type(c) for c in changes_of(plan)]


def test_an_activation_only_phase_is_a_host_boot_change_that_round_trips() -> None:
    """Configured, not yet booted (pvefix/planner/activation.py): phase 2 has one host-boot
    change, nothing to write, and it survives a plan file."""
    state = build_state(load_case(CASES / "configured-not-booted.json"))
    plan = make_plan(state)
    phase = plan.phase(2)
    assert phase is not None and phase.activation_only and phase.reboot_activates
    (boot,) = phase.changes
    assert type(boot) is HostBootChange and boot.file == "/etc/kernel/cmdline"
    assert (boot.before, boot.after) == ("", "iommu=pt")
    assert plan.host_files_after == {}, "nothing to write"
    assert "--reboot-host" in phase.activation
    assert Plan.model_validate(plan.to_json_dict()) == plan


def test_a_guest_change_carries_the_guest_file_before_and_after() -> None:
    plan = make_plan(guest_state())
    guest = next(c for c in changes_of(plan) if c.target == "guest-cmdline")
    assert guest.file == "/etc/default/grub"
    assert plan.guest_files_before == {guest.file: GRUB}
    assert plan.guest_files_after == {guest.file: GRUB.replace('"quiet"', '"quiet pci=realloc"')}


@pytest.mark.parametrize("grub", [None, 'GRUB_CMDLINE_LINUX_DEFAULT="quiet\n'])
def test_a_guest_file_not_read_or_not_parsed_has_no_text_in_the_plan(grub: str | None) -> None:
    plan = make_plan(guest_state(grub))
    assert any(c.target == "guest-cmdline" for c in changes_of(plan))
    assert plan.guest_files_before == {} and plan.guest_files_after == {}


def test_without_guest_access_the_guest_step_is_manual_and_no_guest_file_is_planned() -> None:
    state = guest_state().model_copy(update={"access": guest_state().access.model_copy(
        update={"guest": None})})
    plan = make_plan(state)
    realloc = next(c for c in changes_of(plan) if c.id == "guest.cmdline.pci_realloc")
    assert isinstance(realloc, ManualChange) and realloc.commands
    assert plan.guest_files_after == {}


def _one(**edit: Any) -> dict[str, Any]:
    plan = make_plan(guest_state())
    host = next(c for c in changes_of(plan) if c.target == "host-cmdline")
    return {**host.model_dump(mode="json"), **edit}


@pytest.mark.parametrize(("edit", "wanted"), [
    ({"target": "host-file"}, "does not match any of the expected tags"),
    ({"file": None}, "file"),  # a host-cmdline change always names its file
    ({"target": "vm-config"}, "file"),  # a vm-config change never does
])
def test_a_change_that_is_no_known_kind_is_refused(edit: dict[str, Any], wanted: str) -> None:
    with pytest.raises(ValidationError) as caught:
        CHANGE.validate_python(_one(**edit))
    assert wanted in str(caught.value), str(caught.value)


def test_a_plan_file_from_before_guest_file_texts_still_loads(tmp_path: Path) -> None:
    data = make_plan(guest_state()).to_json_dict()
    del data["guest_files_before"], data["guest_files_after"]
    path = save_plan(data, str(tmp_path / "old.json"))
    loaded = load_plan_file(path)
    assert loaded.guest_files_after == {}
    phases: Any = data["phases"]
    assert {c.id for c in changes_of(loaded)} == {c["id"] for p in phases for c in p["changes"]}


def test_a_plan_file_with_an_unknown_change_kind_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    data = make_plan(guest_state()).to_json_dict()
    data["phases"][0]["changes"][0]["target"] = "firmware"  # type: ignore[index]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PvefixError) as caught:
        load_plan_file(path)
    assert "invalid plan" in caught.value.message and str(path) in str(caught.value)
