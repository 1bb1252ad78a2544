"""Per-node host files in a cluster's host tree: `nodes/NAME/` overlays.

The tree root holds the local node's files (`node` in the metadata) and the cluster's shared
`/etc/pve`. Every other node of `cluster_nodes` has its own host files under `nodes/NAME/`
(`nodes/node3/etc/kernel/cmdline`, `nodes/node3/proc/cmdline`, `nodes/node3/sys/devices/...`)
and its own facts under `nodes.NAME` in pvefix-host.json. A node whose folder does not exist
yet gets a copy of the local node's host files (not /etc/pve, not sysfs) the first time one of
its files is touched (the simulator's stand-in for "the same install"). A node's sysfs is its
own `sys/` only: without one its devices are unknown here, never the local node's devices of
the same address.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from pvefix.hosttree.meta import META_FILE
from pvefix.hosttree.sysfs import PciDevice, scan_pci_devices
from pvefix.hosttree.tree import HostTree

NODES_DIR = "nodes"
_NOT_COPIED = {"sys", NODES_DIR, META_FILE}


def overlay_dir(root: Path, node: str) -> Path:
    return root / NODES_DIR / node


class NodeTree(HostTree):
    """One node's view of a cluster tree: its own host files and facts, the cluster's
    /etc/pve and VM run states (shared with `base`)."""

    def __init__(self, base: HostTree, node: str) -> None:
        super().__init__(base.root, base.meta.for_node(node))
        self.base = base
        self.overlay = overlay_dir(base.root, node)

    # VMs and metadata are the cluster's.
    def vms(self) -> dict[int, str]:
        return self.base.vms()

    def vm_config_path(self, vmid: int) -> Path:
        return self.base.vm_config_path(vmid)

    def save_meta(self) -> None:
        self.base.save_meta()

    def _materialize(self) -> None:
        """Copy the local node's host files into a missing overlay (once)."""
        if self.overlay.is_dir():
            return
        work = self.overlay.with_name(f".{self.overlay.name}.tmp")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        etc = self.root / "etc"

        def skip_pve(folder: str, names: list[str]) -> list[str]:
            return ["pve"] if Path(folder) == etc else []

        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if entry.name.startswith(".") or entry.name in _NOT_COPIED:
                continue
            source = Path(entry.path)
            if entry.name == "etc":
                shutil.copytree(source, work / "etc", symlinks=True, ignore=skip_pve)
            elif entry.is_dir(follow_symlinks=False):
                shutil.copytree(source, work / entry.name, symlinks=True)
            elif entry.is_file(follow_symlinks=False):
                shutil.copy2(source, work / entry.name)
        try:
            work.rename(self.overlay)
        except OSError:
            shutil.rmtree(work, ignore_errors=True)  # another thread made it first

    def host_path(self, host_path: str) -> Path:
        pure = PurePosixPath(host_path)
        parts = pure.parts[1:] if pure.is_absolute() else ()
        if not parts or parts[:2] == ("etc", "pve") or ".." in parts:
            return super().host_path(host_path)  # the cluster's files (and the checks)
        if parts[0] == "sys" and not (self.overlay / "sys").is_dir():
            return self.overlay.joinpath(*parts)  # no sysfs of its own: absent, not borrowed
        self._materialize()
        return self.overlay.joinpath(*parts)

    def owns(self, real: Path) -> bool:
        overlay = self.overlay.resolve()
        return real == overlay or overlay in real.parents

    def pci_devices(self) -> list[PciDevice]:
        if not (self.overlay / "sys").is_dir():
            return []  # unknown here
        return scan_pci_devices(self.overlay)


def node_tree(base: HostTree, node: str) -> HostTree:
    """The tree as `node` sees it (the base itself for the local node)."""
    return base if node == base.meta.node else NodeTree(base, node)
