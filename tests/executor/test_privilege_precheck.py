"""Every privilege a phase's writes need is asked of Proxmox (one GET /access/permissions)
before the first write: a token that lacks any is refused (exit 3) naming each one missing, and
the VM is untouched; never a `machine: q35` written, then refused on the next key and undone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import SecretStr

from pvefix.errors import RefusedError
from pvefix.target.settings import Connection
from tests.executor.conftest import Node
from tests.simkit import grant

MAPPING = "/mapping/pci/pro6000"


def _privsep(n: Node) -> Connection:
    """The simulator's privilege-separated token: PVEVMAdmin on /vms, PVEMappingUser on
    /mapping/pci; here also PVEAuditor on / (to read the node, as docs/connection.md says)."""
    grant(n.sim.state.tree.root, n.info.privsep_token_id or "", "PVEAuditor", "/")
    return n.conn("token").model_copy(update={
        "token_id": n.info.privsep_token_id,
        "token_secret": SecretStr(n.info.privsep_token_secret or "")})



def test_a_token_without_mapping_use_is_refused_before_the_first_write(
    node: Callable[..., Node],
) -> None:
    n = node("kpro6")
    conn = _privsep(n)
    grant(n.sim.state.tree.root, n.info.privsep_token_id or "", "NoAccess", MAPPING)
    before = n.fingerprint(100)
    with pytest.raises(RefusedError) as caught:
        n.apply(100, 1, conn=conn, restart=True)
    said = str(caught.value)
    assert f"Mapping.Use on {MAPPING}" in said and "nothing was written" in said
    assert "VM.Config.HWType" not in said, "the token holds it through PVEVMAdmin on /vms"
    assert n.fingerprint(100) == before


def test_every_missing_privilege_is_named_at_once(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    conn = _privsep(n)
    token = n.info.privsep_token_id or ""
    grant(n.sim.state.tree.root, token, "PVEVMUser", "/vms/100")  # replaces PVEVMAdmin there
    grant(n.sim.state.tree.root, token, "NoAccess", MAPPING)
    before = n.fingerprint(100)
    with pytest.raises(RefusedError) as caught:
        n.apply(100, 1, conn=conn, restart=True)
    said = str(caught.value)
    for missing in ("VM.Config.HWType on /vms/100", "VM.Config.CPU on /vms/100",
                    f"Mapping.Use on {MAPPING}"):
        assert missing in said
    assert "VM.PowerMgmt" not in said, "PVEVMUser holds it"
    assert n.fingerprint(100) == before


def test_a_token_holding_them_all_applies(node: Callable[..., Node]) -> None:
    n = node("kpro6")
    result = n.apply(100, 1, conn=_privsep(n), restart=True)
    assert result.done and b"machine: q35" in n.conf(100)


def test_a_rollback_through_the_api_asks_for_every_key_it_puts_back(
    node: Callable[..., Node],
) -> None:
    n = node("kpro6")
    n.apply(100, 1, conn=n.conn(ssh=False))
    applied = n.conf(100)
    conn = _privsep(n).model_copy(update={"ssh": False})
    grant(n.sim.state.tree.root, n.info.privsep_token_id or "", "PVEVMUser", "/vms/100")
    with pytest.raises(RefusedError) as caught:
        n.rollback(100, conn=conn)
    said = str(caught.value)
    assert "VM.Config.HWType on /vms/100" in said  # machine, hostpciN
    assert "nothing was written" in said
    assert n.conf(100) == applied
