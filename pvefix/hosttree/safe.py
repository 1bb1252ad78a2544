"""Reading files of a host tree that may come from anyone (a bundle, a tarball): bounded.

A tree is data. Reading one of its files never follows a link out of the tree, never reads a
device, FIFO or socket (which can block or never end), and never reads more than a cap: every
file pvefix reads from a host is small. Each refusal names the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pvefix.errors import ParseError

FILE_CAP = 16 << 20  # VM configs, cmdlines, mapping files: kilobytes
SYSFS_CAP = 1 << 20


def inside(path: Path, root: Path) -> bool:
    """Does `path`, links resolved, stay inside `root`?"""
    return _within(os.path.realpath(path), root)


def _within(real: str, root: Path) -> bool:
    base = os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def read_bytes(path: Path, root: Path, cap: int = FILE_CAP, *,
               folder_checked: bool = False) -> bytes | None:
    """The file's bytes, or None when it does not exist. ParseError (naming the file) for a
    link out of the tree, anything but a regular file, or more than `cap` bytes.

    `folder_checked`: the caller has resolved the file's folder and found it inside `root`
    (`inside`, once for many files of one folder)."""
    found = read_file(path, root, cap, folder_checked=folder_checked)
    return None if found is None else found[0]


def read_file(path: Path, root: Path, cap: int = FILE_CAP, *,
              folder_checked: bool = False) -> tuple[bytes, os.stat_result] | None:
    """`read_bytes`, with the file's stat as it was opened (size, mtime)."""
    try:
        st_link = os.lstat(path)
    except OSError:
        return None  # as os.path.lexists says: nothing there (or nothing reachable)
    name = os.path.basename(path)
    if (folder_checked or Path(path).parent == root) and name not in ("", ".", "..") \
            and not stat.S_ISLNK(st_link.st_mode):
        # A file that is not a link, in a folder known to be inside (`root` itself, or one the
        # caller checked): inside by construction, and O_NOFOLLOW keeps it so at the open.
        # This skips two realpath walks per file (most of a bundle's load time, and of a
        # simulated cluster's `tar` of every VM config).
        real = str(path)
    else:
        real = os.path.realpath(path)  # resolved once: the path checked is the path opened
        if not _within(real, root):
            raise ParseError("is a link that leads out of the host tree; not read",
                             source=str(path))
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ParseError("is a directory, not a file", source=str(path)) from None
    except OSError as exc:
        raise ParseError(f"cannot read: {exc.strerror}", source=str(path)) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ParseError("is a directory, not a file", source=str(path))
        if not stat.S_ISREG(st.st_mode):
            raise ParseError("is not a regular file (a device, FIFO or socket); not read",
                             source=str(path))
        if st.st_size > cap:
            raise ParseError(f"is larger than {cap} bytes; not read", source=str(path))
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                raise ParseError(f"is larger than {cap} bytes; not read", source=str(path))
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def read_local(path: Path, cap: int = FILE_CAP) -> bytes | None:
    """A file the user named (a plan, desired, settings or secret file, an `inspect` input):
    its bytes, or None when it does not exist. Links are the user's own: followed. Refused
    before reading, naming the file (ParseError): a FIFO (it would hang), a device (/dev/zero
    never ends), a socket, a directory, or more than `cap` bytes."""
    if "\x00" in str(path):  # no system call takes it (ValueError): not a name of a file
        raise ParseError("not a file name (holds a NUL byte)",
                         source=str(path).replace("\x00", "\\0"))
    try:
        return read_bytes(path, Path("/"), cap)
    except NotADirectoryError:
        return None


def read_text(path: Path, root: Path, cap: int = FILE_CAP, errors: str = "surrogateescape"
              ) -> str | None:
    data = read_bytes(path, root, cap)
    return None if data is None else data.decode("utf-8", errors=errors)
