"""`pvefix collect import`: a bundle (tarball or folder) into a validated host tree.

The tarball comes from a host, so it is untrusted input: members with absolute paths or `..`
are refused before anything is written, and only plain files and folders are then written, by
pvefix itself (no links, devices, owners or set-uid bits from the tarball): the same on every
Python 3.11, whose tarfile before 3.11.4 (Debian 12's 3.11.2) has no extraction filters.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict

from pvefix.collect.facts import FACTS_DIR, meta_from_facts
from pvefix.errors import PvefixError, RefusedError
from pvefix.hosttree.meta import META_FILE
from pvefix.hosttree.tree import HostTree, atomic_write, load_tree


class GpuSummary(BaseModel):
    """A display-class PCI function found in the bundle."""

    model_config = ConfigDict(frozen=True)

    address: str
    ids: str
    iommu_group: int | None
    driver: str | None


class ImportSummary(BaseModel):
    """What an import found: printed by the command, returned for tests."""

    model_config = ConfigDict(frozen=True)

    dest: str
    node: str
    pve: str
    kernel: str
    vms: dict[int, str]  # vmid -> "node: status [running-machine]"
    gpus: list[GpuSummary]

    def text(self) -> str:
        lines = [f"host tree written: {self.dest}", f"node {self.node}: pve {self.pve}, "
                 f"kernel {self.kernel}", f"VMs ({len(self.vms)}):"]
        lines += [f"  {vmid}  {state}" for vmid, state in self.vms.items()]
        lines.append(f"GPUs ({len(self.gpus)}):")
        lines += [
            f"  {g.address}  {g.ids}  iommu group "
            f"{g.iommu_group if g.iommu_group is not None else '-'}  driver {g.driver or '-'}"
            for g in self.gpus
        ]
        lines.append(f"next: pvefix plan VMID --bundle {self.dest}")
        return "\n".join(lines) + "\n"


# A collect bundle is a few MiB at most (configs, cmdlines, sysfs attribute files).
MAX_MEMBERS = 200_000
MAX_TOTAL = 512 << 20
MAX_MEMBER = 64 << 20


def _dot_entry(relative: PurePosixPath) -> bool:
    """`.pvefix-sim/` and other dot-entries at the root (but the collect script's own facts
    folder) are the simulator's, never a host's."""
    parts = [p for p in relative.parts if p not in (".", "")]
    return bool(parts) and parts[0].startswith(".") and parts[0] not in ("..", FACTS_DIR)


def _check_member(member: tarfile.TarInfo, bundle: Path) -> None:
    name = PurePosixPath(member.name)
    if _dot_entry(name):
        raise RefusedError(
            f"member {member.name!r} is a dot-entry at the root (simulator state is never"
            " imported from a bundle)", source=str(bundle))
    if member.size > MAX_MEMBER:
        raise RefusedError(f"member {member.name!r} is larger than {MAX_MEMBER >> 20} MiB",
                           source=str(bundle))
    if name.is_absolute() or member.name.startswith("/"):
        raise RefusedError(f"member {member.name!r} has an absolute path", source=str(bundle))
    if ".." in name.parts:
        raise RefusedError(f"member {member.name!r} leaves the tree ('..')", source=str(bundle))
    if member.issym() or member.islnk():
        raise RefusedError(
            f"member {member.name!r} is a link (a collect bundle has none)", source=str(bundle))
    if not (member.isfile() or member.isdir()):
        raise RefusedError(f"member {member.name!r} is not a file or folder", source=str(bundle))


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> None:
    """One checked member (a relative path without `..`, a file or a folder) under `dest`:
    folders 0755, files 0644 (0755 when executable for its owner), never through a link."""
    target = dest.joinpath(*PurePosixPath(member.name).parts)
    if member.isdir():
        target.mkdir(mode=0o755, parents=True, exist_ok=True)
        return
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    source = tar.extractfile(member)
    if source is None:
        raise tarfile.TarError(f"member {member.name!r} has no data")
    mode = 0o755 if member.mode & stat.S_IXUSR else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with source, os.fdopen(os.open(target, flags, mode), "wb") as out:
        shutil.copyfileobj(source, out)


def _unpack_tarball(bundle: Path, dest: Path) -> None:
    try:
        with tarfile.open(bundle, "r:*") as tar:
            members: list[tarfile.TarInfo] = []
            total = 0
            for member in tar:  # streamed: a bomb of members stops at the cap
                _check_member(member, bundle)
                members.append(member)
                total += member.size
                if len(members) > MAX_MEMBERS or total > MAX_TOTAL:
                    raise RefusedError(
                        f"more than {MAX_MEMBERS} members or {MAX_TOTAL >> 20} MiB: not a"
                        " collect bundle", source=str(bundle))
            for member in members:
                _write_member(tar, member, dest)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise PvefixError(f"cannot unpack: {exc}", source=str(bundle)) from None


def _copy_folder(bundle: Path, dest: Path) -> None:
    root = bundle.resolve()
    total = 0
    for dirpath, _dirs, files in os.walk(bundle):
        for name in (*_dirs, *files):
            path = Path(dirpath) / name
            if path.is_symlink():
                if not path.resolve().is_relative_to(root):
                    raise RefusedError("a link that leaves the bundle", source=str(path))
                continue
            mode = path.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise RefusedError("not a file or folder (a device, FIFO or socket)",
                                   source=str(path))
            total += path.lstat().st_size
            if total > MAX_TOTAL:
                raise RefusedError(f"more than {MAX_TOTAL >> 20} MiB: not a collect bundle",
                                   source=str(bundle))
    shutil.copytree(bundle, dest, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda folder, names: [
                        n for n in names if Path(folder).resolve() == root
                        and n.startswith(".") and n != FACTS_DIR
                    ])


def _tree_nodes(dest: Path) -> list[str]:
    nodes = dest / "etc" / "pve" / "nodes"
    if not nodes.is_dir():
        return []
    return sorted(
        p.name for p in nodes.iterdir() if (p / "qemu-server").is_dir()
        and any((p / "qemu-server").glob("*.conf")))


def summarize(tree: HostTree, dest: Path) -> ImportSummary:
    """Node, VMs with their run states, and the GPUs of a loaded tree."""
    meta = tree.meta
    vms: dict[int, str] = {}
    for vmid, node in tree.vms().items():
        state = tree.vm_state(vmid)
        known = str(vmid) in meta.vms
        text = f"{node}: {state.status if known else 'stopped (state not collected)'}"
        if state.running_machine:
            text += f" ({state.running_machine})"
        vms[vmid] = text
    gpus = [GpuSummary(address=d.address, ids=d.id_pair, iommu_group=d.iommu_group,
                       driver=d.driver) for d in tree.pci_devices() if d.is_display]
    return ImportSummary(
        dest=str(dest), node=meta.node, pve=meta.versions.pve, kernel=meta.versions.kernel,
        vms=vms, gpus=gpus)


def import_bundle(bundle: Path, dest: Path) -> ImportSummary:
    """Unpack `bundle` into `dest` (new or empty), write pvefix-host.json, validate the tree.

    On an error nothing is left behind in `dest` (a folder the import created is removed).
    """
    if not bundle.exists():
        raise PvefixError("no such bundle", source=str(bundle))
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise PvefixError("destination exists and is not an empty folder", source=str(dest))
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if bundle.is_dir():
            _copy_folder(bundle, dest)
        else:
            _unpack_tarball(bundle, dest)
        meta = meta_from_facts(dest / FACTS_DIR, _tree_nodes(dest))
        atomic_write(dest / META_FILE, meta.to_json().encode("utf-8"))
        tree = load_tree(dest)
        return summarize(tree, dest)
    except BaseException:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        else:
            for entry in dest.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        raise
