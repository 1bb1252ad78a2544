"""`sh -c SCRIPT` and `tar -c -f - PATH...` over the simulated node's SSH, for bulk reads.

`pvefix check --all` reads every VM config of the cluster at once from pmxcfs's view
(`/etc/pve/nodes/*/qemu-server/*.conf`) as one tar stream: exact bytes, so digests match the
API's. The glob is expanded here, inside tar's operands, as bash would before tar runs (the
simulator's tokenizer does not keep quotes, so no other command expands globs). A single-node
tree with only etc/pve/qemu-server shows it as nodes/<node>/qemu-server, as pmxcfs's link does.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat
import tarfile
import time
from collections.abc import Hashable
from pathlib import Path

from pvefix.errors import PvefixError
from pvefix.hosttree import safe
from pvefix.sim.commands import HIDDEN, Command, Result, Shell, ShellError

_GLOB = frozenset("*?[")
NUL = b"\0"


def _sh(sh: Shell, argv: list[str]) -> Result:
    if len(argv) != 3 or argv[1] != "-c":
        return Result(stderr="sh: the pvefix simulator runs only `sh -c SCRIPT`\n", code=2)
    return Shell(sh.state, sh.cwd).run(argv[2])


def _entries(sh: Shell, folder: str) -> list[str]:
    """Names in a host folder (pmxcfs's nodes/<local>/qemu-server link included)."""
    names: set[str] = set()
    node = sh.state.node
    try:
        target = sh.tree_path(folder)
    except ShellError:
        return []
    if target.is_dir():
        names.update(e.name for e in target.iterdir() if e.name not in HIDDEN)
    local_confs = sh.tree_path("/etc/pve/qemu-server")
    if local_confs.is_dir():
        if folder == "/etc/pve/nodes":
            names.add(node)
        elif folder == f"/etc/pve/nodes/{node}":
            names.add("qemu-server")
        elif folder == f"/etc/pve/nodes/{node}/qemu-server" and not target.is_dir():
            names.update(e.name for e in local_confs.iterdir())
    return sorted(names)


def expand(sh: Shell, pattern: str) -> list[str]:
    """Host paths matching `pattern` (absolute; `*`, `?`, `[...]` per component), sorted."""
    parts = [p for p in sh.host(pattern).split("/") if p]
    found = ["/"]
    for part in parts:
        step: list[str] = []
        for base in found:
            if not set(part) & _GLOB:
                step.append(posixpath.join(base, part))
                continue
            step.extend(posixpath.join(base, name) for name in _entries(sh, base)
                        if fnmatch.fnmatchcase(name, part) and not name.startswith("."))
        found = step
    return sorted(found)


def _file(sh: Shell, path: str, folders: dict[Path, bool]) -> tuple[bytes, int]:
    """A file's bytes and mtime, each folder resolved once (a cluster's tar holds thousands of
    files in a few folders: the simulator should not be the slow part of what it simulates)."""
    target = sh.tree_path(path, folders)
    try:
        found = safe.read_file(target, sh.state.tree.root,
                               folder_checked=folders.get(target.parent, False))
    except PvefixError:  # a directory, a link out of the tree, not a regular file
        raise ShellError(f"tar: {path}: Cannot stat") from None
    if found is None:
        raise ShellError(f"tar: {path}: No such file or directory")
    return found[0], int(found[1].st_mtime)


def _info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o640
    info.uname, info.gname, info.gid = "root", "www-data", 33
    return info


# One header as TarInfo.tobuf writes it (GNU format); the others differ only in name, size,
# mtime and checksum, so they are patched in (tobuf costs ~30 us a file in Python).
_TEMPLATE = _info("x", 0, 0).tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
_LIMIT = 8 ** 11  # what 11 octal digits hold (larger values: tobuf's own encodings)


def _header(name: str, size: int, mtime: int) -> bytes:
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) >= 100 or not 0 <= mtime < _LIMIT or size >= _LIMIT:
        return _info(name, size, mtime).tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    header = bytearray(_TEMPLATE)
    header[0:100] = encoded.ljust(100, NUL)
    header[124:136] = b"%011o\0" % size
    header[136:148] = b"%011o\0" % mtime
    header[148:156] = b"        "  # the checksum counts its own field as spaces
    header[148:155] = b"%06o\0" % sum(header)
    return bytes(header)


