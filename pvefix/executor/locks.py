"""One apply or rollback per VM at a time: a lock on the VM's node and one in the state dir.

Two admins (or two CI jobs) running pvefix on one VM would otherwise interleave their writes and
undo each other's. The node lock is a directory made atomically with `mkdir` under /run/pvefix
on the VM's own node (tmpfs: a host reboot clears it), holding an `owner` file; the local lock is
a file made with O_EXCL in the state directory. Both name their holder (host, pid, user, what,
since when). A holder that is gone is detected: a local lock whose process no longer runs on
this machine is cleared; a node lock held by a dead process of this machine likewise; any other
node lock is reported with how to clear it by hand.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.remote import Remote
from pvefix.store.statedir import FILE_MODE, ensure_private_dir

LOCAL_DIR = "locks"
NODE_DIR = "/run/pvefix"
OLD_AFTER_S = 6 * 3600  # a node lock this old is likely left over: say so


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    user: str
    action: str
    since: float

    @classmethod
    def me(cls, action: str) -> Holder:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        return cls(socket.gethostname(), os.getpid(), user, action, time.time())

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"{self.action} by {self.user} on {self.host} (pid {self.pid}) since {when}"

    def gone(self) -> bool:
        """A process of this machine that no longer runs."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def _parse(text: str | None) -> Holder | None:
    try:
        data = json.loads(text or "")
        return Holder(str(data["host"]), int(data["pid"]), str(data["user"]),
                      str(data["action"]), float(data["since"]))
    except (ValueError, KeyError, TypeError):
        return None


def _take_local(path: Path, me: Holder, say: Callable[[str], None]) -> None:
    for _attempt in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            holder = _parse(path.read_text(encoding="utf-8", errors="replace"))
            if holder is not None and holder.gone():
                say(f"cleared a stale local lock ({holder.describe()}: that process is gone)")
                path.unlink(missing_ok=True)
                continue
            who = holder.describe() if holder else "an unreadable lock file"
            raise RefusedError(
                f"another pvefix is changing this VM: {who}; nothing was written. Wait for it;"
                f" if it is gone, remove {path}", source=str(path),
            ) from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(me), fh)
        return
    raise RefusedError("could not take the local lock", source=str(path))


def _take_node(remote: Remote, vmid: int, me: Holder, say: Callable[[str], None]) -> str:
    folder = f"{NODE_DIR}/vm-{vmid}.lock"
    owner = f"{folder}/owner"
    remote.check(["mkdir", "-p", NODE_DIR])
    for _attempt in range(2):
        made = remote.run(["mkdir", folder])
        if made.ok:
            remote.write_file(owner, json.dumps(asdict(me)) + "\n")
            return folder
        holder = _parse(remote.read_file(owner))
        if holder is not None and holder.gone():
            say(f"cleared a stale lock on the node ({holder.describe()}: that process is gone)")
            remote.check(["rm", "-rf", folder])
            continue
        who = holder.describe() if holder else "a lock without a readable owner"
        old = holder is not None and time.time() - holder.since > OLD_AFTER_S
        raise RefusedError(
            f"another pvefix is changing VM {vmid} on node {remote.node}: {who}; nothing was"
            " written."
            + (" It is more than 6 hours old and may be left over:" if old else "")
            + f" if no pvefix runs there, remove it on the node with: rm -r {folder}",
            source=f"node {remote.node}",
        )
    raise RefusedError("could not take the node lock", source=f"node {remote.node}")


@contextlib.contextmanager
def vm_lock(state_dir: Path, remote: Remote, vmid: int, action: str,
            say: Callable[[str], None]) -> Iterator[None]:
    """Hold the local and (with SSH) the node lock of VM `vmid` for the block."""
    me = Holder.me(action)
    local = ensure_private_dir(state_dir / LOCAL_DIR) / f"{remote.node}-{vmid}.lock"
    _take_local(local, me, say)
    folder: str | None = None
    try:
        if remote.has_ssh:
            folder = _take_node(remote, vmid, me, say)
        yield
    finally:
        if folder is not None:
            with contextlib.suppress(PvefixError, OSError):
                remote.run(["rm", "-rf", folder])
        local.unlink(missing_ok=True)
