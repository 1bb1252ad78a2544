"""docs/connection.md's least-privileges table, measured against Proxmox VE's own API daemons.

Each row of the table runs as written (VMID, NODE, MAPPING filled in for kpro6's VM 100, or for
windows-igd's VM 300 where the row reaches the guest through its agent: VM 100 has none): with
a privilege-separated token holding exactly the row's ACLs the command succeeds; with any one
ACL left out it fails with Proxmox's 403 (or the empty VM list a token without rights sees), and
pvefix's message names what to grant. A root@pam-only row is refused to a token that holds
every privilege. Tokens and ACLs are made through the API as root@pam, the way an admin does
with `pveum`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.realapi import RealNode, Run, run_pvefix

pytestmark = pytest.mark.conformance

DOC = Path(__file__).resolve().parents[2] / "docs" / "connection.md"
HEADING = "### The least privileges each command needs"
FILLS = {"kpro6": {"VMID": "100", "NODE": "kpro6", "MAPPING": "pro6000"},
         "windows-igd": {"VMID": "300", "NODE": "atelier", "MAPPING": "rtx4090"}}


@dataclass(frozen=True)
class Row:
    commands: tuple[str, ...]
    acls: tuple[tuple[str, str], ...]  # (role, path)
    root_only: bool
    scenario: str

    def __str__(self) -> str:
        return "-".join(w.strip("-") for w in self.commands[0].split() if w != "FILE")

    @property
    def vmid(self) -> int:
        return int(FILLS[self.scenario]["VMID"])


def _fill(text: str, scenario: str) -> str:
    for name, value in FILLS[scenario].items():
        text = re.sub(rf"\b{name}\b", value, text)
    return text


def table_rows() -> list[Row]:
    """The rows of the table, as the docs print them."""
    lines = DOC.read_text().split(HEADING, 1)[1].splitlines()
    rows: list[Row] = []
    for line in lines:
        if line.startswith("#"):
            break
        if not line.startswith("| `"):
            continue
        first, acls = line.strip("| ").split(" | ")
        scenario = "windows-igd" if "--guest-agent" in first else "kpro6"
        commands = tuple(_fill(c, scenario) for c in re.findall(
            r"`((?:plan|check|desired|apply|rollback|verify)\b[^`]*)`", first))
        parts = [a.partition(" on ") for a in acls.split(";") if " on " in a]
        pairs = tuple((role.strip(), _fill(path.strip(), scenario)) for role, _, path in parts)
        rows.append(Row(commands, pairs, acls.startswith("root@pam"), scenario))
    return rows


class Tokens:
    """Privilege-separated tokens of root@pam with given ACLs, made through the API."""

    def __init__(self, node: RealNode, home: Path) -> None:
        from proxmoxer import ProxmoxAPI

        r = node.ready
        self.node, self.home, self.count = node, home, 0
        self.api = ProxmoxAPI(r["api_url"].removeprefix("https://"), user=r["user"],
                              password=r["password"], verify_ssl=r["ca_cert"], timeout=60)

    def ready(self, acls: tuple[tuple[str, str], ...]) -> Path:
        self.count += 1
        name = f"least{self.count}-{uuid.uuid4().hex[:8]}"
        secret = self.api.access.users("root@pam").token(name).post(privsep=1)["value"]
        for role, path in acls:
            self.api.access.acl.put(path=path, roles=role, tokens=f"root@pam!{name}")
        return self.node.ready_with(self.home / f"{name}.json", token_id=f"root@pam!{name}",
                                    token_secret=secret, privsep_token_id=None,
                                    privsep_token_secret=None)


def _run(command: str, ready: Path, home: Path, *extra: str) -> Run:
    confirm = ["--yes"] if command.startswith(("apply", "rollback")) else []
    return run_pvefix([*command.split(), *confirm, *extra, "--connection", str(ready)], home)


def _refused(run: Run, role: str, path: str) -> None:
    text = run.out + run.err
    assert run.rc != 0, f"without {role} on {path} the command still succeeded\n{run}"
    assert "pveum acl modify" in text and (
        "403 Permission check failed" in text or "lacks" in text
        or "an API token sees only the VMs its ACLs allow" in text), run


def _succeeded(command: str, run: Run) -> bool:
    """The command did its job: exit 0 or 2 (drift found), or, for verify, the probe ran in
    the harness's guest and said it measured no GPU there (../shared/pve-api's guest is a
    sandbox without PCI devices: exit 1 with "measured nothing")."""
    if command.startswith("verify"):
        return run.rc == 1 and "measured nothing" in run.out
    return run.rc in (0, 2)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("row", table_rows(), ids=str)
def test_each_row_of_the_least_privileges_table_holds_on_proxmox(
    row: Row, pve_api: Any, tmp_path: Path,
) -> None:
    vmid = row.vmid
    node: RealNode = pve_api.node(row.scenario)
    node.settle(vmid)
    tokens = Tokens(node, tmp_path)
    root = node.ready_file
    original = node.conf(vmid)
    desired = tmp_path / "desired.toml"
    assert _run(f"desired {vmid} -o", root, tmp_path, str(desired)).rc == 0
    for command in row.commands:
        command = command.replace("FILE", str(desired))
        if row.root_only:
            assert _run(f"apply {vmid} --phase 1 --restart", root, tmp_path).rc == 0
            node.settle(vmid)
            admin = tokens.ready((("Administrator", "/"),))
            refused = _run(command, admin, tmp_path, "--p2p")
            assert refused.rc == 3 and "only root@pam" in refused.err, refused
            assert _run(f"rollback {vmid} --restart", root, tmp_path).rc == 0
            continue
        undo = command.startswith("rollback")
        if undo:  # what it rolls back: the phase, applied with root's token
            assert _run(f"apply {vmid} --phase 1 --restart", root, tmp_path).rc == 0
        for left_out in row.acls:
            node.settle(vmid)
            ready = tokens.ready(tuple(a for a in row.acls if a != left_out))
            before = node.conf(vmid)
            refused = _run(command, ready, tmp_path)
            _refused(refused, *left_out)
            assert node.conf(vmid) == before, f"{command} without {left_out}: half written"
            if command.startswith(("apply", "rollback")) and left_out[0] != "PVEAuditor":
                # Asked before the first write (GET /access/permissions), never met half way
                # (a key written, the next one refused, the first undone).
                assert refused.rc == 3 and "nothing was written" in refused.err, refused
        node.settle(vmid)
        run = _run(command, tokens.ready(row.acls), tmp_path)
        assert _succeeded(command, run), f"with exactly {row.acls}:\n{run}"
        if command.startswith("apply"):
            node.settle(vmid)
            assert _run(f"rollback {vmid} --restart", root, tmp_path).rc == 0
        node.settle(vmid)
        assert node.conf(vmid) == original, f"{command}: the VM config was left changed"
