"""Proxmox tasks over the command's API session (pvefix.target.sessions: `Sessions.api()`,
an `ApiClient` or, with --local, `LocalApi`): a write (POST or PUT) with what HTTP 595/596
means, a task waited for until it stops (its node gone mid-task said so), and a task run to
its end: sent again while another task holds the VM's config lock, its `WARNINGS: N` lines
shown, any other end raised as `TaskFailed`.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from pvefix.errors import PvefixError
from pvefix.target.api import ApiClient, ApiError
from pvefix.target.local import LocalApi
from pvefix.target.privileges import permission_hint

Api = ApiClient | LocalApi
Warn = Callable[[str], None]
TASK_POLL_S = 0.05

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


def stderr(line: str) -> None:
    """Where task warnings go when the caller names nowhere else."""
    print(line, file=sys.stderr, flush=True)


def write(api: Api, node: str, method: str, path: str, data: Mapping[str, str],
          timeout: float | None = None) -> Any:
    """POST or PUT; ApiError carries Proxmox's message (never the request's values).
    `timeout`: a task's time, for pvesh (--local), which runs the task before it answers."""
    try:
        return api.write(method, path, data, timeout)
    except ApiError as exc:
        hint = unreachable_hint(exc.status, node)
        if not hint:
            raise
        raise ApiError(exc.message + hint, status=exc.status, source=exc.source) from None


def _task_node(upid: str, node: str) -> str:
    return upid.split(":")[1] if upid.startswith("UPID:") else node


def wait_task(api: Api, node: str, upid: str, timeout: float) -> str:
    """Wait for a task to stop; returns its exit status (raises when it does not stop, or
    when its node went away mid-task)."""
    node = _task_node(upid, node)
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = api.get(f"/nodes/{node}/tasks/{upid}/status")
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


def run_task(api: Api, node: str, path: str, data: Mapping[str, str], timeout: float,
             say: Warn = stderr, warn: Warn | None = None) -> str:
    """POST an async call on `node`, wait for its task, and raise TaskFailed unless it ended
    OK or with `WARNINGS: N` (success: the task's WARN lines go to `warn`, else to `say`). A
    task that could not take the VM's config lock is sent again (LOCK_RETRIES), said to
    `say`."""
    for attempt in range(LOCK_RETRIES + 1):
        upid = write(api, node, "POST", path, data, timeout)
        if not isinstance(upid, str) or not upid.startswith("UPID:"):
            return "OK"  # answered synchronously
        exitstatus = wait_task(api, node, upid, timeout)
        lock = LOCK_TIMEOUT.search(exitstatus)
        if lock is None or attempt == LOCK_RETRIES:
            break
        say(f"VM {lock.group(1)}'s config lock is held by another task (after a restart:"
             " Proxmox's cleanup of the old QEMU); trying again")
    if WARNINGS.fullmatch(exitstatus):
        for line in task_warnings(api, node, upid) or [f"({exitstatus}: see the task log)"]:
            (warn or say)(line)
        return exitstatus
    if exitstatus != "OK":
        raise TaskFailed(upid, exitstatus)
    return exitstatus


def task_warnings(api: Api, node: str, upid: str) -> list[str]:
    """The WARN: lines of a task's log."""
    try:
        lines = api.get(f"/nodes/{_task_node(upid, node)}/tasks/{upid}/log",
                        {"limit": "1000"}) or []
    except PvefixError:
        return []
    texts = [str(item.get("t", "")) for item in lines if isinstance(item, dict)]
    return [t for t in texts if t.startswith("WARN")]
