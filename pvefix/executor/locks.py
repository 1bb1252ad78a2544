"""One apply or rollback per VM at a time: a lock on the VM's node and one in the state dir.

Two admins (or two CI jobs) running pvefix on one VM would otherwise interleave their writes and
undo each other's. Both locks name their holder (host, pid, user, what, since when).

The local lock is an flock(2) on `locks/NODE-VMID.lock` in the state directory, held for the
whole apply or rollback: the kernel releases it when the process ends in any way (kill -9
included), so a dead pvefix never leaves it held; the file then holds the last holder's name,
which `rollback` reports. The node lock is a directory under /run/pvefix (0700; tmpfs: a host
reboot clears it) on the VM's own node, holding an `owner` file. It comes into being with its
owner (made under a temporary name, then renamed into place), and a lock whose holder is gone
(a process of this machine that no longer runs) is taken over atomically: renamed to a
tombstone named after the exact owner text read, which only one taker can do, and a second
taker that read the same owner cannot move the new holder's lock there. The taker removes its
tombstone when it releases the lock, so /run/pvefix keeps no litter; a taker that moved a lock
whose owner is not the one it read (a late taker whose read predates a tombstone now gone)
puts it back at once and takes nothing. Any other node lock is reported with how to clear it
by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from pvefix.errors import PvefixError, RefusedError
from pvefix.store.statedir import FILE_MODE, ensure_private_dir
from pvefix.target.node import ReopeningNode
from pvefix.target.sessions import Sessions

LOCAL_DIR = "locks"
NODE_DIR = "/run/pvefix"
DIR_MODE_FLAG = "--mode=0700"  # whatever the umask (GNU mkdir; LocalShell and the simulator)
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


def _take_local(path: Path, me: Holder, say: Callable[[str], None]) -> int:
    """flock the local lock file (made 0600) and write `me` into it; the open descriptor holds
    the lock until `_release_local`."""
    for _attempt in range(5):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _parse(_read_fd(fd))
            os.close(fd)
            who = holder.describe() if holder else "a pvefix that is starting"
            raise RefusedError(
                f"another pvefix is changing this VM: {who}; nothing was written. Wait for it"
                " to end", source=str(path)) from None
        if not _same_file(fd, path):  # its holder removed it as it let go: take the new one
            os.close(fd)
            continue
        left = _parse(_read_fd(fd))
        if left is not None:
            say(f"cleared a stale local lock ({left.describe()}: that process is gone)")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(me)).encode("utf-8"), 0)
        return fd
    raise RefusedError("could not take the local lock", source=str(path))


def _release_local(path: Path, fd: int) -> None:
    """Remove the lock file while still holding it, then let go (in this order, a taker that
    opened the old file sees it is gone and opens the new one)."""
    with contextlib.suppress(OSError):
        if _same_file(fd, path):
            path.unlink()
    os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _read_fd(fd: int) -> str:
    return os.pread(fd, 64 * 1024, 0).decode("utf-8", errors="replace")


def local_lock_note(state_dir: Path, vmid: int) -> str | None:
    """What the local locks of VM `vmid` say now, for `rollback` finding no snapshot: held by a
    running pvefix, or left by one that ended before its first write (its snapshot comes before
    any write). None when there is no lock file."""
    notes = []
    folder = state_dir / LOCAL_DIR
    for path in sorted(folder.glob(f"*-{vmid}.lock")) if folder.is_dir() else []:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            holder = _parse(_read_fd(fd))
            who = holder.describe() if holder else "a pvefix"
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                notes.append(f"{who} holds VM {vmid} now ({path}): its snapshot is made "
                             "before its first write; wait for it to end")
                continue
            notes.append(f"{who} ended before its first write (its lock {path} is not held): "
                         "it wrote nothing, so there is nothing of it to roll back")
        finally:
            os.close(fd)
    return "; ".join(notes) or None


def _take_node(host: ReopeningNode, vmid: int, me: Holder,
               say: Callable[[str], None]) -> tuple[str, list[str]]:
    """The node lock taken: its folder, and the tombstones of stale locks this taker moved away
    (removed with the lock)."""
    folder = f"{NODE_DIR}/vm-{vmid}.lock"
    owner = f"{folder}/owner"
    host.check(["mkdir", "-p", DIR_MODE_FLAG, NODE_DIR])
    tombs: list[str] = []
    for attempt in range(3):
        if _make_node_lock(host, folder, me):
            return folder, tombs
        text = host.read_file(owner)
        holder = _parse(text)
        if text is None and attempt < 2:
            continue  # released between our try and our read: try again
        if holder is not None and holder.gone():
            tomb = take_over(host, folder, text or "")
            if tomb is not None:
                tombs.append(tomb)
                say(f"cleared a stale lock on the node ({holder.describe()}: that process is"
                    " gone)")
            continue
        who = holder.describe() if holder else "a lock without a readable owner"
        old = holder is not None and time.time() - holder.since > OLD_AFTER_S
        raise RefusedError(
            f"another pvefix is changing VM {vmid} on node {host.name}: {who}; nothing was"
            " written."
            + (" It is more than 6 hours old and may be left over:" if old else "")
            + f" if no pvefix runs there, remove it on the node with: rm -r {folder}",
            source=f"node {host.name}")
    raise RefusedError("could not take the node lock", source=f"node {host.name}")


def take_over(host: ReopeningNode, folder: str, owner_text: str) -> str | None:
    """Move the stale lock whose owner read `owner_text` to its tombstone; the tombstone, or
    None when another taker was first. Atomic: one rename moves this very lock away, and the
    tombstone's name is the owner text read, so a second taker that read the same text cannot
    move a new lock while the tombstone stands. Once it is gone (its taker released the lock),
    a very late taker may move a newer lock: it sees the owner is not the one it read, and puts
    the lock back at once."""
    tomb = tombstone(folder, owner_text)
    if not host.run_in_time(["mv", "-T", folder, tomb]).ok:
        return None
    if host.read_file(f"{tomb}/owner") != owner_text:
        host.run_in_time(["mv", "-T", tomb, folder])
        return None
    return tomb


def tombstone(folder: str, owner_text: str) -> str:
    """Where a stale node lock is moved: named after its owner's exact text. A tombstone stays
    while its taker holds the lock, so a late taker's rename onto it fails."""
    return f"{folder}.gone-{hashlib.sha256(owner_text.encode()).hexdigest()[:16]}"


