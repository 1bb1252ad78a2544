"""The registry's parsers against the shapes the host prints or keeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.facts.parse import (
    acs as parse_acs,
)
from pvefix.facts.parse import (
    address_bits,
    address_line,
    dpkg_versions,
    first_line,
    ha_states,
    line,
    lspci_acs,
    package_versions,
)

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


# -- what the simulator answers a `meta:` fact with (`Fact.shown`) parses back to it ----------

_WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789.-_+~", min_size=1, max_size=24)
_PORT = st.builds("{:04x}:{:02x}:{:02x}.{}".format, st.integers(0, 0xFFFF),
                  st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7))
_CTL = st.lists(st.sampled_from(["SrcValid+", "SrcValid-", "ReqRedir+", "CmpltRedir-",
                                 "UpstreamFwd+", "EgressCtrl-", "DirectTrans-"]),
                min_size=1, max_size=7).map(" ".join)


@given(st.one_of(st.none(), _WORD))
def test_a_line_shown_is_its_value(value: str | None) -> None:
    assert first_line(line(value)) == value


@given(st.one_of(st.none(), st.integers(32, 64)))
def test_an_address_width_shown_is_read_back(bits: int | None) -> None:
    assert address_bits(address_line(bits)) == bits


@given(st.dictionaries(_PORT, _CTL, max_size=6))
def test_acs_settings_shown_as_lspci_are_read_back(acs: dict[str, str]) -> None:
    assert parse_acs(lspci_acs(acs)) == acs


@given(st.dictionaries(st.sampled_from(["pve-edk2-firmware-ovmf", "pve-edk2-firmware",
                                        "pve-qemu-kvm"]),
                       st.one_of(st.none(), _WORD.map(lambda w: "1" + w))))
def test_installed_packages_shown_as_dpkg_query_are_read_back(
        installed: dict[str, str | None]) -> None:
    asked = ["pve-edk2-firmware-ovmf", "pve-edk2-firmware", "pve-qemu-kvm"]
    shown = dpkg_versions(installed, asked)
    assert package_versions(shown) == {k: v for k, v in installed.items() if v}
    assert shown.ok == all(installed.get(name) for name in asked)
