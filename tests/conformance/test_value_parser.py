"""pvefix's own value check (`pvefix.vmconfig.values.validate`, file-parser mode) agrees with
qemu-server's config parser (pve_oracle.pl `line`) on generated values.

One deliberate difference is left out: pvefix reports a `machine` that breaks the vIOMMU rules
while reading the file, where Proxmox's parser keeps it and refuses it at `qm set` and at start
(tests/vmconfig/test_corpus.py pins that).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.errors import ValidationError
from pvefix.vmconfig.schema import key_type
from pvefix.vmconfig.values import validate

pytestmark = pytest.mark.conformance

KEYS = [
    "onboot", "numa", "acpi", "sockets", "cores", "vcpus", "balloon", "cpuunits", "cpulimit",
    "migrate_downtime", "name", "ostype", "bios", "hostpci0", "hostpci15",
]
_WORDS = st.sampled_from([
    "0", "1", "yes", "ON", "True", "no", "2", "+1", "-1", "01", "1.5", ".5", "5.", "1e3",
    "llm-serve", "a b", "a.b", "-a", "win11", "win12", "ovmf", "0000:01:00.0", "01:00.0,pcie=1",
    "01:00,x-vga=1", "mapping=pro6000", "01:00.0,pcie=2", "01:00.0;02:00.0", "zz",
])
_VALUES = st.one_of(
    _WORDS,
    st.integers(-3, 300000).map(str),
    st.text(alphabet="0123456789abcdef-.:;=,", min_size=1, max_size=30),
).map(str.strip).filter(bool)


def _pvefix(key: str, value: str) -> str | None:
    try:
        validate(key, value, api=False)
    except ValidationError as exc:
        return exc.message
    return None


def test_the_keys_are_known_to_pvefix() -> None:
    assert all(key_type(k) for k in KEYS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=_VALUES)
def test_pvefix_reads_a_value_as_qemu_servers_parser_does(
    oracle: Any, key: str, value: str
) -> None:
    answer = oracle.ask("line", f"{key}: {value}")
    mine = _pvefix(key, value)
    assert bool(answer.get("ok")) == (mine is None), (
        f"{key}: {value!r}: pvefix {mine!r}, Proxmox {answer.get('error')!r}"
    )
