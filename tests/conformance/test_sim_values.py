"""The simulator stores what Proxmox stores, and runs the machine Proxmox runs.

A multi-line description is stored as '#' lines, and Proxmox's own parser reads it back whole.
(Value checks against qemu-server's schema: test_sim_schema.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.sim.conftest import own  # noqa: F401  (the fixture)
from tests.simkit import ssh

pytestmark = pytest.mark.conformance


def test_a_multi_line_description_is_stored_as_proxmox_stores_it(
    oracle: Any, own: Callable[..., Any]  # noqa: F811
) -> None:
    info, _, ticket = own()
    ticket.nodes(info.node).qemu(101).config.put(description="line one\nline two")
    client = ssh(info)
    with client.open_sftp() as sftp, sftp.open("/etc/pve/qemu-server/101.conf") as fh:
        text = fh.read().decode()
    client.close()
    parsed = oracle.ask("config", text)
    assert parsed["ok"], parsed
    assert parsed["config"]["description"] == "line one\nline two"
    assert parsed["written"] == text