def _make_node_lock(host: ReopeningNode, folder: str, me: Holder) -> bool:
    """Make the lock with its owner in one step: a private folder holding `owner`, renamed to
    `folder` (which fails while a lock is there). Never a lock without an owner."""
    new = f"{folder}.new-{me.pid}-{secrets.token_hex(4)}"
    host.check(["mkdir", DIR_MODE_FLAG, new])
    moved = False
    try:
        host.replace_file(f"{new}/owner", json.dumps(asdict(me)) + "\n")
        moved = host.run_in_time(["mv", "-T", new, folder]).ok
        return moved
    finally:
        if not moved:  # a lock is there (or the write broke): leave no litter
            with contextlib.suppress(PvefixError, OSError):
                host.run_in_time(["rm", "-rf", new])


@contextlib.contextmanager
def vm_lock(state_dir: Path, sessions: Sessions, node: str, vmid: int, action: str,
            say: Callable[[str], None]) -> Iterator[None]:
    """Hold the local and (with SSH, or --local) the node lock of VM `vmid` on `node` for
    the block."""
    me = Holder.me(action)
    local = ensure_private_dir(state_dir / LOCAL_DIR) / f"{node}-{vmid}.lock"
    fd = _take_local(local, me, say)
    folder: str | None = None
    tombs: list[str] = []
    host = sessions.at(node)
    try:
        if sessions.conn.reaches_node:
            folder, tombs = _take_node(host, vmid, me, say)
        yield
    finally:
        for path in [folder, *tombs] if folder is not None else []:
            with contextlib.suppress(PvefixError, OSError):
                host.run_in_time(["rm", "-rf", path])
        _release_local(local, fd)
