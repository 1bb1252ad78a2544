"""The closed world against qemu-server's own schema (../shared/pve-oracle): the captures are
current, and every key, hostpci sub-option and lock value Proxmox's code knows is classified, so
a Proxmox upgrade that adds one fails here."""

from __future__ import annotations

import pytest

from tests.closedworld.schema import captured, key_names, live
from tests.closedworld.test_registry import unclassified
from tests.oracle import oracle_missing
from tests.shared import NEEDS_SHARED

pytestmark = pytest.mark.conformance


def test_live_schema_is_classified_and_captured() -> None:
    why = oracle_missing()
    if why:
        pytest.skip(f"{NEEDS_SHARED}: {why}")
    desc, options = live()
    assert unclassified(desc, options) == []
    have_desc, have_options = captured()
    assert key_names(have_desc) == key_names(desc), "confdesc.json drifted"
    assert have_options == options, "python -m tests.closedworld.schema --write"
