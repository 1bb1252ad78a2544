"""Every command pvefix prints runs as printed (issue 36 item 3), harvested from real runs
against the simulator: after `plan --out FILE` each `Next:` applies the reviewed FILE, phase 3
on an API token carries `--qm-set`, a phase applied twice is "nothing to do" and its `Next:`
still runs; the host-key refusals' `ssh-keygen -R` and `ssh-keyscan` lines, run as printed by a
shell, let the next run through. (tests/executor/test_hints_as_printed.py: the VMID story and
the Ctrl-C lines.)"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.errors import EXIT_CHANGES, EXIT_OK
from tests.executor.conftest import Node
from tests.executor.test_hints_as_printed import _hints, _run, follow

pytestmark = pytest.mark.slow


def _token_only(n: Node, path: Path, **changes: object) -> Path:
    """The node's ready file without root@pam's password: pvefix logs in with the API token."""
    data = {k: v for k, v in json.loads(n.ready_file.read_text()).items()
            if k not in ("user", "password")}
    path.write_text(json.dumps({**data, **changes}))
    path.chmod(0o600)
    return path


def test_plan_out_then_each_next_line_applies_the_reviewed_file_on_a_token(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("kpro6")
    ready = _token_only(n, tmp_path / "token.json")
    before = n.conf(100)
    target = ["--connection", str(ready), "--state-dir", str(n.state_dir)]
    code, out = _run(shlex.join(["pvefix", "plan", "100", "--p2p", "--out", "reviewed plan.json",
                                 *target]), n)
    assert code == EXIT_CHANGES, out
    (first,) = _hints(out)

    def once_more(ran: list[str], onward: str | None) -> None:
        if len(ran) == 1:  # the same line again: nothing to do, exit 0, and its Next runs
            code, again = _run(ran[0], n)
            assert code == EXIT_OK and "phase 1: nothing to do" in again, again
            assert _hints(again) == [onward], again

    ran, undos, last = follow(first, n, until="pvefix check ", limit=4, after=once_more)
    assert last is not None, "the story ends at a printed `pvefix check`"
    line = last
    want = ["apply", "plans/reviewed plan.json", "--phase"]
    assert [shlex.split(r)[1:4] for r in ran] == [want] * 3
    assert [shlex.split(r)[4] for r in ran] == ["1", "2", "3"]
    assert "--qm-set" in shlex.split(ran[2]), "args is root@pam's: qm set over SSH"
    assert "--p2p" not in " ".join(ran), "the file carries its P2P options"
    assert "x-nv-gpudirect-clique" in n.conf(100).decode()
    code, out = _run(line, n)
    assert code == EXIT_OK, f"{line}\n{out}"
    for undo in reversed(undos):
        code, out = _run(undo, n)
        assert code == EXIT_OK, f"{undo}\n{out}"
    assert n.conf(100) == before


# The commands a host-key refusal gives: `ssh-keygen ... -R NAME` and `ssh-keyscan ... >> FILE`.
ARG = r"(?:'[^']*'|[^\s'])+"  # one shell word, single-quoted parts included
SSH_HINT = re.compile(rf"(ssh-keygen (?:-f {ARG} )?-R {ARG}|ssh-keyscan (?:{ARG} )+>> {ARG})")


def _shell(line: str) -> None:
    """A printed ssh-keygen / ssh-keyscan line, run by a shell as the admin pastes it."""
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize("kind", ["unknown", "changed"])
def test_a_host_key_refusal_gives_the_commands_that_fix_it(
    node: Callable[..., Node], tmp_path: Path, kind: str
) -> None:
    if shutil.which("ssh-keyscan") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("needs OpenSSH's ssh-keyscan and ssh-keygen (Debian: openssh-client)")
    n = node("kpro6")
    port = n.info.ssh_port
    known = tmp_path / "known hosts"
    known.write_text("")
    if kind == "changed":
        other = tmp_path / "other"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                       check=True, capture_output=True)
        algo, key = other.with_suffix(".pub").read_text().split()[:2]
        known.write_text(f"[127.0.0.1]:{port} {algo} {key}\n")
    ready = _token_only(n, tmp_path / "ready.json", known_hosts=str(known))
    plan = shlex.join(["pvefix", "plan", "100", "--connection", str(ready)])
    code, out = _run(plan, n)
    assert code not in (EXIT_OK, EXIT_CHANGES), out
    assert f"[127.0.0.1]:{port}" in out, "named as known_hosts and OpenSSH name it"
    assert "PORT" not in out and "HOST" not in out, "no placeholders: pvefix knows both"
    lines = SSH_HINT.findall(" ".join(out.split()))
    want = ["ssh-keyscan"] if kind == "unknown" else ["ssh-keygen", "ssh-keyscan"]
    assert [w.split()[0] for w in lines] == want, out
    if kind == "changed":
        assert lines[0] == shlex.join(["ssh-keygen", "-f", str(known), "-R",
                                       f"[127.0.0.1]:{port}"])
    for line in lines:
        _shell(line)
    code, out = _run(plan, n)
    assert code == EXIT_CHANGES, f"after {lines}:\n{out}"


def test_after_rolling_back_the_p2p_phase_the_printed_desired_line_records_the_goal(
    node: Callable[..., Node]
) -> None:
    n = node("kpro6", reboot_seconds=0.3)
    target = ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]
    for phase, flags in (("1", ["--restart"]), ("2", ["--reboot-host"]),
                         ("3", ["--restart", "--qm-set"])):
        code, out = _run(shlex.join(["pvefix", "apply", "100", "--phase", phase, *flags,
                                     "--p2p", "--yes", *target]), n)
        assert code == EXIT_OK, out
    (undo,) = [h for h in _hints(out) if h.startswith("pvefix rollback ")]
    code, out = _run(undo, n)
    assert code == EXIT_OK, f"{undo}\n{out}"
    assert "still asks for the P2P phase" in " ".join(out.split()), out
    said = re.search(r"^ *(?:.*: )?(pvefix desired [^\n]*)$", out, re.MULTILINE)
    assert said, out
    line = said.group(1)
    assert shlex.split(line)[:5] == ["pvefix", "desired", "100", "--no-p2p", "--record"]
    check = shlex.join(["pvefix", "check", "100", *target])
    assert _run(check, n)[0] == EXIT_CHANGES, "the recorded goal still asks for P2P: drift"
    code, out = _run(line, n)
    assert code == EXIT_OK, f"{line}\n{out}"
    code, out = _run(check, n)
    assert code == EXIT_OK, f"after {line}:\n{out}"
