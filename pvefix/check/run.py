"""Run a drift check: pick the VMs and nodes in scope, read them, compare, report.

Scope: the VMs named; with `all_vms`, every VM of the cluster (those without a desired state
are listed as skipped) or, when the desired state came from a file, the VMs that file names.
Nodes: those of the desired state that host a checked VM (with `all_vms`: all of them). A node
that cannot be read (no SSH to it) is `unknown`, which fails the check: pvefix does not call a
host rule kept when it could not look.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pvefix.check.compare import build_report
from pvefix.check.report import CheckReport
from pvefix.desired.model import DesiredState
from pvefix.errors import ParseError, PvefixError
from pvefix.hostfacts import BootToolFacts
from pvefix.observed import ObservedNode, ObservedVm, node_from_files, vm_from_config
from pvefix.paths import HOST_FILES
from pvefix.sources.cluster import DEFAULT_WORKERS, ClusterRead, Progress, read_live_cluster
from pvefix.target.settings import Connection


def scope(desired: DesiredState, vmids: Sequence[int], all_vms: bool,
          from_file: bool) -> list[int] | None:
    """The VMIDs to read; None means every VM of the cluster."""
    if vmids:
        return sorted(set(vmids))
    if not all_vms:
        raise PvefixError("name the VMs to check (VMID ...) or pass --all")
    if from_file:
        return sorted(desired.vms)
    return None


def _nodes_in_scope(desired: DesiredState, vms: dict[int, ObservedVm | str],
                    all_vms: bool) -> list[str]:
    if all_vms:
        return sorted(desired.nodes)
    hosting = {vm.node for vm in vms.values() if isinstance(vm, ObservedVm)}
    return sorted(n for n in desired.nodes if n in hosting)


def check_bundle(
    path: Path, desired: DesiredState, vmids: Sequence[int], *, all_vms: bool = False,
    from_file: bool = True,
) -> CheckReport:
    """Check a host tree (a bundle): its VMs, and its local node's cmdline."""
    from pvefix.hosttree.meta import META_FILE
    from pvefix.hosttree.tree import load_tree

    if not (path / META_FILE).is_file():
        raise ParseError(f"not a host tree: no {META_FILE}", source=str(path))
    tree = load_tree(path)
    listed = tree.vms()
    wanted = scope(desired, vmids, all_vms, from_file)
    targets = list(listed) if wanted is None else wanted
    vms: dict[int, ObservedVm | str] = {}
    for vmid in targets:
        if vmid not in listed:
            vms[vmid] = "not a VM of this host tree"
            continue
        run = tree.vm_state(vmid)
        vms[vmid] = vm_from_config(vmid, listed[vmid], tree.read_vm_config(vmid), run.status,
                                   run.running_machine)
    local = tree.meta.node
    boot = tree.meta.proxmox_boot_tool
    here = node_from_files(local, BootToolFacts(exit_code=boot.exit_code, output=boot.output),
                           {**{p: tree.read_text(p) for p in HOST_FILES},
                            **tree.grub_dropins()})
    nodes = {
        name: here if name == local else ObservedNode(
            name=name, problem=f"the bundle holds the host files of node {local} only")
        for name in _nodes_in_scope(desired, vms, all_vms)
    }
    return build_report(desired, vms, nodes, source=f"bundle {path}")


def _unread_node(name: str, read: ClusterRead) -> str:
    """Why node `name`'s host cmdline was not read: SSH failed (its own words: a key others
    may read, a host key refused, ...), or it reached another node (then --ssh-host helps)."""
    if read.ssh_error is not None:
        return f"the host cmdline has no API, and SSH failed: {read.ssh_error}"
    reach = (f"SSH reaches node {read.ssh_node}" if read.ssh_node
             else "no SSH session to any node")
    return (f"the host cmdline has no API and {reach}; check node {name} with --ssh-host"
            " pointing at it (or its address in the profile's ssh.nodes)")


def check_live(
    connection: Connection, desired: DesiredState, vmids: Sequence[int], *,
    all_vms: bool = False, from_file: bool = True, workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None, bulk: bool = True,
) -> CheckReport:
    """Check a live cluster through the API (and SSH for the host cmdline and, with `bulk`,
    every VM config in one command; without, or without SSH, VM by VM through the API)."""
    wanted = scope(desired, vmids, all_vms, from_file)
    # Every VM of the cluster is in scope, but only those with a desired state need reading.
    to_read = sorted(desired.vms) if wanted is None else wanted
    # Every node with rules is read (in parallel, each through its own SSH session): where a
    # VM lives is known only once the read is done, and the desired state's node is a hint.
    read = read_live_cluster(connection, to_read, workers=workers, progress=progress,
                             bulk=bulk, nodes=sorted(desired.nodes))
    vms: dict[int, ObservedVm | str] = dict(read.vms)
    if wanted is None:
        for vmid, node in read.listed.items():
            if vmid not in vms:
                vms[vmid] = ObservedVm(vmid=vmid, node=node, status="stopped")
        for vmid in [v for v, o in vms.items() if isinstance(o, str) and v not in read.listed]:
            vms[vmid] = f"recorded, but {vms[vmid]}"
    nodes: dict[str, ObservedNode] = {}
    for name in _nodes_in_scope(desired, vms, all_vms):
        if name in read.nodes:
            nodes[name] = read.nodes[name]
        else:
            nodes[name] = ObservedNode(name=name, problem=_unread_node(name, read))
    where = connection.label
    notes = list(read.notes)
    notes.append(read.path_note())
    notes.append(f"read {len(read.vms)} VM(s) in {read.elapsed_s:.2f} s")
    return build_report(desired, vms, nodes, notes=notes, source=f"live {where}",
                        read_path=read.path)
