"""Every VM config of the cluster in one SSH command, from pmxcfs.

pmxcfs shows every node's VM configs under /etc/pve/nodes/<node>/qemu-server/<vmid>.conf on
every node of the cluster (DOMAIN.md; Proxmox's PVE::Cluster lists them so for
/cluster/resources), so one `tar` of that glob on any node reads the whole cluster's raw configs:
exact bytes, so the digest is Proxmox's (SHA-1 of the raw file, as PVE::QemuConfig's parser
sets it) and the [PENDING] and snapshot sections come along. The glob is a fixed script run by
`sh -c` (the argument list is still quoted as a whole); nothing of the user's reaches it.
"""

from __future__ import annotations

import io
import re
import tarfile
from dataclasses import dataclass

from pvefix.digest import raw_bytes
from pvefix.errors import PvefixError
from pvefix.facts.node import CLUSTER_CONFIGS
from pvefix.paths import NODES_DIR
from pvefix.target.ssh import CommandResult

# The command (every vm_config() of the cluster), declared with the node facts.
BULK_COMMAND = CLUSTER_CONFIGS
CONF_GLOB = f"{NODES_DIR}/*/qemu-server/*.conf"
_MEMBER = re.compile(r"^/?etc/pve/nodes/([^/]+)/qemu-server/([1-9][0-9]*)\.conf$")
_NOISE = ("tar: Removing leading `/' from member names",
          "tar: Exiting with failure status due to previous errors")
# A config bigger than this is not a VM config (pmxcfs caps a file at 1 MiB).
MAX_CONFIG = 1024 * 1024
# The whole stream and its members: pmxcfs holds at most 128 MiB in all, and a cluster's VMIDs
# fit far below this many files; a node sending more is not pmxcfs (the read then fails).
MAX_STREAM = 256 * 1024 * 1024
MAX_MEMBERS = 200_000


@dataclass(frozen=True)
class RawConfig:
    node: str
    text: str  # decoded with surrogateescape: raw_bytes(text) is the file


def parse_bulk(result: CommandResult) -> dict[int, RawConfig]:
    """The configs in BULK_COMMAND's tar stream: vmid -> node and raw text.

    An unmatched glob (a cluster without VMs) is no VM; any other failure raises, so the caller
    falls back to per-VM API reads.
    """
    if result.exit_code is None:  # it did not finish (the SSH read says why)
        raise PvefixError(f"bulk config read: {result.stderr.strip()[:300] or 'timed out'}")
    problems = [line for line in result.stderr.splitlines()
                if line.strip() and line not in _NOISE]
    unmatched = [p for p in problems if CONF_GLOB in p and "Cannot stat" in p]
    if result.exit_code != 0 and len(unmatched) != len(problems):
        raise PvefixError(f"bulk config read exited {result.exit_code}: "
                          f"{'; '.join(problems)[:300] or 'no message'}")
    data = raw_bytes(result.stdout)
    if not data:
        if unmatched:
            return {}
        raise PvefixError("bulk config read printed nothing")
    if len(data) > MAX_STREAM:
        raise PvefixError(f"bulk config read: more than {MAX_STREAM >> 20} MiB")
    members = _fast_members(data)
    if members is None:  # something GNU tar's plain output does not hold: the full reader
        members = _tarfile_members(data)
    out: dict[int, RawConfig] = {}
    for name, content in members:
        match = _MEMBER.match(name)
        if match is None or len(content) > MAX_CONFIG:
            continue
        vmid = int(match.group(2))
        if vmid in out:
            raise PvefixError(f"VM {vmid} is configured on two nodes "
                              f"({out[vmid].node}, {match.group(1)})")
        out[vmid] = RawConfig(match.group(1), content.decode("utf-8", "surrogateescape"))
    return out


