"""The `pveum acl modify ...` lines pvefix prints for a 403 run as printed on Proxmox VE's own
API daemons (../shared/pve-api), inside the node as root: a privilege-separated token without
any ACL is told what to grant, the printed line grants it, and the same command then goes on
(issue 36 item 3: every command pvefix prints runs as printed)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_real_api_privileges import Tokens
from tests.realapi import run_pvefix

pytestmark = pytest.mark.conformance
PVEUM = re.compile(r"`(pveum acl modify [^`]+)`")
# The harness ships no /usr/sbin/pveum script (only qm and pvesh); this is that script's own
# program, Proxmox's CLI module run with the printed arguments, inside the node as root.
PVEUM_PROGRAM = ("perl", "-e", "use PVE::CLI::pveum; PVE::CLI::pveum->run_cli_handler();")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("command", ["plan 100", "check 100"])
def test_a_403_hint_runs_as_printed_and_lets_the_command_through(
    command: str, pve_api: Any, tmp_path: Path
) -> None:
    node = pve_api.node("kpro6")
    ready = Tokens(node, tmp_path).ready(())  # privilege-separated, no ACL at all
    state = ["--state-dir", str(tmp_path / "state")]
    ran: list[str] = []
    for _ in range(6):  # each hint names what the next refusal was: follow them as printed
        run = run_pvefix([*command.split(), "--connection", str(ready), *state], tmp_path)
        lines = [ln for ln in dict.fromkeys(PVEUM.findall(" ".join((run.out + run.err).split())))
                 if ln not in ran]
        if not lines:
            break
        assert run.rc == 1, run
        for line in lines:
            argv = shlex.split(line)
            assert argv[0] == "pveum", line
            done = node.exec(*PVEUM_PROGRAM, *argv[1:])
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
            ran.append(line)
    else:
        pytest.fail(f"still refused after following {ran}")
    assert ran, "a token without any ACL was given no pveum line"
    text = run.out + run.err
    assert "Permission check failed" not in text and "pveum" not in text, run
    if command.startswith("plan"):
        assert run.rc == 2, run
    else:  # past the rights it lacked: no desired state was recorded for this cluster yet
        assert run.rc == 1 and "no desired state recorded for VM 100" in text, run
