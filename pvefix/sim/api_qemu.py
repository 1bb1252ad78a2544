"""`/nodes/{node}/qemu/...` endpoints (qemu-server's API2/Qemu.pm shapes)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pvefix.sim import vmops
from pvefix.sim.api_node import check_node
from pvefix.sim.errors import ApiError, param_error
from pvefix.sim.qemu_cmdline import qemu_pid
from pvefix.sim.state import LoadedConfig, NodeState
from pvefix.sim.vmview import api_config, api_pending, api_snapshot_config
from pvefix.vmconfig.config import Section
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


_DRIVE_RE = re.compile(r"(ide|sata|scsi|virtio)\d+")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_bytes(text: str) -> int:
    """A drive's `size=` (PVE::JSONSchema::parse_size: 32G, 1.5T, 512 for bytes); 0 if odd."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", text.strip())
    return int(float(match[1]) * _SIZE_UNITS[match[2]]) if match else 0


def bootdisk_size(main: Section) -> int:
    """qemu-server's bootdisk_size: the `size=` of the first disk in the boot order (or
    `bootdisk`), 0 for none, a CD-ROM or a drive without size."""
    boot = main.get("boot") or ""
    order = next((p[6:] for p in boot.split(",") if p.startswith("order=")), None)
    names = order.split(";") if order is not None else [main.get("bootdisk") or ""]
    first = next((n for n in names if _DRIVE_RE.fullmatch(n)), None)
    value = main.get(first) if first else None
    if not value:
        return 0
    opts = dict(p.partition("=")[::2] for p in value.split(",")[1:])
    if opts.get("media") == "cdrom" or value.split(",")[0] in ("cdrom", "none"):
        return 0
    return size_bytes(opts.get("size", ""))


def config_summary(state: NodeState, vmid: int, node: str) -> dict[str, object]:
    """What the config decides of a VM's status (name, CPUs, memory, boot disk, lock, tags),
    parsed once per digest (a cluster's listing asks for every VM's)."""
    loaded = state.load(vmid, node)
    return state.cached_view(loaded, "summary", lambda: _summary_of_config(loaded, vmid))


def vm_summary(state: NodeState, vmid: int, node: str) -> dict[str, object]:
    """qemu-server's vmstatus(full=1) of one VM: GET qemu?full=1 and status/current."""
    run = state.run_state(vmid)
    item: dict[str, object] = {"vmid": vmid, "status": run.status,
                               "uptime": state.uptime(vmid), **config_summary(state, vmid, node),
                               "memhost": 0, "qmpstatus": run.qmpstatus or run.status}
    if run.status == "running":
        item.update({"pid": qemu_pid(vmid), "diskread": 0, "diskwrite": 0,
                     "proxmox-support": {}, **dict.fromkeys(_PRESSURE, 0)})
    return item


_PRESSURE = tuple(f"pressure{what}{kind}" for what in ("cpu", "io", "memory")
                  for kind in ("some", "full"))


def _summary_of_config(loaded: LoadedConfig, vmid: int) -> dict[str, object]:
    main = loaded.parse().main
    sockets = int(main.get("sockets") or "1") if (main.get("sockets") or "1").isdigit() else 1
    cores = int(main.get("cores") or "1") if (main.get("cores") or "1").isdigit() else 1
    item: dict[str, object] = {
        "name": main.get("name") or f"VM {vmid}",
        "cpus": sockets * cores,
        "maxmem": _memory_mib(main.get("memory")) * 1024 * 1024,
        "maxdisk": bootdisk_size(main),
        "cpu": 0,
        "mem": 0,
        "disk": 0,
        "netin": 0,
        "netout": 0,
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
            if where != node or not call.state.access.allowed(
                call.ident.authuser, f"/vms/{vmid}", ["VM.Audit"]
            ):
                continue
            item = vm_summary(call.state, vmid, node)
            run = call.state.run_state(vmid)
            if not full:
                for key in ("qmpstatus", "memhost", "proxmox-support", *_PRESSURE):
                    item.pop(key, None)
            elif run.status == "running":
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
