"""Proof on the VM's node that the running QEMU has the P2P cliques: /proc/PID/cmdline.

The config says what the next start will do; only the running process says what QEMU was
given. After the P2P phase's cold start pvefix reads the PID from status/current, then
`cat /proc/PID/cmdline` over SSH on the VM's node, and checks that every clique of `args` is
there as `-set device.hostpciN.x-nv-gpudirect-clique=C` naming a vfio-pci device id QEMU has, and
that `-cpu` holds no `kvm=off` (which hides the hypervisor from the driver).
"""

from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pvefix.vmconfig.args import CLIQUE_PROPERTY, clique_map

if TYPE_CHECKING:
    from pvefix.target.sessions import Sessions


@dataclass
class CmdlineProof:
    pid: int | None = None
    problems: list[str] = field(default_factory=list)
    note: str | None = None  # why it could not be read (not a failure: say how to check)

    @property
    def ok(self) -> bool:
        return not self.problems and self.note is None


def running_cliques(words: list[str]) -> dict[str, int]:
    """hostpciN -> clique as QEMU applies them (`-set` pairs, the last one wins)."""
    return clique_map(shlex.join(words))


def check_words(words: list[str], wanted: dict[str, int]) -> list[str]:
    problems: list[str] = []
    if "-cpu" in words:
        cpu = words[words.index("-cpu") + 1]
        if "kvm=off" in cpu.split(","):
            problems.append(f"-cpu {cpu} hides KVM (kvm=off): the driver ignores the clique")
    ids: set[str] = set()
    for w, v in itertools.pairwise(words):
        if w == "-device" and v.startswith("vfio-pci,"):
            ids.update(p[3:] for p in v.split(",") if p.startswith("id="))
    have = running_cliques(words)
    for device, clique in sorted(wanted.items()):
        if have.get(device) != clique:
            problems.append(f"the running QEMU has no -set device.{device}.{CLIQUE_PROPERTY}="
                            f"{clique} (has {have.get(device)})")
        elif device not in ids:
            problems.append(f"-set names {device}, but QEMU has no vfio-pci device with that id"
                            f" (ids: {', '.join(sorted(ids)) or 'none'})")
    return problems


def prove(sessions: Sessions, node: str, vmid: int, args: str | None) -> CmdlineProof:
    """Read the running QEMU's command line on the VM's node and check the cliques of `args`."""
    wanted = clique_map(args)
    status = sessions.api().get(f"/nodes/{node}/qemu/{vmid}/status/current")
    pid = status.get("pid") if isinstance(status, dict) else None
    if not isinstance(pid, int):
        return CmdlineProof(problems=[f"VM {vmid} has no QEMU process (status/current: no pid)"])
    path = f"/proc/{pid}/cmdline"
    how = f"on node {node}: tr '\\0' ' ' < {path}"
    if not sessions.conn.reaches_node:
        return CmdlineProof(pid=pid, note=f"no SSH to read {path}; check it yourself {how}")
    text = sessions.at(node).read_file(path)
    if text is None:
        return CmdlineProof(pid=pid, problems=[f"{path} is gone: QEMU of VM {vmid} exited"])
    words = text.split("\0")
    if words and words[-1] == "":
        words.pop()
    return CmdlineProof(pid=pid, problems=check_words(words, wanted))
