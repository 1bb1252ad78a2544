"""The simulator's value checks are qemu-server's schema, cross-checked with Proxmox's own code.

- pvefix/sim/confdesc.json is what `json_config_properties()` says today (no drift from the
  oracle's qemu-server);
- a table of values goes through the simulator's API (real HTTPS) and through PVE::JSONSchema's
  `validate` on the same schema: both accept, or both refuse with the same message;
- hypothesis-generated values for every key the simulator checks fully (types, ranges,
  patterns, lengths, enumerations, DNS names) get the same verdict from both.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxmoxer.core import ResourceException

from pvefix.sim import confschema
from tests.conformance import confdesc
from tests.oracle import oracle_missing
from tests.shared import NEEDS_SHARED, ORACLE
from tests.simkit import api

pytestmark = pytest.mark.conformance


class Validator:
    """One `pve_schema.pl validate` process: Proxmox's API check of one parameter."""

    def __init__(self) -> None:
        env = {**os.environ, "PVE_ORACLE_ROOT": str(ORACLE)}
        self.proc = subprocess.Popen(
            ["perl", str(confdesc.HELPER), "validate"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=env,
        )

    def check(self, key: str, value: str) -> str | None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"key": key, "value": value}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if answer["ok"]:
            return None
        error = answer["error"]
        return str(error.get(key, error) if isinstance(error, dict) else error).strip()

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def proxmox() -> Iterator[Validator]:
    why = oracle_missing()
    if why:
        pytest.skip(f"{NEEDS_SHARED}: {why}")
    v = Validator()
    yield v
    v.close()


def test_the_shipped_schema_is_what_qemu_servers_code_says(proxmox: Validator) -> None:
    want = confdesc.rendered(confdesc.current())
    got = confdesc.TARGET.read_text(encoding="utf-8")
    assert got == want, (
        "pvefix/sim/confdesc.json drifted: python -m tests.conformance.confdesc --write"
    )


TABLE = [
    ("sockets", "0"), ("sockets", "2"), ("cores", "0"), ("vcpus", "0"), ("memory", "16"),
    ("cpuunits", "262145"), ("cpulimit", "129"), ("cpulimit", "0.5"), ("shares", "50001"),
    ("description", "line one\nline two"), ("description", "x" * 8193),
    ("onboot", "1"), ("onboot", "yes"), ("numa", "2"), ("balloon", "-1"),
    ("ostype", "win11"), ("ostype", "win12"), ("name", "llm serve"), ("name", "llm-serve"),
    ("vmgenid", "1"), ("vmgenid", "nope"), ("startdate", "now"), ("startdate", "yesterday"),
    ("hostpci0", "0000:01:00.0,pcie=1"), ("hostpci0", "01:00.0,pcie=yes"),
    ("hostpci0", "zz:00.0"), ("hostpci16", "0000:01:00.0"),
    ("machine", "pc-q35-9.2+pve1"), ("machine", "pc,viommu=intel"),
    ("machine", "q35,viommu=intel,aw-bits=40"), ("machine", "i440fx"),
    ("meta", "creation-qemu=9.2.0"), ("nosuchkey", "1"),
]


@pytest.fixture(scope="module")
def node_101(sim_launcher: Any) -> tuple[str, Any]:
    """One kpro6 simulator for the table: each value is set on (or refused for) VM 101."""
    info = sim_launcher.start("kpro6")
    return info.node, api(info, "ticket")


@pytest.mark.parametrize(("key", "value"), TABLE, ids=[f"{k}={v[:20]!r}" for k, v in TABLE])
def test_the_simulators_api_checks_a_value_as_proxmox_does(
    proxmox: Validator, node_101: tuple[str, Any], key: str, value: str
) -> None:
    want = proxmox.check(key, value)
    node, ticket = node_101
    try:
        ticket.nodes(node).qemu(101).config.put(**{key: value})
        got = None
    except ResourceException as exc:
        got = str(exc)
    assert (got is None) == (want is None), f"simulator: {got!r}; Proxmox: {want!r}"
    spec = confschema.schema_of(key)
    if want is not None and not (spec and spec.get("format")):
        assert got is not None and want in got, f"simulator: {got!r}; Proxmox: {want!r}"


def _fully_checked() -> list[str]:
    data = confschema.confdesc()
    keys = [k for k, s in data["keys"].items() if s.get("format") in (None, "dns-name")]
    keys += [f"{p}0" for p, f in data["indexed"].items() if not f["schema"].get("format")]
    return sorted(keys)


FULLY_CHECKED = _fully_checked()
_VALUES = st.one_of(
    st.integers(-5, 300000).map(str),
    st.sampled_from(["0", "1", "yes", "on", "", "+1", "-0", "1.5", ".5", "5.", "1e3", "x",
                     "now", "2024-1-2", "/dev/parport0", "socket", "a b", "a-b.c", "-a",
                     "win11", "l26", "backup", "ovmf", "seabios", "none", "8" * 9000]),
    st.text(alphabet="0123456789abcdef-.:/ ", max_size=40),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(FULLY_CHECKED), value=_VALUES)
def test_generated_values_get_proxmoxs_verdict(proxmox: Validator, key: str, value: str) -> None:
    want = proxmox.check(key, value)
    got = confschema.check(key, value)
    assert (got is None) == (want is None), f"{key}={value!r}: simulator {got!r}, Proxmox {want!r}"
    if want is not None and got is not None:
        assert got in want, f"{key}={value!r}: simulator {got!r}, Proxmox {want!r}"
