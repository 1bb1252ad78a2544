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
    out: dict[int, RawConfig] = {}
    data = raw_bytes(result.stdout)
    if not data:
        if unmatched:
            return out
        raise PvefixError("bulk config read printed nothing")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                match = _MEMBER.match(member.name)
                if match is None or not member.isfile() or member.size > MAX_CONFIG:
                    continue
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                vmid = int(match.group(2))
                if vmid in out:
                    raise PvefixError(f"VM {vmid} is configured on two nodes "
                                      f"({out[vmid].node}, {match.group(1)})")
                text = handle.read().decode("utf-8", "surrogateescape")
                out[vmid] = RawConfig(match.group(1), text)
    except (tarfile.TarError, EOFError) as exc:
        raise PvefixError(f"bulk config read: not a tar stream ({exc})") from None
    return out
