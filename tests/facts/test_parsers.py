"""The registry's parsers against the shapes the host prints or keeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.facts.parse import ha_states

_STATE = st.sampled_from(["started", "stopped", "disabled", "ignored", None])


@given(st.dictionaries(st.integers(100, 999_999_999), _STATE, max_size=8),
       st.lists(st.integers(100, 999), max_size=3))
def test_every_vm_section_gives_its_state_and_others_are_left_out(
        vms: dict[int, str | None], containers: list[int]) -> None:
    text = "# written by ha-manager\n"
    for ct in containers:
        text += f"ct: {ct}\n\tstate stopped\n\n"
    for vmid, state in vms.items():
        text += f"vm: {vmid}\n" + (f"\tstate {state}\n" if state else "") + "\tgroup gpu\n\n"
    assert ha_states(text) == {vmid: state or "started" for vmid, state in vms.items()}


def test_no_file_means_no_vm_is_managed() -> None:
    assert ha_states("") == {}
