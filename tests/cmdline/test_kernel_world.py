"""The host cmdline's closed world (issue 33): every kernel parameter that touches the IOMMU, PCI
resources or VFIO is classified, and a token of those families that the table does not list is
unmodelled, never silently passed over."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.closedworld.kernel_params import FAMILIES, INPUTS, classify
from pvefix.closedworld.registry import inputs_of
from pvefix.cmdline.tokens import Token, normalize_name

# The parameters the issue names, from Documentation/admin-guide/kernel-parameters.txt.
NAMED = ["iommu=off", "iommu=pt", "iommu=nopt", "amd_iommu=off", "amd_iommu=fullflush",
         "intel_iommu=on", "intel_iommu=off", "intel_iommu=igfx_off", "iommu.passthrough=1",
         "iommu.strict=1", "iommu.forcedac=1", "pci=realloc", "pci=nommconf", "pci=noaer",
         "vfio-pci.ids=10de:2bb1", "vfio_iommu_type1.allow_unsafe_interrupts=1",
         "pcie_acs_override=downstream", "mem_encrypt=on", "intremap=off",
         "amd_iommu_intr=legacy", "efi=noruntime", "pcie_aspm=off", "video=efifb:off",
         "nomodeset", "initcall_blacklist=sysfb_init"]


def test_every_input_is_a_kernel_param_with_a_source_and_a_unique_name() -> None:
    names = [normalize_name(i.name) for i in INPUTS]
    assert len(names) == len(set(names))
    assert all(i.kind == "kernel-param" and i.source for i in INPUTS)
    assert inputs_of("kernel-param") == INPUTS  # the registry holds this table


def test_each_named_parameter_is_classified_by_the_table_itself() -> None:
    for raw in NAMED:
        got = classify(Token.from_raw(raw))
        assert got, raw
        assert all("not in pvefix's table" not in i.why for i in got), (raw, got)


def test_each_listed_input_classifies_back_to_itself() -> None:
    for item in INPUTS:
        if item.name.startswith("CONFIG_"):
            continue  # the build default: not a token
        raw = item.name if "=" in item.name else f"{item.name}=1"
        assert item in classify(Token.from_raw(raw)), item.name


def test_the_iommu_off_forms_are_modelled_and_feed_the_host_iommu_claim() -> None:
    for raw in ("iommu=off", "amd_iommu=off", "intel_iommu=off", "amd-iommu=off"):
        (item,) = classify(Token.from_raw(raw))
        assert item.status == "modelled" and "host-iommu" in item.claims, raw


def test_options_of_a_comma_list_are_classified_one_by_one_and_by_prefix() -> None:
    got = classify(Token.from_raw("iommu=off,pt"))
    assert [i.name for i in got] == ["iommu=off", "iommu=pt"]
    assert [i.name for i in classify(Token.from_raw("iommu=offx"))] == ["iommu=off"]
    got = classify(Token.from_raw("amd_iommu=fullflush,force_enable"))
    assert [i.status for i in got] == ["modelled", "unmodelled"]


def test_tokens_outside_the_families_touch_no_claim() -> None:
    for raw in ("root=ZFS=rpool/ROOT/pve-1", "quiet", "boot=zfs", "console=ttyS0,115200",
                "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve", "ro"):
        assert classify(Token.from_raw(raw)) == [], raw


@given(st.sampled_from(sorted(FAMILIES)), st.from_regex(r"[a-z0-9_.]{0,12}", fullmatch=True),
       st.from_regex(r"[a-z0-9_,=:]{0,16}", fullmatch=True))
def test_no_token_of_a_family_is_passed_over(family: str, suffix: str, value: str) -> None:
    """The closed world: whatever the table lists or not, a token of an IOMMU, PCI or VFIO
    family is classified; an unlisted one is unmodelled and names the claims it touches."""
    token = Token.build(family + suffix, value or None)
    got = classify(token)
    assert got, token
    for item in got:
        assert item.status in ("modelled", "inert", "unmodelled")
        if item.status != "inert":
            assert item.claims
