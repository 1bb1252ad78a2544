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
from pvefix.paths import NODES_DIR
from pvefix.target.ssh import CommandResult

CONF_GLOB = f"{NODES_DIR}/*/qemu-server/*.conf"  # every vm_config() of the cluster
BULK_COMMAND: tuple[str, ...] = ("sh", "-c", f"tar -c -f - {CONF_GLOB}")
_MEMBER = re.compile(r"^/?etc/pve/nodes/([^/]+)/qemu-server/([1-9][0-9]*)\.conf$")
_NOISE = ("tar: Removing leading `/' from member names",
          "tar: Exiting with failure status due to previous errors")
# A config bigger than this is not a VM config (pmxcfs caps a file at 1 MiB).
MAX_CONFIG = 1024 * 1024


@dataclass(frozen=True)
class RawConfig:
    node: str
    text: str  # decoded with surrogateescape: raw_bytes(text) is the file


def parse_bulk(result: CommandResult) -> dict[int, RawConfig]:
    """The configs in BULK_COMMAND's tar stream: vmid -> node and raw text.

    An unmatched glob (a cluster without VMs) is no VM; any other failure raises, so the caller
    falls back to per-VM API reads.
    """
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
    """Every regular file of a tar stream (name, bytes), through the standard library."""
    found: list[tuple[str, bytes]] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                if not member.isfile() or member.size > MAX_CONFIG:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    found.append((member.name, handle.read()))
    except (tarfile.TarError, EOFError) as exc:
        raise PvefixError(f"bulk config read: not a tar stream ({exc})") from None
    return found


_BLOCK = 512
_ZERO_BLOCK = bytes(_BLOCK)


def _fast_members(data: bytes) -> list[tuple[str, bytes]] | None:
    """What `_tarfile_members` gives, for the headers GNU tar writes for small files (v7,
    ustar and gnu formats, GNU long names): ~10x faster than tarfile on a cluster's configs.
    None for anything else (pax records, base-256 sizes, a bad checksum, a cut stream), which
    the standard library's reader then judges."""
    found: list[tuple[str, bytes]] = []
    long_name: bytes | None = None
    offset, end = 0, len(data)
    while offset + _BLOCK <= end:
        header = data[offset:offset + _BLOCK]
        if header == _ZERO_BLOCK:  # the end of the archive
            return found if long_name is None else None
        try:
            stored = int(header[148:156].replace(b"\0", b" ").strip() or b"x", 8)
            size_field = header[124:136]
            if size_field[0] & 0x80:
                return None  # base-256: not a small file
            size = int(size_field.replace(b"\0", b" ").strip() or b"0", 8)
        except ValueError:
            return None
        if stored != sum(header[:148]) + 8 * 32 + sum(header[156:]):
            return None
        kind = header[156:157]
        start = offset + _BLOCK
        offset = start + -(-size // _BLOCK) * _BLOCK
        if offset > end:
            return None
        content = data[start:start + size]
        if kind == b"L":  # GNU: the next member's long name
            if long_name is not None:
                return None  # two in a row: tarfile's reading of that is its own
            long_name = content.split(b"\0", 1)[0]
            continue
        if kind == b"K":  # GNU: the next member's long link target (only links have one)
            continue
        if kind not in (b"0", b"\0", b"1", b"2", b"3", b"4", b"5", b"6", b"7"):
            return None  # pax records (x, g), sparse files and other extensions
        name = header[:100].split(b"\0", 1)[0]
        prefix = header[345:500].split(b"\0", 1)[0]
        if prefix:  # ustar's split long name (read whatever the magic says, as tarfile does)
            name = prefix + b"/" + name
        if long_name is not None:
            name, long_name = long_name, None
        if kind in (b"0", b"\0", b"7") and not (kind == b"\0" and name.endswith(b"/")):
            found.append((name.decode("utf-8", "surrogateescape"), content))
    return None  # no end-of-archive block: let the full reader say what is wrong
