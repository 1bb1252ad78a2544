"""`pvefix verify --workload CMD`: the user's own smoke test (their serving stack) in the guest.

A passing P2P copy is necessary but not sufficient: where the clique asserts a capability the
host does not have, NCCL can hang instead of falling back (docs/p2p.md). So the last proof is
the user's own workload, run in the guest with a time limit: `pass` (exit 0), `fail` (another
exit status) or `hang` (still running at the limit). CMD is split into words as a shell would
(no pipes or redirections: wrap those in `sh -c '...'` yourself). Each run is kept as JSON in
`<state>/workloads/<vmid>/<timestamp>.json`.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pvefix.errors import PvefixError
from pvefix.store.statedir import ensure_private_dir, write_private
from pvefix.target.guest.channel import GuestChannel
from pvefix.verify.store import new_report_id

WORKLOADS = "workloads"
TAIL = 4000  # characters of stdout/stderr kept


class WorkloadResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    vmid: int
    via: str
    command: str
    timeout_s: float
    status: Literal["pass", "fail", "hang"]
    exit_code: int | None
    seconds: float
    stdout_tail: str
    stderr_tail: str

    def render(self) -> str:
        head = {"pass": "PASS", "fail": "FAIL", "hang": "HANG"}[self.status]
        lines = [f"workload in VM {self.vmid} ({self.via}): {head} after {self.seconds:.1f} s",
                 f"  command: {self.command}"]
        if self.status == "hang":
            lines.append(f"  still running at the {self.timeout_s:.0f} s limit (a P2P hang looks"
                         " like this); pvefix did not stop it: check the guest")
        elif self.status == "fail":
            lines.append(f"  exit status {self.exit_code}")
        for name, text in (("stdout", self.stdout_tail), ("stderr", self.stderr_tail)):
            if text.strip():
                lines.append(f"  {name} (last lines):")
                lines += [f"    {ln}" for ln in text.rstrip().splitlines()[-10:]]
        return "\n".join(lines) + "\n"


def run_workload(channel: GuestChannel, vmid: int, command: str,
                 timeout: float) -> WorkloadResult:
    argv = shlex.split(command)
    if not argv:
        raise PvefixError("--workload needs a command")
    start = time.monotonic()
    result = channel.run(argv, timeout)
    seconds = time.monotonic() - start
    status: Literal["pass", "fail", "hang"] = (
        "hang" if result.timed_out else "pass" if result.exit_code == 0 else "fail")
    return WorkloadResult(vmid=vmid, via=channel.where, command=command, timeout_s=timeout,
                          status=status, exit_code=result.exit_code, seconds=seconds,
                          stdout_tail=result.stdout[-TAIL:], stderr_tail=result.stderr[-TAIL:])


def store_workload(state_dir: Path, result: WorkloadResult) -> Path:
    folder = state_dir / WORKLOADS / str(result.vmid)
    for f in (state_dir, state_dir / WORKLOADS, folder):
        ensure_private_dir(f)
    path = folder / f"{new_report_id()}.json"
    write_private(path, (result.model_dump_json(indent=2) + "\n").encode("utf-8"))
    return path
