"""The one seam through which the executor touches a node: API reads, writes and tasks, SSH
commands (argument lists, quoted with shlex) and SFTP file writes (temporary file + rename).

Reads of the whole target for planning and verification go through `pvefix.sources.live`; this
module only adds what writing needs.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pvefix.errors import PvefixError
from pvefix.target.api import ApiClient, ApiError
from pvefix.target.local import LocalApi
from pvefix.target.node import Node, replace_file, run_or_raise
from pvefix.target.nodes import ClusterView, NodeAddress, address_of
from pvefix.target.privileges import permission_hint
from pvefix.target.result import CommandResult
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection

TASK_POLL_S = 0.05

# paramiko logs every refused connection (a rebooting host) with a traceback on stderr; the
# executor reports connection failures itself, through exceptions.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


# How Proxmox ends a task that succeeded but logged warnings (PVE::RESTEnvironment).
WARNINGS = re.compile(r"WARNINGS: \d+")
LOCK_TIMEOUT = re.compile(r"can't lock file '[^']*lock-(\d+)\.conf' - got timeout")


class TaskFailed(PvefixError):
    """A Proxmox task ended with an exit status other than OK (or `WARNINGS: N`)."""

    def __init__(self, upid: str, exitstatus: str) -> None:
        self.upid = upid
        self.exitstatus = exitstatus
        super().__init__(f"task failed: {exitstatus}{_next_step(exitstatus, upid)}",
                         source=upid)


# A task that failed only because it could not take the VM's config lock changed nothing, so
# it is sent again, this many times (each waits Proxmox's 10 s for the lock). Right after a
# restart, qmeventd's `qm cleanup` of the old QEMU holds the lock for up to 30 s when the new
# QEMU started first (qemu-server waits for that process; seen on Proxmox's own daemons).
LOCK_RETRIES = 3


def _next_step(message: str, upid: str) -> str:
    lock = LOCK_TIMEOUT.search(message)
    if lock:
        return (f" (another task held VM {lock.group(1)}'s config lock for the whole wait, "
                f"{LOCK_RETRIES + 1} times: a backup, migration or another admin; this task "
                "changed nothing. Wait for it to end, then re-run)")
    if "Permission check failed" in message:
        fields = upid.split(":")  # UPID:node:pid:pstart:start:type:id:user[!token]:
        return permission_hint(message, fields[7] if len(fields) > 8 else None)
    return ""


class NodeGone(PvefixError):
    """The node a task runs on stopped answering before the task ended."""

    def __init__(self, node: str, upid: str, cause: PvefixError) -> None:
        super().__init__(
            f"node {node} stopped answering while its task ran ({cause.message}); whether the "
            f"task finished is unknown. When the node is back, read the task's end (`pvenode "
            f"task status {upid}` on {node}) and the VM's config, then re-run or roll back "
            "(pvefix rollback VMID)", source=upid)


def unreachable_hint(status: int | None, node: str) -> str:
    """What HTTP 595/596 (pveproxy could not reach the node, or the connection broke) means."""
    if status in (595, 596):
        return (f" (HTTP {status}: the API node could not reach node {node} or lost it; the "
                "request may not have reached it. Check that the node is up and in quorum "
                "(pvecm status), then re-run: pvefix reads everything again first)")
    return ""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Remote:
    """A connected node: the API client and, when SSH is on, one SSH session (opened lazily)."""

    def __init__(self, conn: Connection, node: str, sessions: Sessions | None = None) -> None:
        self.conn = conn.for_node(node)  # SSH goes to the VM's own node
        self.node = node
        self.sessions = sessions if sessions is not None else Sessions(conn)
        self._owns = sessions is None  # a command's sessions are closed by the command
        # pvefix on the node itself (--local): this host must be `node`, checked now.
        self.sessions.claim(node)
        self._cluster: ClusterView | None = None
        self._identity: str | None = None
        self.on_warning: Callable[[str], None] = _stderr  # where task warnings are shown

    # -- the node ---------------------------------------------------------------------------

    def cluster(self) -> ClusterView:
        """GET /cluster/status, once (node addresses, the cluster's name)."""
        if self._cluster is None:
            try:
                self._cluster = ClusterView.parse(self.get("/cluster/status"))
            except ApiError:
                self._cluster = ClusterView(None, {})
        return self._cluster

    def address(self) -> NodeAddress:
        """Where this node's SSH is (pvefix.target.nodes); with --local, this host."""
        return address_of(self.conn, self.node, self.cluster)

    def identity(self) -> str:
        """The cluster's identity (or this node's, standalone), with its CA's key: the key of
        pvefix's state (pvefix.target.identity). Asked once."""
        if self._identity is None:
            from pvefix.target.nodes import identity_key

            self._identity = self.cluster().identity(self.node, identity_key(self.conn))
        return self._identity

    # -- API --------------------------------------------------------------------------------

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        return self.api.get(path, params)

    def write(self, method: str, path: str, data: Mapping[str, str],
              timeout: float | None = None) -> Any:
        """POST or PUT; ApiError carries Proxmox's message (never the request's values).
        `timeout`: a task's time, for pvesh (--local), which runs the task before it answers."""
        try:
            return self.api.write(method, path, data, timeout)
        except ApiError as exc:
            hint = unreachable_hint(exc.status, self.node)
            if not hint:
                raise
            raise ApiError(exc.message + hint, status=exc.status, source=exc.source) from None

    def wait_task(self, upid: str, timeout: float) -> str:
        """Wait for a task to stop; returns its exit status (raises when it does not stop, or
        when its node went away mid-task)."""
        node = upid.split(":")[1] if upid.startswith("UPID:") else self.node
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.get(f"/nodes/{node}/tasks/{upid}/status")
            except PvefixError as exc:
                raise NodeGone(node, upid, exc) from None
            if status and status.get("status") == "stopped":
                return str(status.get("exitstatus", "unknown"))
            if time.monotonic() > deadline:
                raise PvefixError(
                    f"task did not finish within {timeout:g} s; it may still be running: "
                    f"look at it on node {node} (Tasks, or `pvenode task status {upid}`) "
                    "before anything else", source=upid)
            time.sleep(TASK_POLL_S)

    def run_task(self, path: str, data: Mapping[str, str], timeout: float,
                 warn: Callable[[str], None] | None = None) -> str:
        """POST an async call, wait for its task, and raise TaskFailed unless it ended OK or
        with `WARNINGS: N` (success: the task's WARN lines go to `warn`, else to
        `on_warning`). A task that could not take the VM's config lock is sent again
        (LOCK_RETRIES)."""
        for attempt in range(LOCK_RETRIES + 1):
            upid = self.write("POST", path, data, timeout)
            if not isinstance(upid, str) or not upid.startswith("UPID:"):
                return "OK"  # answered synchronously
            exitstatus = self.wait_task(upid, timeout)
            lock = LOCK_TIMEOUT.search(exitstatus)
            if lock is None or attempt == LOCK_RETRIES:
                break
            self.on_warning(f"VM {lock.group(1)}'s config lock is held by another task (after"
                            " a restart: Proxmox's cleanup of the old QEMU); trying again")
        if WARNINGS.fullmatch(exitstatus):
            lines = self.task_warnings(upid) or [f"({exitstatus}: see the task log)"]
            for line in lines:
                (warn or self.on_warning)(line)
            return exitstatus
        if exitstatus != "OK":
            raise TaskFailed(upid, exitstatus)
        return exitstatus

    def task_warnings(self, upid: str) -> list[str]:
        """The WARN: lines of a task's log."""
        node = upid.split(":")[1] if upid.startswith("UPID:") else self.node
        try:
            lines = self.get(f"/nodes/{node}/tasks/{upid}/log", {"limit": "1000"}) or []
        except PvefixError:
            return []
        texts = [str(item.get("t", "")) for item in lines if isinstance(item, dict)]
        return [t for t in texts if t.startswith("WARN")]

    # -- SSH --------------------------------------------------------------------------------

    @property
    def has_ssh(self) -> bool:
        """Host files and commands are reachable (SSH, or this host with --local)."""
        return self.conn.reaches_node

    @property
    def api(self) -> ApiClient | LocalApi:
        """The command's API session (opened on first use)."""
        return self.sessions.api()

    def host(self) -> Node:
        """The node's files and commands (pvefix.target.node: SSH, or this host with
        --local). An SSH session that dropped (network, sshd restart) is opened again, so
        that undo and rollback can still reach the host."""
        return self.sessions.host(self.node, self.address)

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult:
        """Run one command on the node (an argument list) within `timeout` seconds (default:
        --timeout); one that outlasts it is a PvefixError."""
        return run_or_raise(self.host(), argv, timeout, self.conn.timeout)

    def check(self, argv: Sequence[str]) -> CommandResult:
        """Run a command and raise, with its stderr, unless it exits 0."""
        result = self.run(argv)
        if not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise PvefixError(
                f"`{' '.join(argv)}` exited with {result.exit_code}"
                + (f": {detail[-1]}" if detail else ""),
                source=f"{self.conn.ssh_user}@{self.node} ({self.address()})",
            )
        return result

    def read_file(self, path: str) -> str | None:
        """A host file's text (None when it does not exist)."""
        return self.host().read_file(path)

    def write_file(self, path: str, text: str) -> None:
        """Replace a host file atomically: a temporary file beside it, then a rename (the
        mode of the old file is kept). A reader never sees half a file."""
        replace_file(self.host, path, text)

    def reconnect(self) -> None:
        """New API and SSH sessions (after a host reboot dropped the old ones)."""
        self.sessions.forget()

    def close(self) -> None:
        """Close the sessions this Remote opened itself (a command's stay open for it)."""
        if self._owns:
            self.sessions.close()
