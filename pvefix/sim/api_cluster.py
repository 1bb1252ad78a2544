"""GET /cluster/resources: where each guest runs (how a client finds a VM's node)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pvefix.sim.api_qemu import vm_summary
from pvefix.sim.errors import param_error

if TYPE_CHECKING:
    from pvefix.sim.api import Call

_TYPES = ("vm", "node", "storage", "sdn")


def cluster_resources(call: Call) -> object:
    """VMs as `type: qemu` items with `id: qemu/VMID` and their node; nodes as `type: node`."""
    kind = call.params.get("type")
    if kind is not None and kind not in _TYPES:
        raise param_error({"type": f"value '{kind}' does not have a value in the enumeration "
                                   f"'{', '.join(_TYPES)}'"})
    state = call.state
    out: list[dict[str, object]] = []
    with state.lock:
        if kind in (None, "vm"):
            for vmid, node in state.vms().items():
                item = vm_summary(state, vmid, node)
                item.update({"id": f"qemu/{vmid}", "type": "qemu", "node": node})
                ha = state.run_state(vmid).ha_state
                if ha:
                    item["hastate"] = ha
                out.append(item)
        if kind in (None, "node"):
            for name in state.tree.meta.cluster_nodes:
                out.append({"id": f"node/{name}", "type": "node", "node": name,
                            "status": "online"})
    return out
