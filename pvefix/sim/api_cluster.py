"""GET /cluster/resources: where each guest runs (how a client finds a VM's node)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pvefix.sim.api_qemu import config_summary
from pvefix.sim.errors import param_error
from pvefix.sim.perms import TOP_PATHS

if TYPE_CHECKING:
    from pvefix.sim.api import Call
    from pvefix.sim.state import NodeState

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
                if state.access.allowed(call.ident.authuser, f"/vms/{vmid}", ["VM.Audit"]):
                    out.append(_vm_resource(state, vmid, node))
        if kind in (None, "node"):
            for name in state.tree.meta.cluster_nodes:
                out.append({"id": f"node/{name}", "type": "node", "node": name,
                            "status": "online"})
    return out


def _vm_resource(state: NodeState, vmid: int, node: str) -> dict[str, object]:
    """One `type: qemu` item as pve-manager's resources index builds it from pmxcfs's vmlist
    and pvestatd's RRD data: `maxcpu`, `template`, the RRD-lagged `status`, no `pid`."""
    summary = dict(config_summary(state, vmid, node))
    status = state.lagged_status(vmid)
    item: dict[str, object] = {
        "id": f"qemu/{vmid}", "type": "qemu", "node": node, "vmid": vmid,
        "name": summary["name"], "status": status,
        "uptime": state.uptime(vmid) if status == "running" else 0,
        "maxcpu": summary["cpus"], "maxmem": summary["maxmem"], "maxdisk": summary["maxdisk"],
        "template": summary.get("template", 0),
        "cpu": 0, "mem": 0, "disk": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
    }
    for key in ("lock", "tags"):
        if key in summary:
            item[key] = summary[key]
    ha = state.run_state(vmid).ha_state
    if ha:
        item["hastate"] = ha
    return item


def access_permissions(call: Call) -> object:
    """GET /access/permissions: the caller's own effective privileges (or a token's of its
    own user), on `path` or on every path an ACL names and Proxmox's top-level ones."""
    who = call.params.get("userid") or call.ident.authuser
    if who != call.ident.authuser and who.partition("!")[0] != call.ident.authuser:
        call.state.access.check(call.ident.authuser, "/access", ["Sys.Audit"])
    access = call.state.access
    with call.state.lock:
        if path := call.params.get("path"):
            return {path: access.effective(who, path)}
        paths = sorted({*TOP_PATHS, *(a.path for a in access.acls)})
        found = {p: access.effective(who, p) for p in paths}
        return {p: privs for p, privs in found.items() if privs}