def _tar(sh: Shell, argv: list[str]) -> Result:
    """`tar -c -f - PATH...` (also `-cf -`): regular files into a tar stream on stdout."""
    args = argv[1:]
    if args[:3] == ["-c", "-f", "-"]:
        operands = args[3:]
    elif args[:2] == ["-cf", "-"]:
        operands = args[2:]
    else:
        return Result(stderr="tar: the pvefix simulator runs only `tar -c -f - PATH...`\n",
                      code=2)
    key = (sh.cwd, tuple(operands))
    stamps = _stamps(sh, operands)
    kept = sh.state.archives.get(key)
    if stamps is not None and kept is not None and kept[0] == stamps:
        return Result(kept[1].stdout, kept[1].stderr, kept[1].code)
    result = _archive(sh, operands)
    if stamps is None:
        sh.state.archives.pop(key, None)
    else:
        sh.state.archives[key] = (stamps, Result(result.stdout, result.stderr, result.code))
    return result


# A file changed less than this before it is stamped is not trusted to its stamps: file
# times come from a coarse clock, so two writes in one tick (same size, same inode) can
# leave every stamp as it was.
SETTLED_NS = 1_000_000_000


def _stamps(sh: Shell, operands: list[str]) -> Hashable | None:
    """What the stream of `operands` is made of: each path the operands name, with its
    file's inode, size, modification and change times. None when one is anything but a
    settled regular file at its own place in the tree (missing, a link, a pmxcfs alias, a
    hidden path): that stream is built afresh every time.

    Equal stamps, equal stream: a write changes a file's change time, and an added, removed
    or renamed file changes the paths or the inodes (`NodeState.archives` keeps the last stream)."""
    root = str(sh.state.tree.root).rstrip("/")
    settled = time.time_ns() - SETTLED_NS
    stamps: list[tuple[str, int, int, int, int]] = []
    for operand in operands:
        paths = expand(sh, operand) if set(operand) & _GLOB else [sh.host(operand)]
        if not paths:  # an unmatched glob: tar's error
            return None
        for path in paths:
            if path.split("/")[1] in HIDDEN:
                return None
            try:
                st = os.lstat(root + path)
            except OSError:
                return None
            if not stat.S_ISREG(st.st_mode) or st.st_ctime_ns > settled:
                return None
            stamps.append((path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(stamps)


def _archive(sh: Shell, operands: list[str]) -> Result:
    """The tar stream of `operands` (errors as GNU tar words them), built from the files."""
    chunks: list[bytes] = []
    errors: list[str] = []
    folders: dict[Path, bool] = {}
    stripped = False
    for operand in operands:
        paths = expand(sh, operand) if set(operand) & _GLOB else [sh.host(operand)]
        if not paths:
            paths = [operand]  # bash leaves an unmatched glob as it is
        for path in paths:
            try:
                data, mtime = _file(sh, path, folders)
            except ShellError:
                errors.append(f"tar: {path}: Cannot stat: No such file or directory")
                continue
            stripped = stripped or path.startswith("/")
            # What TarFile.addfile writes (the header, the data padded to a block), without
            # its copies: a cluster's tar holds thousands of files.
            chunks.append(_header(path.lstrip("/"), len(data), mtime))
            chunks.append(data + NUL * (-len(data) % tarfile.BLOCKSIZE))
    # The end: two zero blocks, then zeros to a whole record (as TarFile.close does).
    size = sum(len(c) for c in chunks) + 2 * tarfile.BLOCKSIZE
    chunks.append(NUL * (2 * tarfile.BLOCKSIZE + (-size % tarfile.RECORDSIZE)))
    stream = b"".join(chunks)
    err = "tar: Removing leading `/' from member names\n" if stripped else ""
    if errors:
        err += "\n".join(errors) + "\ntar: Exiting with failure status due to previous errors\n"
    return Result(stream.decode("utf-8", "surrogateescape"), err, 2 if errors else 0)


ARCHIVE_COMMANDS: dict[str, Command] = {"sh": _sh, "tar": _tar}
