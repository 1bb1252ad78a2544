"""Read a host tree (a bundle gathered on a host, a scenario, a replay) into a HostState.

No network: every fact comes from the tree's files and its `pvefix-host.json`. Errors name the
file and, where there is one, the field.
"""

from __future__ import annotations

from pathlib import Path

from pvefix.errors import ParseError, PvefixError
from pvefix.facts.node import NODE_FACTS
from pvefix.facts.project import node_fields, tree_answers, tree_known
from pvefix.hosttree.meta import META_FILE
from pvefix.hosttree.tree import HostTree, load_tree
from pvefix.paths import HOST_FILES
from pvefix.sources.common import pending_items
from pvefix.state import (
    AccessFacts,
    BootToolFacts,
    FileFact,
    HostState,
    NodeFacts,
    VmFacts,
)
from pvefix.vmconfig.config import VMConfig


def node_facts(tree: HostTree) -> NodeFacts:
    """The node as the tree's metadata describes it."""
    meta = tree.meta
    return NodeFacts(
        name=meta.node, pve_version=meta.versions.pve, kernel_version=meta.versions.kernel,
        qemu_version=meta.versions.qemu, edk2_version=meta.versions.edk2,
        cpu_vendor=meta.cpu.vendor, cpu_model=meta.cpu.model, cpu_phys_bits=meta.cpu.phys_bits,
        cpu_flags=frozenset(meta.cpu.flags) if meta.cpu.flags is not None else None,
        boot_mode=meta.boot.mode,
        secureboot=meta.boot.secureboot if meta.boot.mode == "efi" else None,
        memory_bytes=meta.memory_bytes,
        **node_fields(NODE_FACTS, tree_answers(tree.read_text), tree_known(NODE_FACTS, meta)))



def vm_facts(tree: HostTree, vmid: int) -> VmFacts:
    """The VM's raw config, digest, pending rows and run state."""
    vms = tree.vms()
    if vmid not in vms:
        known = ", ".join(str(v) for v in vms) or "none"
        raise PvefixError(
            f"no VM {vmid} in this host tree (VMs: {known})", source=str(tree.root))
    path = tree.vm_config_path(vmid)
    text = tree.read_vm_config(vmid)
    cfg = VMConfig.parse(text, str(path))
    run = tree.vm_state(vmid)
    return VmFacts(
        vmid=vmid, node=vms[vmid], config_text=text, config_source="file", digest=cfg.digest,
        pending=pending_items(cfg, cfg.digest), status=run.status,
        running_machine=run.running_machine, lock=run.lock, ha_state=run.ha_state)


def read_tree(tree: HostTree, vmid: int) -> HostState:
    """A HostState from an already loaded host tree: the VM's own node's facts and files (a
    cluster tree keeps another node's under nodes/NAME/, pvefix.hosttree.nodes)."""
    tree = _vm_node_tree(tree, vmid)
    mapping_file = tree.pci_mappings()
    boot = tree.meta.proxmox_boot_tool
    return HostState(
        node=node_facts(tree),
        boot_tool=BootToolFacts(exit_code=boot.exit_code, output=boot.output),
        files={
            **{path: FileFact.of(path, tree.read_text(path)) for path in HOST_FILES},
            **{path: FileFact.of(path, text) for path, text in tree.grub_dropins().items()}},
        pci_devices=tree.pci_devices_at_load(), acs=dict(tree.meta.acs),
        mappings=list(mapping_file.mappings.values()) if mapping_file else [],
        vm=vm_facts(tree, vmid),
        access=AccessFacts(method="bundle", user=None, auth="none", ssh=False))


def _vm_node_tree(tree: HostTree, vmid: int) -> HostTree:
    """The tree as the VM's node sees it when the tree holds that node's files (nodes/NAME/);
    otherwise the tree as it is: its facts are another node's, which the planner knows
    (state.node is not the VM's node: the VM's devices are unknown here)."""
    from pvefix.hosttree.nodes import node_tree, overlay_dir

    node = tree.vms().get(vmid)
    if node is None or node == tree.meta.node or not overlay_dir(tree.root, node).is_dir():
        return tree
    return node_tree(tree, node)


def read_bundle(path: str | Path, vmid: int) -> HostState:
    """Read the host tree at `path` and describe VM `vmid` and its host.

    Raises ParseError naming the file (and field) when the tree is malformed, PvefixError when
    the VM is not in it.
    """
    return read_tree(_load(path), vmid)


def read_bundle_many(path: str | Path, vmids: list[int]) -> list[HostState]:
    """`read_bundle` for several VMs, the tree loaded once."""
    tree = _load(path)
    return [read_tree(tree, vmid) for vmid in vmids]


def _load(path: str | Path) -> HostTree:
    root = Path(path)
    if not (root / META_FILE).is_file():
        raise ParseError(
            f"not a host tree: no {META_FILE} (docs/host-tree.md says how to make one on a host)",
            source=str(root))
    return load_tree(root)
