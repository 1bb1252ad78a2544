"""A host tree: a directory mirroring a Proxmox host's files, plus `pvefix-host.json`.

Loading is cheap on purpose: it validates the metadata, lists (but does not parse) the VM
configs, and reads the sysfs and mapping facts, which are small. VM configs are read on demand.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from pvefix.errors import ParseError, PvefixError
from pvefix.hosttree import safe
from pvefix.hosttree.mapping import PciMappingFile
from pvefix.hosttree.meta import META_FILE, HostMeta, VmState, load_meta
from pvefix.hosttree.sysfs import PciDevice, scan_pci_devices
from pvefix.paths import GRUB_D, MAPPING_FILE

_CONF_RE = re.compile(r"^([1-9][0-9]{2,8})\.conf$")


def atomic_write(path: Path, data: bytes, mode: int = 0o644, *, keep_mode: bool = True) -> None:
    """Write `data` to `path` through a temporary file and a rename (readers never see half).

    The temporary file is created 0600 (mkstemp), so nothing is ever readable by others before
    its final mode is set; `keep_mode` keeps the mode of a file being replaced.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if keep_mode and path.exists():
        mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class HostTree:
    """One host tree on disk. `meta` may be changed in place, then saved with save_meta()."""

    def __init__(self, root: Path, meta: HostMeta) -> None:
        self.root = root
        self.meta = meta
        # vmid -> (node, path) from the last directory scan; a lookup trusts it while the file
        # is still there, so listing then opening 1,000 VMs is not 1,000 scans.
        self._vm_index: dict[int, tuple[str, Path]] = {}
        self._scan_at_load: list[PciDevice] | None = None  # validate()'s sysfs scan

    # -- metadata ---------------------------------------------------------------------------

    def save_meta(self) -> None:
        """Write `meta` back to pvefix-host.json atomically (re-validated first)."""
        checked = HostMeta.model_validate(self.meta.model_dump(by_alias=True))
        atomic_write(self.root / META_FILE, checked.to_json().encode("utf-8"))

    def vm_state(self, vmid: int) -> VmState:
        """Run state of a VM (stopped when absent from the metadata)."""
        return self.meta.vm_state(vmid)

    # -- VMs --------------------------------------------------------------------------------

    def _conf_dirs(self) -> list[tuple[str, Path]]:
        pve = self.root / "etc" / "pve"
        dirs: list[tuple[str, Path]] = []
        nodes_dir = pve / "nodes"
        if nodes_dir.is_dir():
            for entry in sorted(os.scandir(nodes_dir), key=lambda e: e.name):
                if entry.is_dir() and (Path(entry.path) / "qemu-server").is_dir():
                    dirs.append((entry.name, Path(entry.path) / "qemu-server"))
        local = pve / "qemu-server"
        if local.is_dir():
            # On a real host etc/pve/qemu-server links to nodes/<node>/qemu-server: list once.
            resolved = local.resolve()
            if all(path.resolve() != resolved for _, path in dirs):
                dirs.append((self.meta.node, local))
        return dirs

    def _scan_vms(self) -> dict[int, tuple[str, Path]]:
        found: dict[int, tuple[str, Path]] = {}
        for node, directory in self._conf_dirs():
            for entry in os.scandir(directory):
                match = _CONF_RE.match(entry.name)
                if match is None or not entry.is_file():
                    continue
                vmid = int(match.group(1))
                path = Path(entry.path)
                if vmid in found:
                    other = found[vmid][1].relative_to(self.root)
                    raise ParseError(
                        f"VM {vmid} is configured twice (also in {other}); "
                        "a VM lives in exactly one place",
                        source=str(path))
                found[vmid] = (node, path)
        self._vm_index = found
        return found

    def vms(self) -> dict[int, str]:
        """Every VM of the tree: vmid -> node (files are listed, not parsed)."""
        return {vmid: node for vmid, (node, _) in sorted(self._scan_vms().items())}

    def vm_config_path(self, vmid: int) -> Path:
        """Where the config of `vmid` lives; PvefixError if the tree has no such VM."""
        found = self._vm_index.get(vmid)
        if found is None or not found[1].is_file():
            found = self._scan_vms().get(vmid)
        if found is None:
            raise PvefixError(f"no VM {vmid} in this host tree", source=str(self.root))
        return found[1]

    def read_vm_config(self, vmid: int) -> str:
        """The raw text of a VM config."""
        text = safe.read_text(self.vm_config_path(vmid), self.root)
        if text is None:
            raise PvefixError(f"no VM {vmid} in this host tree", source=str(self.root))
        return text

    # -- host files -------------------------------------------------------------------------

    def host_path(self, host_path: str) -> Path:
        """The tree path for an absolute host path ("/etc/kernel/cmdline").

        `/etc/pve/qemu-server/` and `/etc/pve/local/` resolve to the local node's directory
        when the file lives there, as pmxcfs's links do on a real host.
        """
        # The components as PurePosixPath splits them (empty and "." ones dropped), in strings:
        # a simulated cluster maps thousands of paths per `tar`.
        parts = tuple(p for p in host_path.split("/") if p and p != ".")
        if not host_path.startswith("/") or ".." in parts:
            raise PvefixError(f"not an absolute host path: {host_path!r}", source=str(self.root))
        if not parts or parts[0].startswith("."):
            raise PvefixError(f"not a host path: {host_path!r}", source=str(self.root))
        path = Path(f"{str(self.root).rstrip('/')}/{'/'.join(parts)}")  # root "/" too
        if parts[:2] == ("etc", "pve") and len(parts) > 3 and not path.exists():
            node_dir = ("etc", "pve", "nodes", self.meta.node)
            if parts[2] == "qemu-server":
                alt = self.root.joinpath(*node_dir, *parts[2:])
            elif parts[2] == "local":
                alt = self.root.joinpath(*node_dir, *parts[3:])
            elif parts[:4] == node_dir and len(parts) > 5 and parts[4] == "qemu-server":
                # the reverse link: nodes/<local node>/qemu-server is etc/pve/qemu-server
                alt = self.root.joinpath("etc", "pve", *parts[4:])
            else:
                alt = path
            if alt.exists() or (alt.parent.is_dir() and not path.parent.is_dir()):
                return alt  # also a new file (a temporary one beside a config) in that folder
        return path

    def owns(self, real: Path) -> bool:
        """Is `real` (resolved) one of this node's own files kept outside the host paths
        (another node's view keeps its files under nodes/NAME/)? Never for the local node."""
        return False

    def read_text(self, host_path: str) -> str | None:
        """Content of a host file, or None when the tree does not have it."""
        path = self.host_path(host_path)
        try:
            return safe.read_text(path, self.root)
        except NotADirectoryError:
            return None

    def grub_dropins(self) -> dict[str, str]:
        """/etc/default/grub.d/*.cfg (regular files, not links), as update-grub sources them."""
        folder = self.host_path(GRUB_D)  # this node's (nodes/NAME/ overlays)
        out: dict[str, str] = {}
        if not folder.is_dir() or folder.is_symlink():
            return out
        for entry in sorted(folder.iterdir()):
            if entry.name.endswith(".cfg") and not entry.is_symlink() and entry.is_file():
                host = f"{GRUB_D}/{entry.name}"
                text = self.read_text(host)
                if text is not None:
                    out[host] = text
        return out

    def write_text(self, host_path: str, text: str) -> None:
        """Replace (or create) a host file atomically."""
        path = self.host_path(host_path)
        atomic_write(path, text.encode("utf-8", errors="surrogateescape"))

    # -- hardware ---------------------------------------------------------------------------

    def pci_devices(self) -> list[PciDevice]:
        """Every PCI function in the tree's sysfs, sorted by address."""
        return scan_pci_devices(self.root)

    def pci_devices_at_load(self) -> list[PciDevice]:
        """The sysfs scan validate() made when the tree was opened (a bundle is read once,
        right after it is opened: one scan, not two), else a fresh one."""
        return self._scan_at_load if self._scan_at_load is not None else self.pci_devices()

    def pci_mappings(self) -> PciMappingFile | None:
        """The cluster PCI mappings (`/etc/pve/mapping/pci.cfg`), or None without the file."""
        text = self.read_text(MAPPING_FILE)
        if text is None:
            return None
        return PciMappingFile.parse(text, source=str(self.host_path(MAPPING_FILE)))

    # -- checks -----------------------------------------------------------------------------

    def validate(self) -> None:
        """Check what load_tree promises: VM places, VM states, nodes, sysfs, mappings."""
        vms = self._scan_vms()
        for vmid, (node, path) in vms.items():
            if node not in self.meta.cluster_nodes:
                raise ParseError(
                    f"VM {vmid} is on node '{node}', which is not in cluster_nodes",
                    source=str(path))
        for key in self.meta.vms:
            if int(key) not in vms:
                raise ParseError(
                    f"vms.{key}: no config file for VM {key}", source=str(self.root / META_FILE))
        self._scan_at_load = self.pci_devices()
        self.pci_mappings()


def load_tree(path: str | Path) -> HostTree:
    """Open and validate a host tree; ParseError names the file and field that is wrong."""
    root = Path(path)
    if not root.is_dir():
        raise ParseError("not a directory", source=str(root))
    tree = HostTree(root, load_meta(root / META_FILE))
    tree.validate()
    return tree
