"""The desired state of many VMs of a host tree at once (`pvefix desired --all --bundle`, the
benchmarks' no-drift baseline).

Per VM, `desired_from_state(read_tree(tree, vmid))` reads the whole host (sysfs, mappings, the
list of every VM) to describe one VM: fine for one, quadratic for a 10,000-VM tree. Here the
VM list is read once, each node's host facts once (through the first of its VMs), and each
VM from its own config file alone; the result is the same as merging the per-VM states
(tests/desired/test_tree.py holds it to that).
"""

from __future__ import annotations

from collections.abc import Sequence

from pvefix.desired.derive import node_desired, vm_rules
from pvefix.desired.model import DesiredState, NodeDesired, VmDesired
from pvefix.errors import PvefixError
from pvefix.hosttree.tree import HostTree
from pvefix.observed import vm_from_config


def desired_from_tree(tree: HostTree, vmids: Sequence[int] | None = None) -> DesiredState:
    """The desired state (as it holds now) of `vmids` (every VM of the tree when None) and
    of the nodes whose host files the tree holds."""
    from pvefix.sources.bundle import read_tree

    listed = tree.vms()
    wanted = sorted(listed) if vmids is None else list(dict.fromkeys(vmids))
    missing = [v for v in wanted if v not in listed]
    if missing:
        raise PvefixError(f"no VM {missing[0]} in this host tree", source=str(tree.root))
    vms: dict[int, VmDesired] = {}
    first_on: dict[str, int] = {}
    for vmid in wanted:
        node = listed[vmid]
        first_on.setdefault(node, vmid)
        run = tree.vm_state(vmid)
        vms[vmid] = vm_rules(vm_from_config(vmid, node, tree.read_vm_config(vmid), run.status,
                                            run.running_machine))
    nodes: dict[str, NodeDesired] = {}
    for node, vmid in sorted(first_on.items()):
        state = read_tree(tree, vmid)
        # As desired_from_state: the host files count only where they are the VM's node's.
        rules = node_desired(state) if state.node.name == node else None
        if rules is not None:
            nodes[node] = rules
    return DesiredState(nodes=nodes, vms=vms)
