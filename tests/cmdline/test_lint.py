"""Lint says what the kernel really does with the popular passthrough parameters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.cmdline import AMD_IOMMU_OPTIONS, Cmdline, CpuVendor, Finding, lint
from pvefix.cmdline.iommu import intel_setting
from pvefix.errors import ValidationError


def codes(
    text: str, kernel_version: str | None = None, cpu_vendor: CpuVendor | None = None
) -> list[str]:
    found = lint(Cmdline.parse(text), kernel_version=kernel_version, cpu_vendor=cpu_vendor)
    return [f.code for f in found]


def only(text: str, code: str, kernel_version: str | None = None) -> Finding:
    found = [
        f for f in lint(Cmdline.parse(text), kernel_version=kernel_version) if f.code == code
    ]
    assert len(found) == 1, f"wanted one {code}, got {found}"
    return found[0]


def test_a_clean_proxmox_cmdline_has_no_findings() -> None:
    assert lint(Cmdline.parse("root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet")) == []


def test_amd_iommu_on_is_an_error_quoting_the_kernel_log() -> None:
    f = only("quiet amd_iommu=on iommu=pt", "amd-iommu-on")
    assert f.severity == "error"
    assert f.token == "amd_iommu=on"
    assert "AMD-Vi: Unknown option - 'on'" in f.message
    assert "on by default" in f.message


@pytest.mark.parametrize("option", AMD_IOMMU_OPTIONS)
def test_every_valid_amd_iommu_option_passes(option: str) -> None:
    assert codes(f"amd_iommu={option}") == []


def test_unknown_amd_iommu_options_are_named_with_the_rest_of_the_string() -> None:
    f = only("amd_iommu=force_isolation,bogus,fullflush", "amd-iommu-unknown-option")
    assert "'bogus'" in f.message
    assert "Unknown option - 'bogus,fullflush'" in f.message


def test_amd_iommu_on_in_a_list_is_still_found() -> None:
    f = only("amd_iommu=fullflush,on", "amd-iommu-on")
    assert "Unknown option - 'on'" in f.message


def test_intel_iommu_on_is_a_no_op_on_proxmox_6_8_and_later() -> None:
    f = only("intel_iommu=on", "intel-iommu-on-noop", kernel_version="6.8.12-4-pve")
    assert f.severity == "info"
    assert codes("intel_iommu=on", kernel_version="6.14.8-2-pve") == ["intel-iommu-on-noop"]


@pytest.mark.parametrize("version", ["6.5.13-5-pve", "5.15.108-1-pve", "6.8.0-45-generic"])
def test_intel_iommu_on_is_not_flagged_where_it_may_be_needed(version: str) -> None:
    assert codes("intel_iommu=on", kernel_version=version) == []


def test_intel_iommu_on_without_a_kernel_version_is_not_judged() -> None:
    assert codes("intel_iommu=on") == []


def test_a_missing_intel_iommu_on_older_proxmox_kernels_is_a_warning() -> None:
    found = codes("quiet", kernel_version="6.5.13-5-pve", cpu_vendor="intel")
    assert found == ["intel-iommu-missing"]
    assert codes("intel_iommu=on", kernel_version="6.5.13-5-pve", cpu_vendor="intel") == []
    assert codes("quiet", kernel_version="6.5.13-5-pve", cpu_vendor="amd") == []


def test_a_bad_kernel_version_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="kernel_version"):
        lint(Cmdline.parse("quiet"), kernel_version="pve")


def test_iommu_pt_is_info_with_an_honest_expectation() -> None:
    f = only("iommu=pt", "iommu-pt")
    assert f.severity == "info"
    assert "VFIO" in f.message


def test_acs_override_is_a_warning_about_isolation() -> None:
    f = only("pcie_acs_override=downstream,multifunction", "pcie-acs-override")
    assert f.severity == "warning"
    assert "never merges" in f.message
    assert codes("pcie-acs-override=downstream") == ["pcie-acs-override"]


def test_the_same_parameter_twice_is_a_redundant_duplicate() -> None:
    f = only("quiet iommu=pt quiet", "duplicate-parameter")
    assert f.severity == "info"
    assert f.token == "quiet"
    assert "appears twice" in f.message


def test_many_repeats_are_one_finding_with_the_count() -> None:
    f = only("quiet " * 5 + "iommu=pt", "duplicate-parameter")
    assert f.token == "quiet"
    assert "appears 5 times" in f.message


def test_different_values_say_which_one_wins() -> None:
    f = only("vfio-pci.ids=10de:2bb1 quiet vfio_pci.ids=10de:2bb5", "conflicting-parameter")
    assert f.severity == "warning"
    assert f.token == "vfio_pci.ids=10de:2bb5"
    assert "last one wins: vfio_pci.ids=10de:2bb5" in f.message


def test_parameters_that_accumulate_are_not_conflicts() -> None:
    assert codes("console=tty0 console=ttyS0,115200 pci=nocrs pci=realloc") == []


def test_an_unterminated_quote_is_an_error() -> None:
    assert "unterminated-quote" in codes('quiet x="a b')


def test_pci_realloc_off_is_noted_with_its_token() -> None:
    f = only("pci=nocrs pci=realloc=off quiet", "pci-realloc-off")
    assert f.token == "pci=realloc=off"
    assert codes("pci=realloc=off pci=realloc") == []


def test_findings_carry_the_cmdline_source() -> None:
    found = lint(Cmdline.parse("amd_iommu=on", source="/etc/kernel/cmdline"))
    assert [f.source for f in found] == ["/etc/kernel/cmdline"]


@pytest.mark.parametrize("line", [
    "intel_iommu=off intel_iommu=on", "intel_iommu=off,on", "intel_iommu=off quiet intel_iommu=on",
    "intel_iommu=off intel_iommu=sm_on,on"])
def test_an_intel_iommu_on_that_undoes_an_earlier_off_is_no_no_op(line: str) -> None:
    # intel_iommu_setup applies the options in turn, the last of on/off wins: this `on` is
    # what keeps VT-d on (fw-lab FINDINGS.md section K, intel-iommu-off-then-on)
    assert "intel-iommu-on-noop" not in codes(line, kernel_version="6.8.12-11-pve")


_INTEL_OPTS = st.lists(st.sampled_from(["on", "off", "sm_on", "strict", "igfx_off"]),
                       min_size=1, max_size=3)


@given(st.lists(_INTEL_OPTS, min_size=1, max_size=4))
def test_the_no_op_said_of_intel_iommu_on_holds_against_the_line_without_it(
        tokens: list[list[str]]) -> None:
    """Where lint calls the `on` of an intel_iommu= token a no-op on a Proxmox 6.8+ kernel
    (VT-d on by default), the line without that token's `on` options gives VT-d the same
    state."""
    words = [f"intel_iommu={','.join(opts)}" for opts in tokens]
    found = lint(Cmdline.parse(" ".join(words)), kernel_version="6.8.12-11-pve")
    for f in (f for f in found if f.code == "intel-iommu-on-noop"):
        at = words.index(f.token or "")
        kept = [o for o in tokens[at] if not o.startswith("on")]
        rest = words[:at] + ([f"intel_iommu={','.join(kept)}"] if kept else []) + words[at + 1:]
        state, _ = intel_setting(Cmdline.parse(" ".join(rest) or "quiet"))
        full, _ = intel_setting(Cmdline.parse(" ".join(words)))
        assert (state or "on") == (full or "on"), (words, f.token)