def _tarfile_members(data: bytes) -> list[tuple[str, bytes]]:
    """Every regular file of a tar stream (name, bytes), through the standard library.

    tarfile trusts a member's size: a negative one walks backwards over the stream for ever, a
    huge one seeks past what Python can address. Each member is judged as tarfile yields it,
    before tarfile moves on, and their number is bounded."""
    found: list[tuple[str, bytes]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for count, member in enumerate(archive, 1):
                if member.size < 0 or member.size > len(data) or count > MAX_MEMBERS:
                    what = (f"more than {MAX_MEMBERS} members" if count > MAX_MEMBERS
                            else f"a member of size {member.size}")
                    raise PvefixError(f"bulk config read: not a tar stream pvefix reads "
                                      f"({what})")
                if not member.isfile() or member.size > MAX_CONFIG:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    found.append((member.name, handle.read()))
    except (tarfile.TarError, EOFError, ValueError, OverflowError) as exc:
        raise PvefixError(f"bulk config read: not a tar stream ({exc})") from None
    return found


_BLOCK = 512
_ZERO_BLOCK = bytes(_BLOCK)
# tarfile's number field (nti): up to the first NUL, ASCII, str.strip()'s whitespace around
# octal digits. pvefix reads only plain digits; anything tarfile reads otherwise (a sign, `0o`,
# `_`, base-256) is left to it.
_NUMBER = re.compile(rb"[\t-\r\x1c-\x20]*([0-7]*)[\t-\r\x1c-\x20]*(?:\0[\x00-\xff]*)?")
_NUMBER_FIELDS = ((100, 108), (108, 116), (116, 124), (124, 136), (136, 148), (148, 156),
                  (329, 337), (337, 345))  # mode uid gid size mtime chksum devmajor devminor
_SKIPS_DATA = (b"0", b"7")  # tarfile skips the data of regular files only (and unknown types)
_NO_DATA = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, folders, FIFOs: data not skipped


# The number fields as GNU tar and tarfile write them (octal digits, then NUL; the checksum's
# NUL and space), told by their shape at C speed (each octal digit read as 0): read at once.
# Any other form goes through _NUMBER field by field.
_AS_ZERO = bytes.maketrans(b"1234567", b"0000000")
_PLAIN = b"0000000\0" * 3 + b"00000000000\0" * 2 + b"000000\0 "  # mode uid gid size mtime chksum
_PLAIN_DEVICE = {a + b for a in (b"0000000\0", bytes(8)) for b in (b"0000000\0", bytes(8))}


def _size_and_checksum(header: bytes) -> tuple[int, int] | None:
    """The header's size and stored checksum as tarfile reads them (every number field must
    read the same in both readers), or None where pvefix would guess."""
    if (header[100:156].translate(_AS_ZERO) == _PLAIN
            and header[329:345].translate(_AS_ZERO) in _PLAIN_DEVICE):
        return int(header[124:135], 8), int(header[148:154], 8)
    numbers = _numbers(header)
    return None if numbers is None else (numbers[3], numbers[5])


def _numbers(header: bytes) -> list[int] | None:
    """The header's number fields as tarfile reads them, or None where pvefix would guess."""
    values = []
    for first, last in _NUMBER_FIELDS:
        match = _NUMBER.fullmatch(header, first, last)
        if match is None:
            return None
        values.append(int(match.group(1) or b"0", 8))
    return values


def _fast_members(data: bytes) -> list[tuple[str, bytes]] | None:
    """What `_tarfile_members` gives, for the headers GNU tar writes for small files (v7,
    ustar and gnu formats, GNU long names): ~10x faster than tarfile on a cluster's configs.
    None for anything else (pax records, base-256 or signed numbers, a bad checksum, data after
    a link or folder, a cut stream), which the standard library's reader then judges: where
    the two could differ, this one does not answer (tests/check/test_bulk_tar.py)."""
    found: list[tuple[str, bytes]] = []
    long_name: bytes | None = None
    long_link = False  # a GNU long link target read, its member not yet
    offset, end = 0, len(data)
    while offset + _BLOCK <= end:
        header = data[offset:offset + _BLOCK]
        if header == _ZERO_BLOCK:  # the end of the archive
            return found if long_name is None and not long_link else None
        fields = _size_and_checksum(header)
        if fields is None or len(found) >= MAX_MEMBERS:
            return None
        size, stored = fields
        if stored != sum(header[:148]) + 8 * 32 + sum(header[156:]):
            return None
        kind, short = header[156:157], header[:100].split(b"\0", 1)[0]
        regular = kind in _SKIPS_DATA or (kind == b"\0" and not short.endswith(b"/"))
        if not regular and kind not in (b"L", b"K") and (kind not in (*_NO_DATA, b"\0") or size):
            return None  # pax records, sparse files, other types; data tarfile would not skip
        start = offset + _BLOCK
        offset = start + -(-size // _BLOCK) * _BLOCK
        if offset > end:
            return None
        if kind in (b"L", b"K"):  # GNU: the next member's long name, or long link target
            if (kind == b"L" and long_name is not None) or (kind == b"K" and long_link):
                return None  # two in a row: tarfile's reading of that is its own
            if kind == b"L":
                long_name = data[start:start + size].split(b"\0", 1)[0]
            long_link = long_link or kind == b"K"
            continue
        long_link = False
        prefix = header[345:500].split(b"\0", 1)[0]
        name = prefix + b"/" + short if prefix else short  # ustar's split name, as tarfile
        if long_name is not None:
            name, long_name = long_name, None
        if regular and size <= MAX_CONFIG:
            found.append((name.decode("utf-8", "surrogateescape"), data[start:start + size]))
    return None  # no end-of-archive block: let the full reader say what is wrong
