"""GRUB on the ESPs: what the plan says about /etc/kernel/cmdline, by what the source knows."""

from __future__ import annotations

import json

from pvefix.paths import KERNEL_CMDLINE
from pvefix.planner import plan
from pvefix.state import FileFact

from .loader import CASES, build_state


def _grub_esp_case() -> dict[str, object]:
    case: dict[str, object] = json.loads((CASES / "grub-esp.json").read_text())
    return case


def test_a_bundle_without_the_file_says_what_to_read() -> None:
    state = build_state(_grub_esp_case())
    state = state.model_copy(update={"files": {**state.files,
                                               KERNEL_CMDLINE: FileFact(path=KERNEL_CMDLINE)}})
    change = next(c for p in plan(state).phases for c in p.changes
                  if c.id == "host.cmdline.iommu_pt")
    assert any(f"head -n1 {KERNEL_CMDLINE}" in e and "root=" in e for e in change.evidence)


def test_a_live_read_that_found_no_file_needs_no_note() -> None:
    state = build_state(_grub_esp_case())
    state = state.model_copy(update={
        "files": {**state.files, KERNEL_CMDLINE: FileFact(path=KERNEL_CMDLINE)},
        "access": state.access.model_copy(update={"method": "api", "ssh": True}),
    })
    change = next(c for p in plan(state).phases for c in p.changes
                  if c.id == "host.cmdline.iommu_pt")
    assert not any(KERNEL_CMDLINE in e for e in change.evidence)


def test_a_file_with_root_lets_the_refresh_through() -> None:
    state = build_state(_grub_esp_case())  # windows-igd's stale file has root=
    assert state.file(KERNEL_CMDLINE).text
    ids = {c.id for p in plan(state).phases for c in p.changes}
    assert "host.cmdline.iommu_pt" in ids
