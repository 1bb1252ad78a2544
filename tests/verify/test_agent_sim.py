"""The guest agent path against the simulator over real HTTPS: Proxmox's refusals, chunked
uploads, and the probe really running in the simulated guest."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.probe.report import Report
from pvefix.sim.serve import ReadyInfo
from pvefix.target.api import ApiClient, ApiError
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.agent import CHUNK_BYTES, MAX_CONTENT, AgentChannel
from pvefix.verify.channel import run_probe
from pvefix.verify.take import take_probe
from pvefix.verify.zipapp import build_probe_zipapp
from tests.simkit import api
from tests.verify.conftest import AGENT_VM, connection, guest_dir, set_agent

AGENT = GuestAccess(method="agent")


def test_the_probe_runs_in_the_guest_and_comes_back_as_a_valid_report(
    agent_sim: ReadyInfo, tmp_path: Path
) -> None:
    report = take_probe(connection(agent_sim, tmp_path), AGENT, AGENT_VM, quick=True)
    assert isinstance(report, Report) and report.quick
    # The simulated guest is this CPU machine: no GPU is the honest answer.
    assert not report.gpus.measured and "no NVIDIA GPU" in (report.gpus.reason or "")
    assert list(guest_dir(agent_sim, AGENT_VM).iterdir()) == []  # the zipapp was removed


def test_a_zipapp_larger_than_one_file_write_goes_in_checked_parts(
    agent_sim: ReadyInfo, tmp_path: Path
) -> None:
    big = build_probe_zipapp(extra={"pad.bin": os.urandom(200_000)})
    assert len(big) > 4 * CHUNK_BYTES
    client = ApiClient(connection(agent_sim, tmp_path))
    channel = AgentChannel(client, agent_sim.node, AGENT_VM, poll_s=0.05)
    try:
        report = run_probe(channel, quick=True, zipapp=big)
    finally:
        channel.close()
    assert report.schema_ == "pvefix.probe/v1"
    assert list(guest_dir(agent_sim, AGENT_VM).iterdir()) == []  # parts, joiner, zipapp gone


def test_file_write_takes_at_most_60_kib_as_proxmox_does(agent_sim: ReadyInfo) -> None:
    prox = api(agent_sim, "token")
    agent = prox.nodes(agent_sim.node).qemu(AGENT_VM).agent
    agent("file-write").post(file="/tmp/ok", content="A" * MAX_CONTENT, encode=0)
    with pytest.raises(Exception, match="Parameter verification failed"):
        agent("file-write").post(file="/tmp/big", content="A" * (MAX_CONTENT + 1), encode=0)
    assert (guest_dir(agent_sim, AGENT_VM) / "ok").stat().st_size == MAX_CONTENT // 4 * 3
    assert agent("file-read").get(file="/tmp/ok")["bytes-read"] == MAX_CONTENT // 4 * 3


@pytest.mark.parametrize(
    ("vmid", "agent_line", "start", "message"),
    [
        (100, None, False, "No QEMU guest agent configured"),
        (AGENT_VM, "1", False, f"VM {AGENT_VM} is not running"),
        (AGENT_VM, "0", True, "QEMU guest agent is not running"),
        (AGENT_VM, "fstrim_cloned_disks=1", True, "QEMU guest agent is not running"),
    ],
)
def test_proxmoxs_refusals_reach_the_user(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, vmid: int, agent_line: str | None,
    start: bool, message: str,
) -> None:
    info = fresh_sim("kpro6")
    if agent_line is not None:
        set_agent(info, vmid, agent_line, start=start)
    with pytest.raises(ApiError, match=message):
        take_probe(connection(info, tmp_path), AGENT, vmid, quick=True)


def test_the_simulated_guest_runs_nothing_but_the_probe(agent_sim: ReadyInfo) -> None:
    prox = api(agent_sim, "token")
    agent = prox.nodes(agent_sim.node).qemu(AGENT_VM).agent
    for command in (["sh", "-c", "id"], ["python3", "-c", "print(1)"],
                    ["python3", "/etc/passwd.pyz"], ["rm", "-f", "/etc/hosts"]):
        with pytest.raises(Exception, match="Agent error"):
            agent.exec.post(command=command)


def test_the_command_array_arrives_as_a_list(agent_sim: ReadyInfo, tmp_path: Path) -> None:
    """proxmoxer sends `command` as repeated form keys; each argument stays one argument."""
    client = ApiClient(connection(agent_sim, tmp_path))
    channel = AgentChannel(client, agent_sim.node, AGENT_VM, poll_s=0.05)
    try:
        channel.upload("/tmp/echo args.pyz", build_probe_zipapp())
        done = channel.run(["python3", "/tmp/echo args.pyz", "--format", "json", "--quick"], 60)
        assert done.ok, done.stderr
        Report.model_validate_json(done.stdout)
        gone = channel.run(["rm", "-f", "/tmp/echo args.pyz"], 30)
        assert gone.ok
    finally:
        channel.close()
    assert list(guest_dir(agent_sim, AGENT_VM).iterdir()) == []


def test_an_exited_command_is_reported_once_as_qemu_ga_does(
    agent_sim: ReadyInfo, tmp_path: Path
) -> None:
    client = ApiClient(connection(agent_sim, tmp_path))
    channel = AgentChannel(client, agent_sim.node, AGENT_VM, poll_s=0.05)
    try:
        done = channel.run(["rm", "-f", "/tmp/nothing"], 30)
        assert done.ok and done.exit_code == 0
        pid = channel.start(["rm", "-f", "/tmp/nothing"])
        while not channel.status(pid).get("exited"):
            pass
        with pytest.raises(ApiError, match="Invalid parameter 'pid'"):
            channel.status(pid)
    finally:
        channel.close()


def test_the_guest_agent_with_local_is_refused_with_the_way_that_works() -> None:
    from pvefix.errors import PvefixError
    from pvefix.target.open import open_guest
    from pvefix.target.settings import Connection

    with pytest.raises(PvefixError, match="--guest-ssh-host"):
        open_guest(Connection(backend="local"), AGENT, 100)


def test_a_token_that_may_not_run_commands_in_the_guest_is_refused_before_any_file_write(
    agent_sim: ReadyInfo, tmp_path: Path
) -> None:
    """PVEVMUser has the agent's file-write but not its exec (VM.GuestAgent.Unrestricted on
    Proxmox VE 9): without the pre-check the probe's file was written, the exec refused, and
    the file's removal (an exec too) refused, leaving it in the guest. Measured against
    Proxmox's own daemons in tests/conformance/test_real_api_privileges.py (the verify row)."""
    from pvefix.errors import RefusedError
    from tests.simkit import grant

    assert agent_sim.privsep_token_id and agent_sim.privsep_token_secret
    import json

    from pvefix.sim.serve import write_ready_file
    from pvefix.target.settings import resolve_connection

    ready = tmp_path / "privsep.json"
    write_ready_file(agent_sim, ready)
    fields = json.loads(ready.read_text())
    fields.update(token_id=agent_sim.privsep_token_id,
                  token_secret=agent_sim.privsep_token_secret)
    ready.write_text(json.dumps(fields))
    conn = resolve_connection(connection_file=ready, env={}, config=None)
    grant(agent_sim.root, agent_sim.privsep_token_id, "PVEVMUser", f"/vms/{AGENT_VM}")
    with pytest.raises(RefusedError) as refused:
        take_probe(conn, AGENT, AGENT_VM, quick=True)
    text = str(refused.value)
    assert f"VM.GuestAgent.Unrestricted on /vms/{AGENT_VM}" in text, text
    assert "--roles PVEVMAdmin" in text and "nothing was written in the guest" in text
    assert list(guest_dir(agent_sim, AGENT_VM).iterdir()) == []
    grant(agent_sim.root, agent_sim.privsep_token_id, "PVEVMAdmin", f"/vms/{AGENT_VM}")
    assert take_probe(conn, AGENT, AGENT_VM, quick=True).quick
