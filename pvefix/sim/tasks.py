"""Worker tasks with Proxmox UPIDs, a status and a log.

A task's effect is applied at once (under the node's lock) but it reports `running` for a short,
configurable time, as a real worker would; clients must poll, as they must on Proxmox.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.sim.errors import ApiError

UPID_RE = re.compile(r"UPID:[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8,9}"
                     r":[0-9A-Fa-f]{8}:[^:\s]+:[^:\s]*:[^:\s]+:")


class TaskLog:
    """Lines a task prints (its `/log`)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.warnings = 0

    def __call__(self, line: str) -> None:
        self.lines.extend(line.rstrip("\n").split("\n"))

    def warn(self, message: str) -> None:
        """PVE::RESTEnvironment log_warn: a `WARN:` line, counted; a task that warned and did
        not fail ends with `WARNINGS: N` (qemu-server >= 9.0.30 ends some OVMF starts so)."""
        self.warnings += 1
        self(f"WARN: {message}")


@dataclass
class Task:
    upid: str
    node: str
    pid: int
    pstart: int
    starttime: int
    type: str
    id: str
    user: str
    done_at: float
    exitstatus: str = "OK"
    log: list[str] = field(default_factory=list)
    started_mono: float = 0.0

    def status(self, now: float) -> dict[str, object]:
        out: dict[str, object] = {
            "upid": self.upid, "node": self.node, "pid": self.pid, "pstart": self.pstart,
            "starttime": self.starttime, "type": self.type, "id": self.id,
            "user": self.user.split("!")[0],
        }
        if "!" in self.user:
            out["tokenid"] = self.user.split("!", 1)[1]
        if now >= self.done_at:
            out["status"] = "stopped"
            out["exitstatus"] = self.exitstatus
        else:
            out["status"] = "running"
        return out

    def list_item(self, now: float) -> dict[str, object]:
        """The task as GET /nodes/N/tasks lists it: a finished one has `endtime` and its exit
        text as `status`; a running one neither."""
        out = self.status(now)
        exitstatus = out.pop("exitstatus", None)
        if exitstatus is None:
            out.pop("status", None)
        else:
            out["status"] = exitstatus
            out["endtime"] = self.starttime + max(0, int(self.done_at - self.started_mono))
        return out

    def log_lines(self, now: float) -> list[str]:
        if now < self.done_at:
            return self.log[:-1] if self.log else []
        return self.log


class TaskRegistry:
    """All tasks of one node, keyed by UPID."""

    def __init__(self, node: str, duration_s: float = 0.2) -> None:
        self.node = node
        self.duration_s = duration_s
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._pids = itertools.count(os.getpid() * 7 % 0x3FFFFF + 1000)
        self._pstart = int(time.monotonic() * 100) & 0xFFFFFFF

    def run(self, type_: str, id_: str, user: str, work: Callable[[TaskLog], None]) -> str:
        """Run `work` now and record it as a task; its exception becomes the exit status."""
        pid = next(self._pids)
        start = int(time.time())
        upid = f"UPID:{self.node}:{pid:08X}:{self._pstart:08X}:{start:08X}:{type_}:{id_}:{user}:"
        log = TaskLog()
        exitstatus = "OK"
        try:
            work(log)
        except ApiError as exc:
            exitstatus = exc.message
            if exc.errors:
                exitstatus = "\n".join(f"{k}: {v}" for k, v in exc.errors.items())
        except PvefixError as exc:
            exitstatus = str(exc)
        if exitstatus == "OK" and log.warnings:
            exitstatus = f"WARNINGS: {log.warnings}"
            log.lines.append(f"TASK {exitstatus}")
        else:
            log.lines.append("TASK OK" if exitstatus == "OK" else f"TASK ERROR: {exitstatus}")
        task = Task(
            upid=upid, node=self.node, pid=pid, pstart=self._pstart, starttime=start,
            type=type_, id=id_, user=user, done_at=time.monotonic() + self.duration_s,
            exitstatus=exitstatus, log=log.lines, started_mono=time.monotonic(),
        )
        with self._lock:
            self._tasks[upid] = task
        return upid

    def get(self, upid: str) -> Task:
        """A task by UPID; Proxmox's parameter errors for a malformed or unknown one."""
        if UPID_RE.fullmatch(upid) is None:
            raise ApiError(400, "Parameter verification failed.",
                           {"upid": "unable to parse worker upid"})
        with self._lock:
            task = self._tasks.get(upid)
        if task is None:
            raise ApiError(400, "Parameter verification failed.", {"upid": "no such task"})
        return task

    def all(self) -> list[Task]:
        """Every task, newest first (as the task index lists them)."""
        with self._lock:
            return list(reversed(self._tasks.values()))
