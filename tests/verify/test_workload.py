"""`pvefix verify --workload`: the user's smoke test in the (simulated) guest, under a time
limit: pass, fail and hang recorded as such."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.target.api import ApiClient
from pvefix.target.guest.agent import AgentChannel
from tests.verify.conftest import AGENT_VM, connection


def _pyz(body: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__main__.py", body)
    return buf.getvalue()


SCRIPTS = {
    "ok.pyz": "print('one request served')\n",
    "bad.pyz": "import sys\nprint('wrong tokens', file=sys.stderr)\nsys.exit(3)\n",
    "hang.pyz": "import time\ntime.sleep(30)\n",  # a NCCL all-reduce that never returns
}


@pytest.fixture
def workloads(agent_sim: ReadyInfo, tmp_path: Path) -> Path:
    channel = AgentChannel(ApiClient(connection(agent_sim, tmp_path)), agent_sim.node, AGENT_VM,
                           poll_s=0.05)
    try:
        for name, body in SCRIPTS.items():
            channel.upload(f"/tmp/{name}", _pyz(body))
    finally:
        channel.close()
    ready = tmp_path / "ready.json"
    write_ready_file(agent_sim, ready)
    return ready


@pytest.mark.parametrize(("script", "status", "code"),
                         [("ok.pyz", "pass", 0), ("bad.pyz", "fail", 2), ("hang.pyz", "hang", 2)])
def test_the_workload_is_recorded_as_pass_fail_or_hang(
    workloads: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str,
    status: str, code: int,
) -> None:
    state = tmp_path / "state"
    rc = main(["verify", str(AGENT_VM), "--connection", str(workloads), "--guest-agent",
               "--workload", f"python3 /tmp/{script}", "--workload-timeout", "3",
               "--state-dir", str(state), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert (rc, out["status"]) == (code, status)
    if status == "fail":
        assert out["exit_code"] == 3 and "wrong tokens" in out["stderr_tail"]
    if status == "hang":
        assert out["exit_code"] is None and out["seconds"] >= 3
    kept = list((state / "workloads" / str(AGENT_VM)).glob("*.json"))
    assert [json.loads(p.read_text())["status"] for p in kept] == [status]
