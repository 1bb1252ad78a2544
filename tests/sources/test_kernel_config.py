"""The booted kernel's build config as a fact (issue 33): read from a host tree's
boot/config-<kernel> into NodeFacts.kernel_config, None when the tree has none."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pvefix.cmdline.iommu import intel_default_on
from pvefix.facts.parse import kernel_config_text
from pvefix.sources.bundle import read_bundle
from tests.planner.loader import build_tree

CONFIG = ("#\n# Linux/x86 6.5.13 Kernel Configuration\n#\nCONFIG_INTEL_IOMMU=y\n"
          "# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set\nCONFIG_LOCALVERSION=\"-pve\"\n")


def test_the_tree_s_boot_config_of_the_running_kernel_is_read(tmp_path: Path) -> None:
    tree = build_tree({"scenario": "intel-grub", "tree": {
        "write": {"/boot/config-6.5.13-6-pve": CONFIG},
        "meta": {"versions": {"kernel": "6.5.13-6-pve"}}}}, tmp_path)
    node = read_bundle(tree, 200).node
    assert node.kernel_config == {"CONFIG_INTEL_IOMMU": "y", "CONFIG_LOCALVERSION": '"-pve"'}
    assert intel_default_on(node.kernel_config) is False


def test_another_kernel_s_config_is_not_this_one_s(tmp_path: Path) -> None:
    tree = build_tree({"scenario": "intel-grub", "tree": {
        "write": {"/boot/config-6.5.13-6-pve": CONFIG}, "remove": ["/boot/config-*-11-pve"]}},
        tmp_path)
    assert read_bundle(tree, 200).node.kernel_config is None  # booted: 6.8.12-11-pve


def test_the_shipped_intel_scenario_says_vt_d_is_on_by_default() -> None:
    from pvefix.hosttree import resolve_scenario

    node = read_bundle(resolve_scenario("intel-grub"), 200).node
    assert intel_default_on(node.kernel_config) is True


@given(st.dictionaries(st.from_regex(r"CONFIG_[A-Z0-9_]{1,20}", fullmatch=True),
                       st.from_regex(r"[ymn0-9]|\"[a-z-]{0,8}\"", fullmatch=True)))
def test_config_lines_round_trip_and_unset_ones_are_absent(values: dict[str, str]) -> None:
    text = "".join(f"{k}={v}\n# {k}_X is not set\n" for k, v in values.items())
    assert kernel_config_text(text) == values
