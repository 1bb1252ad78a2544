"""Packages with names loaded on first use (pvefix.lazy): every exported name resolves, and
the live check's imports stay clear of what it does not use (start-up, issue 16)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

LAZY = ["pvefix.desired", "pvefix.hosttree", "pvefix.sources"]


@pytest.mark.parametrize("package", LAZY)
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_the_live_check_does_not_load_the_bundle_reader_the_host_meta_or_the_pci_models() -> None:
    # HostState and its PCI device and mapping models are the planner's (pvefix.hostfacts
    # holds what a check reads from a node).
    code = ("import sys, pvefix.check.run, pvefix.check.render, pvefix.desired.parse; "
            "print(sorted(m for m in ('pvefix.hosttree.meta', 'pvefix.hosttree.tree', "
            "'pvefix.hosttree.scenarios', 'pvefix.sources.bundle', 'pvefix.desired.store', "
            "'pvefix.check.junit', 'pvefix.state', 'pvefix.hosttree.sysfs', "
            "'pvefix.hosttree.mapping', 'pvefix.sources.common', 'pvefix.sources.remote_facts')"
            " if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_a_plan_from_a_bundle_does_not_load_the_connection_settings() -> None:
    # A bundle needs no connection: pvefix.target (its settings model) stays unloaded.
    scenario = Path(__file__).resolve().parents[2] / "pvefix" / "scenarios" / "kpro6"
    code = ("import contextlib, io, sys\n"
            "from pvefix.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['plan', '100', '--bundle', {str(scenario)!r}])\n"
            "print(sorted(m for m in sys.modules if m.startswith('pvefix.target')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]"
