"""The closed world is closed: every key, sub-option and lock value of qemu-server's schema (the
captured copy) is classified, and the registry is well formed."""

from __future__ import annotations

from typing import Any

import pytest

from pvefix.closedworld import CLAIMS
from pvefix.closedworld.registry import REGISTRY, inputs_of, lookup
from pvefix.closedworld.vm_states import LOCK_VALUES
from tests.closedworld.schema import captured, key_names, lock_values


def unclassified(desc: dict[str, Any], options: list[str]) -> list[str]:
    """What the schema holds that the registry does not classify."""
    missing = [f"config key {k}" for k in key_names(desc) if lookup("config-key", k) is None]
    missing += [f"hostpci sub-option {o}" for o in options
                if lookup("hostpci-option", o) is None]
    missing += [f"lock value {v}" for v in lock_values(desc) if v not in LOCK_VALUES]
    return missing


def test_every_schema_key_sub_option_and_lock_is_classified() -> None:
    assert unclassified(*captured()) == []


def test_a_key_the_schema_gains_is_caught() -> None:
    desc, options = captured()
    desc = {**desc, "keys": {**desc["keys"], "x-new-key": {"type": "string"}}}
    assert unclassified(desc, [*options, "x-new-opt"]) == [
        "config key x-new-key", "hostpci sub-option x-new-opt"]


def test_the_registry_classifies_nothing_the_schema_lacks() -> None:
    desc, options = captured()
    extra = {"parent", "snaptime", "vmstate", "runningmachine", "runningcpu",
             "running-nets-host-mtu", "meta"}  # in config files, left out of the schema
    known = set(key_names(desc)) | extra
    # A sub-option of a key is classified as KEY:OPTION (machine:viommu) under a known key.
    assert [i.name for i in inputs_of("config-key")
            if i.name.partition(":")[0] not in known] == []
    assert [i.name for i in inputs_of("hostpci-option") if i.name not in options] == []


def test_each_input_is_classified_once() -> None:
    seen = [(i.kind, i.name) for i in REGISTRY]
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("item", REGISTRY, ids=[f"{i.kind}:{i.name}" for i in REGISTRY])
def test_each_input_says_why_and_names_real_claims(item: Any) -> None:
    assert item.why and all(c in CLAIMS for c in item.claims)
    assert item.status != "inert" or not item.claims


def test_the_docs_tables_list_every_classified_input() -> None:
    from pvefix.closedworld.docs import render

    text = render()
    for i in REGISTRY:
        assert f"| `{i.name.replace('|', chr(92) + '|')}` | {i.status} |" in text, i.name
