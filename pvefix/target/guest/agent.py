"""The guest through the QEMU guest agent, over the Proxmox API (proxmoxer, checked TLS).

POST .../agent/exec starts a command (the argument list is the agent's `command` array) and
answers its pid; GET .../agent/exec-status is polled until `exited`. POST .../agent/file-write
takes at most 60 KiB of content per call and replaces the file each time, so uploads go base64
(`encode=0`) in parts of at most 45 KiB of data, and a tiny joiner zipapp puts them together in
the guest and checks their SHA-256. Proxmox's messages ("No QEMU guest agent configured",
"VM 100 is not running", "QEMU guest agent is not running") reach the user unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Sequence
from typing import Any

from pvefix.errors import PvefixError
from pvefix.target.api import ApiClient
from pvefix.target.guest.channel import cat_file, check, remove_quietly, remove_temp, temp_path
from pvefix.target.guest.joiner import build_joiner_zipapp
from pvefix.target.result import CommandResult

#: file-write's limit on `content` (characters): 60 KiB.
MAX_CONTENT = 60 * 1024
#: Data bytes per file-write: their base64 is exactly 60 KiB.
CHUNK_BYTES = MAX_CONTENT // 4 * 3


class AgentChannel:
    """Files and commands in VM `vmid`'s guest through its QEMU guest agent."""

    def __init__(self, api: ApiClient, node: str, vmid: int, *, poll_s: float = 0.2,
                 python: str = "python3", owns_api: bool = True) -> None:
        self.api = api
        self.owns_api = owns_api  # False: the API session is a command's, closed by it
        self.python = python
        self.vmid = vmid
        self.base = f"nodes/{node}/qemu/{vmid}/agent"
        self.where = f"QEMU guest agent of VM {vmid} on {node}"
        self.poll_s = poll_s
        self.calls = 0  # API calls made (tests and benchmarks count them)

    # -- raw calls --------------------------------------------------------------------------

    def _call(self, method: str, command: str, data: dict[str, Any]) -> Any:
        self.calls += 1
        return self.api.request(method, f"{self.base}/{command}", data,
                                what=f"{self.where}: {command}")

    def ping(self) -> None:
        """Fails with Proxmox's message when the agent is not configured or not running."""
        self._call("POST", "ping", {})

    def start(self, argv: Sequence[str]) -> int:
        """Start a command; the guest pid to poll."""
        answer = self._call("POST", "exec", {"command": list(argv)})
        return int(answer["pid"])

    def status(self, pid: int) -> dict[str, Any]:
        return dict(self._call("GET", "exec-status", {"pid": pid}))

    def agent_file_write(self, path: str, data: bytes) -> None:
        """One file-write (replaces the file): at most CHUNK_BYTES of data."""
        if len(data) > CHUNK_BYTES:
            raise PvefixError(f"{path}: {len(data)} bytes is more than one file-write takes")
        content = base64.b64encode(data).decode("ascii")
        self._call("POST", "file-write", {"file": path, "content": content, "encode": 0})

    # -- the channel ------------------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult:
        """Start `argv`, poll until it exits or `timeout` passes (it keeps running then: the
        agent cannot kill it, so the probe bounds its own time)."""
        pid = self.start(argv)
        deadline = time.monotonic() + timeout
        delay = min(self.poll_s, 0.05)
        while True:
            status = self.status(pid)
            if status.get("exited"):
                code = status.get("exitcode")
                if code is None and status.get("signal") is not None:
                    code = 128 + int(status["signal"])
                return CommandResult(tuple(argv), None if code is None else int(code),
                                  str(status.get("out-data", "")),
                                  str(status.get("err-data", "")))
            if time.monotonic() >= deadline:
                return CommandResult(tuple(argv), None, "", "", timed_out=True)
            time.sleep(delay)
            delay = min(delay * 2, self.poll_s)

    def upload(self, path: str, data: bytes) -> None:
        """Put `data` at `path`: one file-write, or parts joined (and checked) in the guest."""
        if len(data) <= CHUNK_BYTES:
            self.agent_file_write(path, data)
            return
        parts = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]
        names = [f"{path}.part{i:03d}" for i in range(len(parts))]
        joiner = path.removesuffix(".pyz") + "-join.pyz"
        try:
            for name, part in zip(names, parts, strict=True):
                self.agent_file_write(name, part)
            self.agent_file_write(joiner, build_joiner_zipapp())
            digest = hashlib.sha256(data).hexdigest()
            # The joiner finds the parts next to itself: only names cross over, not paths.
            name = path.rsplit("/", 1)[-1]
            done = self.run([self.python, joiner, name, digest, str(len(parts))], 120.0)
        except PvefixError:
            remove_quietly(self, [*names, joiner])
            raise
        remove_quietly(self, [joiner])
        if not done.ok:
            remove_quietly(self, names)
            raise PvefixError(f"{self.where}: putting the upload together failed: "
                              f"{done.stderr.strip()[:300] or done.exit_code}")

    def read_file(self, path: str) -> str | None:
        """`cat PATH` through the agent (None when the file does not exist)."""
        return cat_file(self, path)

    def replace_file(self, path: str, text: str) -> None:
        """file-write creates new files with the agent's own mode, so the old file is copied
        first (`cp -p` keeps its mode and owner), its copy's content replaced, and the copy
        renamed over it (`mv -f`); a failure removes the copy and leaves the file as it was."""
        tmp = temp_path(path)
        data = text.encode("utf-8", "surrogateescape")
        if len(data) > CHUNK_BYTES:
            raise PvefixError(f"{path}: {len(data)} bytes is more than one file-write takes",
                              source=self.where)
        try:
            check(self, ["cp", "-p", path, tmp])
            self.agent_file_write(tmp, data)
            check(self, ["mv", "-f", tmp, path])
        except PvefixError:
            remove_temp(self, tmp)
            raise

    def close(self) -> None:
        if self.owns_api:
            self.api.close()
