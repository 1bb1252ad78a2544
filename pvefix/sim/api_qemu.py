"""`/nodes/{node}/qemu/...` endpoints (qemu-server's API2/Qemu.pm shapes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pvefix.sim import vmops
from pvefix.sim.api_node import check_node
from pvefix.sim.errors import ApiError, param_error
from pvefix.sim.qemu_cmdline import qemu_pid
from pvefix.sim.state import LoadedConfig, NodeState
from pvefix.sim.vmview import api_config, api_pending, api_snapshot_config
from pvefix.vmconfig.schema import parse_bool

if TYPE_CHECKING:
    from pvefix.sim.api import Call


def _vmid(call: Call) -> int:
    raw = call.parts["vmid"]
    if not raw.isdigit() or not 100 <= int(raw) <= 999_999_999:
        raise param_error({"vmid": "invalid format - value does not look like a valid VM ID"})
    check_node(call.state, call.parts["node"])
    return int(raw)


def _memory_mib(value: str | None) -> int:
    if not value:
        return 512
    head = value.split(",")[0].removeprefix("current=")
    return int(head) if head.isdigit() else 512


def vm_summary(state: NodeState, vmid: int, node: str) -> dict[str, object]:
    loaded = state.load(vmid, node)
    run = state.run_state(vmid)
    item: dict[str, object] = {
        "vmid": vmid,
        "status": run.status,
        "uptime": state.uptime(vmid),
        # What the config decides, parsed once per digest (a cluster's listing asks for every
        # VM's: the simulator should not be the slow part of what it simulates).
        **state.cached_view(loaded, "summary", lambda: _summary_of_config(loaded, vmid)),
    }
    if run.status == "running":
        item["pid"] = qemu_pid(vmid)
    return item


def _summary_of_config(loaded: LoadedConfig, vmid: int) -> dict[str, object]:
    main = loaded.parse().main
    sockets = int(main.get("sockets") or "1") if (main.get("sockets") or "1").isdigit() else 1
    cores = int(main.get("cores") or "1") if (main.get("cores") or "1").isdigit() else 1
    item: dict[str, object] = {
        "name": main.get("name") or f"VM {vmid}",
        "cpus": sockets * cores,
        "maxmem": _memory_mib(main.get("memory")) * 1024 * 1024,
        "maxdisk": 0,
        "cpu": 0,
        "mem": 0,
        "disk": 0,
        "netin": 0,
        "netout": 0,
        "diskread": 0,
        "diskwrite": 0,
    }
    lock = main.get("lock")
    if lock:
        item["lock"] = lock
    if main.get("tags"):
        item["tags"] = main.get("tags")
    if main.get("template") in ("1", "on", "yes", "true"):
        item["template"] = 1
    return item


def vm_list(call: Call) -> object:
    """With `full=1`, running VMs also say their running machine and QEMU version (qemu-server's
    vmstatus asks each running QEMU with query-machines and query-version when `full` is set)."""
    node = call.parts["node"]
    check_node(call.state, node)
    full = bool(parse_bool(call.params.get("full", "0") or "0"))
    with call.state.lock:
        items = []
        for vmid, where in call.state.vms().items():
            if where != node:
                continue
            item = vm_summary(call.state, vmid, node)
            run = call.state.run_state(vmid)
            if full and run.status == "running":
                item["running-machine"] = run.running_machine
                item["running-qemu"] = call.state.tree.meta.versions.qemu or "10.1.2"
            items.append(item)
        return items


def get_config(call: Call) -> object:
    state, vmid = call.state, _vmid(call)
    current = bool(parse_bool(call.params.get("current", "0") or "0"))
    snapshot = call.params.get("snapshot")
    if snapshot and current:
        message = "cannot use 'snapshot' parameter with 'current'"
        raise param_error({"snapshot": message, "current": message})
    with state.lock:
        loaded = state.load(vmid, call.parts["node"])
        if snapshot:
            sec = loaded.parse().snapshots.get(snapshot)
            if sec is None:
                raise ApiError(500, f"snapshot '{snapshot}' does not exist")
            data = api_snapshot_config(sec, loaded.digest)
        else:
            data = state.cached_view(
                loaded, f"config:{int(current)}",
                lambda: api_config(loaded.parse(), loaded.digest, current=current),
            )
    if state.faults.take_edit_between():
        state.other_user_edit(vmid)
    return data


def put_config(call: Call) -> object:
    vmops.update_config(
        call.state, call.ident, call.parts["node"], _vmid(call), call.params, sync=True
    )
    return None


def post_config(call: Call) -> object:
    return vmops.update_config(
        call.state, call.ident, call.parts["node"], _vmid(call), call.params, sync=False
    )


def get_pending(call: Call) -> object:
    state, vmid = call.state, _vmid(call)
    with state.lock:
        loaded = state.load(vmid, call.parts["node"])
        return api_pending(loaded.parse(), loaded.digest)


def status_current(call: Call) -> object:
    state, vmid = call.state, _vmid(call)
    with state.lock:
        item = vm_summary(state, vmid, call.parts["node"])
        run = state.run_state(vmid)
        item["qmpstatus"] = run.qmpstatus or run.status
        ha = run.ha_state
        item["ha"] = {"managed": 1, "state": ha} if ha else {"managed": 0}
        if run.status == "running":
            item["running-machine"] = run.running_machine
            item["running-qemu"] = state.tree.meta.versions.qemu or "10.1.2"
        return item


def power_action(call: Call) -> object:
    action = call.parts["action"]
    if action not in ("start", "stop", "shutdown", "reboot"):
        raise ApiError(501, f"Method '{call.method} {call.path}' not implemented")
    return vmops.power(
        call.state, call.ident, call.parts["node"], _vmid(call), action, call.params
    )


def snapshot_list(call: Call) -> object:
    state, vmid = call.state, _vmid(call)
    with state.lock:
        return vmops.list_snapshots(state, call.parts["node"], vmid)


def snapshot_create(call: Call) -> object:
    return vmops.create_snapshot(
        call.state, call.ident, call.parts["node"], _vmid(call), call.params
    )


def rollback(call: Call) -> object:
    return vmops.rollback_snapshot(
        call.state, call.ident, call.parts["node"], _vmid(call), call.parts["snapname"]
    )
