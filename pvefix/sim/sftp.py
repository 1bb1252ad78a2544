"""SFTP rooted at the host tree: read, write, stat, list, mkdir, remove, rename (atomic).

Paths are host paths; the simulator's own directory and the metadata file are refused, and so
is anything that resolves outside the tree. `rename` fails when the target exists (SFTP v3, as
OpenSSH does); `posix_rename` replaces it atomically.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pvefix.sim.commands import HIDDEN
from pvefix.sim.state import NodeState
from pvefix.target.sshlib import paramiko

SFTP_OK = paramiko.sftp.SFTP_OK
SFTP_FAILURE = paramiko.sftp.SFTP_FAILURE
SFTP_NO_SUCH_FILE = paramiko.sftp.SFTP_NO_SUCH_FILE
SFTP_PERMISSION_DENIED = paramiko.sftp.SFTP_PERMISSION_DENIED


class _Refused(Exception):
    pass


def _errno(exc: OSError) -> int:
    return int(paramiko.SFTPServer.convert_errno(exc.errno or 0))


class _Handle(paramiko.SFTPHandle):
    """A file handle that can cut the connection after K bytes (injected fault)."""

    def __init__(self, flags: int, limit: int | None, cut: Callable[[], None]) -> None:
        super().__init__(flags)
        self._limit = limit
        self._cut = cut
        self._moved = 0

    def _count(self, n: int) -> bool:
        if self._limit is None:
            return True
        self._moved += n
        if self._moved > self._limit:
            self._cut()
            return False
        return True

    def read(self, offset: int, length: int) -> bytes | int:
        if not self._count(length):
            return SFTP_FAILURE
        data: bytes | int = super().read(offset, length)
        return data

    def write(self, offset: int, data: Any) -> int:
        if not self._count(len(data)):
            return SFTP_FAILURE
        return int(super().write(offset, data))


class SimSFTPServer(paramiko.SFTPServerInterface):
    """paramiko calls this with the SSH server interface first, then our extra arguments."""

    def __init__(self, server: Any, state: NodeState, *args: Any, **kwargs: Any) -> None:
        super().__init__(server, *args, **kwargs)
        self.state = state
        self.server = server

    # -- paths ------------------------------------------------------------------------------

    def _host(self, path: str) -> str:
        return posixpath.normpath(posixpath.join("/root", path))

    def _real(self, path: str) -> Path:
        host = self._host(path)
        parts = [p for p in host.split("/") if p]
        if parts and parts[0] in HIDDEN:
            raise _Refused(path)
        root = self.state.tree.root.resolve()
        real = self.state.tree.host_path(host) if parts else root
        resolved = real.resolve() if real.exists() else real.parent.resolve() / real.name
        if resolved != root and root not in resolved.parents:
            raise _Refused(path)
        rel = resolved.relative_to(root).parts if resolved != root else ()
        if rel and rel[0] in HIDDEN and not self.state.tree.owns(resolved):
            raise _Refused(path)
        return real

    def _attrs(self, real: Path, name: str | None = None) -> paramiko.SFTPAttributes:
        attrs = paramiko.SFTPAttributes.from_stat(os.stat(real), name)
        return attrs

    # -- operations -------------------------------------------------------------------------

    def canonicalize(self, path: str) -> str:
        return self._host(path)

    def list_folder(self, path: str) -> list[paramiko.SFTPAttributes] | int:
        try:
            real = self._real(path)
            out = []
            for entry in sorted(os.listdir(real)):
                if real == self.state.tree.root and entry in HIDDEN:
                    continue
                out.append(self._attrs(real / entry, entry))
            return out
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)

    def stat(self, path: str) -> paramiko.SFTPAttributes | int:
        try:
            return self._attrs(self._real(path))
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)

    lstat = stat

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> Any:
        try:
            real = self._real(path)
        except _Refused:
            return SFTP_PERMISSION_DENIED
        binary = getattr(os, "O_BINARY", 0)
        mode = getattr(attr, "st_mode", None) or 0o644
        try:
            fd = os.open(real, flags | binary, mode & 0o7777)
        except OSError as exc:
            return _errno(exc)
        if flags & os.O_WRONLY:
            fstr = "ab" if flags & os.O_APPEND else "wb"
        elif flags & os.O_RDWR:
            fstr = "a+b" if flags & os.O_APPEND else "r+b"
        else:
            fstr = "rb"
        try:
            fobj = os.fdopen(fd, fstr)
        except OSError as exc:
            os.close(fd)
            return _errno(exc)
        handle = _Handle(flags, self.state.faults.take_ssh_disconnect(), self._cut)
        handle.filename = str(real)  # type: ignore[attr-defined]
        handle.readfile = fobj  # type: ignore[attr-defined]
        handle.writefile = fobj  # type: ignore[attr-defined]
        return handle

    def _cut(self) -> None:
        transport = getattr(self.server, "transport", None)
        if transport is not None:
            transport.close()

    def remove(self, path: str) -> int:
        try:
            self._real(path).unlink()
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)
        return SFTP_OK

    def rename(self, oldpath: str, newpath: str) -> int:
        try:
            src, dst = self._real(oldpath), self._real(newpath)
            if dst.exists():
                return SFTP_FAILURE
            with self.state.lock:
                os.rename(src, dst)
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)
        return SFTP_OK

    def posix_rename(self, oldpath: str, newpath: str) -> int:
        try:
            src, dst = self._real(oldpath), self._real(newpath)
            with self.state.lock:
                os.replace(src, dst)
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)
        return SFTP_OK

    def mkdir(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        try:
            real = self._real(path)
            real.mkdir()
            mode = getattr(attr, "st_mode", None)
            if mode:
                os.chmod(real, mode & 0o7777)
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)
        return SFTP_OK

    def rmdir(self, path: str) -> int:
        try:
            self._real(path).rmdir()
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)
        return SFTP_OK

    def chattr(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        try:
            real = self._real(path)
            if getattr(attr, "st_mode", None) is not None:
                os.chmod(real, attr.st_mode & 0o7777)  # type: ignore[operator]
            mtime = getattr(attr, "st_mtime", None)
            if mtime is not None:
                os.utime(real, (getattr(attr, "st_atime", None) or mtime, mtime))
        except _Refused:
            return SFTP_PERMISSION_DENIED
        except OSError as exc:
            return _errno(exc)
        return SFTP_OK

    def readlink(self, path: str) -> str | int:
        return SFTP_NO_SUCH_FILE

    def symlink(self, target_path: str, path: str) -> int:
        return SFTP_PERMISSION_DENIED

    def session_ended(self) -> None:
        with contextlib.suppress(Exception):
            super().session_ended()
