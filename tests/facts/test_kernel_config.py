"""The kernel build's config, the first fact added through the registry alone: read live over
the simulator's SSH, from the bundle the collect script makes, and from the tree, equal."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import given
from hypothesis import strategies as st

from pvefix.collect import import_bundle, render_script
from pvefix.facts.parse import kernel_config_text
from pvefix.hosttree import resolve_scenario
from pvefix.sources.bundle import read_bundle
from pvefix.sources.live import read_live
from tests.collect.fakehost import make_fake_host
from tests.sources.test_live import connection

if TYPE_CHECKING:
    from pvefix.sim.serve import ReadyInfo

CONFIG = ("#\n# Automatically generated file; DO NOT EDIT.\n#\nCONFIG_VFIO=m\n"
          "CONFIG_VFIO_PCI=m\n# CONFIG_VFIO_NOIOMMU is not set\nCONFIG_LOCALVERSION=\"\"\n"
          "CONFIG_MEMORY_HOTPLUG=y\n")
WANT = {"CONFIG_VFIO": "m", "CONFIG_VFIO_PCI": "m", "CONFIG_LOCALVERSION": '""',
        "CONFIG_MEMORY_HOTPLUG": "y"}

_NAME = st.from_regex(r"CONFIG_[A-Z0-9_]{1,20}", fullmatch=True)
_VALUE = st.one_of(st.sampled_from(["y", "m", '""', "0x1000"]),
                   st.from_regex(r'"[a-z0-9 ./-]{0,20}"', fullmatch=True),
                   st.from_regex(r"-?[0-9]{1,6}", fullmatch=True))


@given(st.dictionaries(_NAME, _VALUE, max_size=20), st.lists(_NAME, max_size=5))
def test_every_set_option_is_read_and_unset_ones_are_not(
        options: dict[str, str], unset: list[str]) -> None:
    lines = ["# Linux/x86 6.8.12 Kernel Configuration", ""]
    lines += [f"{k}={v}" for k, v in options.items()]
    lines += [f"# {k} is not set" for k in unset if k not in options]
    assert kernel_config_text("\n".join(lines) + "\n") == options


def _tree(tmp_path: Path, scenario: str = "kpro6") -> Path:
    tree = tmp_path / "with-config"
    shutil.copytree(resolve_scenario(scenario), tree)
    kernel = json.loads((tree / "pvefix-host.json").read_text())["versions"]["kernel"]
    (tree / "boot").mkdir(exist_ok=True)
    (tree / f"boot/config-{kernel}").write_text(CONFIG)
    return tree


def test_live_bundle_and_collect_read_the_kernel_config_alike(
        fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    assert read_bundle(tree, 100).node.kernel_config == WANT
    info = fresh_sim(str(tree))
    assert read_live(connection(info, tmp_path), 100).node.kernel_config == WANT
    host = make_fake_host(tmp_path / "fake", str(tree))
    run = subprocess.run(["sh", "-s"], input=render_script(), env=host.env(), text=True,
                         capture_output=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    import_bundle(host.root / "root/pvefix-bundle-kpro6.tar.gz", tmp_path / "imported")
    assert read_bundle(tmp_path / "imported", 100).node.kernel_config == WANT


def test_a_host_without_the_file_says_not_read(tmp_path: Path) -> None:
    assert read_bundle(resolve_scenario("kpro6"), 100).node.kernel_config is None
