"""VM operations with Proxmox's rules: config updates, power actions, snapshots.

Used by the API handlers and by `qm` over SSH. Messages are Proxmox's own (qemu-server
API2/Qemu.pm, QemuServer.pm, QemuServer/PCI.pm, AbstractConfig.pm) so clients that match them
keep working.
"""

from __future__ import annotations

import re
import threading
import time

from pvefix.closedworld.vm_states import is_template
from pvefix.errors import ValidationError
from pvefix.sim import confschema
from pvefix.sim.auth import Identity
from pvefix.sim.errors import ApiError, die, param_error
from pvefix.sim.guest import guest_boot
from pvefix.sim.machines import pinned_for_windows, running_machine
from pvefix.sim.perms import check_config_keys
from pvefix.sim.startchecks import (
    choose_per_entry,
    reserved_by_others,
    start_checks,
    start_warnings,
)
from pvefix.sim.state import LoadedConfig, NodeState
from pvefix.sim.tasks import TaskLog
from pvefix.sim.vmview import (
    HOT_KEYS,
    add_snapshot,
    apply_pending,
    cleanup_pending,
    pending_delete,
    pending_revert,
    pending_set,
    set_description,
)
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, HostPci
from pvefix.vmconfig.nextstart import section_values
from pvefix.vmconfig.schema import is_known_key, parse_bool

SNAPNAME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_\-]+$")


def split_list(text: str | None) -> list[str]:
    """PVE::Tools::split_list: items separated by commas, semicolons or blanks."""
    return [item for item in re.split(r"[;,\s]+", text or "") if item]


def _field_message(key: str, exc: ValidationError) -> str:
    message = exc.message
    return message[len(key) + 2:] if message.startswith(f"{key}: ") else message


def check_lock(cfg: VMConfig) -> None:
    lock = cfg.main.get("lock")
    if lock:
        raise die(f"VM is locked ({lock})")


def check_digest(loaded: LoadedConfig, digest: str | None) -> None:
    if digest and digest != loaded.digest:
        raise die("checksum mismatch (file change by other user?)")


def check_hostpci_perm(state: NodeState, ident: Identity, vmid: int, key: str,
                       value: str) -> None:
    """Raw devices and `romfile` are root@pam's; a mapping needs Mapping.Use on
    /mapping/pci/ID, then VM.Config.HWType on /vms/VMID."""
    if ident.is_root_pam:
        return
    try:
        dev = HostPci.parse(value, key)
    except ValidationError as exc:
        raise param_error({key: _field_message(key, exc)}) from None
    if dev.hosts:
        raise die(f"only root can set '{key}' config for non-mapped devices")
    if not dev.mapping:
        raise die("either 'host' or 'mapping' must be set.")
    state.access.check(ident.authuser, f"/mapping/pci/{dev.mapping}", ["Mapping.Use"])
    state.access.check(ident.authuser, f"/vms/{vmid}", ["VM.Config.HWType"])
    if dev.romfile is not None:
        raise param_error({key: "only root@pam can set 'romfile' option"})


def update_config(
    state: NodeState, ident: Identity, node: str, vmid: int, params: dict[str, str],
    *, sync: bool, cli: bool = False,
) -> str | None:
    """PUT (sync) or POST (async: returns a UPID) .../config, as update_vm_api does it.

    Values are checked by qemu-server's own schema (confschema). `cli`: the call comes from
    `qm set`, whose option parser turns boolean words (yes, on, true...) into 1 and 0 first.
    """
    params = dict(params)
    if cli:
        for key, value in params.items():
            spec = confschema.schema_of(key)
            word = parse_bool(value) if spec and spec.get("type") == "boolean" else None
            if word is not None:
                params[key] = "1" if word else "0"
    shown = " ".join(f"-{k} {v}" for k, v in params.items() if k != "digest")
    digest = params.pop("digest", None)
    skiplock = parse_bool(params.pop("skiplock", "0") or "0")
    if skiplock and not ident.is_root_pam:
        raise param_error({"skiplock": "Only root may use this option."})
    delete_str, revert_str = params.pop("delete", ""), params.pop("revert", "")
    force = parse_bool(params.pop("force", "0") or "0") or False
    params.pop("background_delay", None)
    if not delete_str and not revert_str and not params:
        raise die("no options specified")
    errors: dict[str, str] = {}
    for key, value in params.items():
        problem = confschema.check(key, value)
        if problem:
            errors[key] = problem
    revert = split_list(revert_str)
    for opt in revert:
        if not is_known_key(opt):
            errors["revert"] = f"unknown option '{opt}'"
        elif opt in params:
            errors["delete"] = f"you can't use '-{opt}' and -revert {opt}' at the same time"
    delete = ["ide2" if opt == "cdrom" else opt for opt in split_list(delete_str)]
    for opt in delete:
        if opt in params:
            errors["delete"] = f"you can't use '-{opt}' and -delete {opt}' at the same time"
        elif opt in revert:
            errors["revert"] = f"you can't use '-delete {opt}' and -revert {opt}' at the same time"
        elif not is_known_key(opt):
            errors["delete"] = f"unknown option '{opt}'"
    if errors:
        raise param_error(errors)
    check_config_keys(state.access, ident.authuser, vmid, [*delete, *params])

    def checks() -> LoadedConfig:
        loaded = state.load(vmid, node)
        check_digest(loaded, digest)
        if not skiplock:
            check_lock(loaded.parse())
        return loaded

    def work(log: TaskLog) -> None:
        if state.faults.take_config_lock(vmid):  # another task held it for the whole wait
            raise die(f"can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
        loaded = checks()
        log(f"update VM {vmid}: {shown}")
        cfg = loaded.parse()
        main, pend = cfg.main, cfg.pending
        for opt in revert:
            pending_revert(cfg, opt)
        for opt in delete:
            value = main.get(opt)
            if value is None:
                value = pend.get(opt)
            if value is None:
                log(f"cannot delete '{opt}' - not set in current configuration!")
                continue
            if HOSTPCI_KEY.match(opt):
                check_hostpci_perm(state, ident, vmid, opt, value)
            pending_delete(cfg, opt, force)
        for opt, value in params.items():
            if opt == "machine":  # assert_valid_machine_property, inside the locked update
                problem = confschema.machine_rule_error(value)
                if problem:
                    raise die(problem)
            if opt == "ostype" and "machine" not in params and "machine" not in delete and (
                pend.get("machine") is None
            ):
                # Like creation, a Windows ostype pins an unversioned machine (update_vm_api).
                pinned = pinned_for_windows(main.get("machine"), value,
                                            state.tree.meta.versions.qemu)
                if pinned:
                    log(f"pinning machine type to '{pinned.split(',')[0]}' for Windows guest OS")
                    pending_set(cfg, "machine", pinned)
            if section_values(pend).get(opt) == value:
                continue
            if HOSTPCI_KEY.match(opt):
                old = main.get(opt)
                if old:
                    check_hostpci_perm(state, ident, vmid, opt, old)
                check_hostpci_perm(state, ident, vmid, opt, value)
            pending_set(cfg, opt, value)
        cleanup_pending(cfg)
        running = state.run_state(vmid).status == "running"
        apply_pending(cfg, HOT_KEYS if running else None)
        state.store(loaded, cfg)

    with state.lock:
        checks()  # early checks, before forking a worker (as Proxmox does)
        if sync:
            work(TaskLog())
            return None
        return state.tasks.run("qmconfig", str(vmid), ident.authuser, work)


# -- power ------------------------------------------------------------------------------------


def _vfio_name(state: NodeState, dev: HostPci) -> str:
    if dev.hosts:
        host = dev.hosts[0]
        return host if host.count(":") == 2 else f"0000:{host}"
    mappings = state.tree.pci_mappings()
    mapping = mappings.get(dev.mapping or "") if mappings else None
    entries = mapping.for_node(state.node) if mapping else []
    return entries[0].paths[0] if entries else dev.key


def chosen_devices(state: NodeState, vmid: int, cfg: VMConfig) -> dict[str, list[str]]:
    """hostpciN -> the addresses a running VM got (the running QEMU's devices): the start's
    own choice against the devices the other running VMs hold."""
    return choose_per_entry(state, vmid, cfg, reserved_by_others(state, vmid), strict=False)


def running_cmdline(state: NodeState, pid: int) -> str | None:
    """/proc/PID/cmdline of a running VM's QEMU on this node (None: no such process)."""
    from pvefix.sim import qemu_cmdline

    vmids = [v for v, n in state.vms().items()
             if n == state.node and state.run_state(v).status == "running"]
    vmid = qemu_cmdline.vmid_of_pid(pid, vmids)
    if vmid is None:
        return None
    cfg = state.load(vmid).parse()
    argv = qemu_cmdline.build(vmid, cfg, state.tree.pci_devices(),
                              chosen_devices(state, vmid, cfg),
                              state.run_state(vmid).running_machine)
    return qemu_cmdline.proc_cmdline(argv)


def check_template(cfg: VMConfig, refused: str) -> None:
    """Proxmox never starts, snapshots or rolls back a template (QemuServer.pm vm_start,
    AbstractConfig.pm __snapshot_prepare and snapshot_rollback), before any lock check."""
    if is_template(cfg.main.get("template")):
        raise die(refused)


def _start_now(state: NodeState, vmid: int, node: str, skiplock: bool, log: TaskLog) -> None:
    loaded = state.load(vmid, node)
    cfg = loaded.parse()
    check_template(cfg, "you can't start a vm if it's a template")
    if not skiplock:
        check_lock(cfg)
    if state.run_state(vmid).status == "running":
        raise die(f"VM {vmid} already running")
    if cfg.has_pending:
        apply_pending(cfg)
        loaded = state.store(loaded, cfg)
        cfg = loaded.parse()
    start_checks(state, cfg, vmid)
    injected = state.faults.take_fail_start(vmid)
    if injected is not None:
        raise die(injected)
    for warning in start_warnings(cfg):
        log.warn(warning)
    main = cfg.main
    meta = state.tree.meta
    state.set_running(vmid, running_machine(main.get("machine"), meta.versions.qemu,
                                            main.get("ostype"), main.get("meta"), meta.cpu.vendor))
    guest_boot(state, vmid)


def _stop_now(state: NodeState, vmid: int, node: str) -> None:
    """vm_stop + vm_stop_cleanup: QEMU goes away and pending changes are applied."""
    loaded = state.load(vmid, node)
    if state.run_state(vmid).status != "running":
        return
    state.set_stopped(vmid)
    cfg = loaded.parse()
    if cfg.has_pending:
        apply_pending(cfg)
        state.store(loaded, cfg)


def power(
    state: NodeState, ident: Identity, node: str, vmid: int, action: str, params: dict[str, str]
) -> str:
    """POST .../status/{start,stop,shutdown,reboot}: a task; errors land in its exit status."""
    skiplock = bool(parse_bool(params.get("skiplock", "0") or "0"))
    if skiplock and not ident.is_root_pam:
        raise param_error({"skiplock": "Only root may use this option."})
    with state.lock:
        if action != "start":  # vm_start's worker loads the config: its task fails instead
            state.load(vmid, node)
        if action == "reboot" and state.run_state(vmid).status != "running":
            raise die(f"VM {vmid} not running")  # checked before the worker forks

        def start(log: TaskLog) -> None:
            _start_now(state, vmid, node, skiplock, log)

        def stop(log: TaskLog) -> None:
            if not skiplock:
                check_lock(state.load(vmid, node).parse())
            _stop_now(state, vmid, node)

        def shutdown(log: TaskLog) -> None:
            if state.run_state(vmid).status == "running":  # a stopped VM: nothing to do, OK
                stop(log)

        if action in ("start", "stop", "shutdown") and state.ha_routed(vmid):
            return _through_ha(state, ident, vmid, action)
        work = {"start": start, "stop": stop, "shutdown": shutdown, "reboot": stop}[action]
        kind = {"start": "qmstart", "stop": "qmstop", "shutdown": "qmshutdown",
                "reboot": "qmreboot"}[action]
        upid = state.tasks.run(kind, str(vmid), ident.authuser, work)
        if action == "reboot" and state.tasks.get(upid).exitstatus == "OK":
            # vm_reboot stops QEMU; qmeventd then starts a new process in a task of its own,
            # so pending changes ARE applied. A reboot from inside the guest keeps the process.
            state.tasks.run("qmstart", str(vmid), "root@pam", start)
        return upid


#: How long the simulated HA stack (CRM, then the node's LRM) takes to act on a request.
HA_DELAY_S = 0.5


def _through_ha(state: NodeState, ident: Identity, vmid: int, action: str) -> str:
    """An HA-managed VM: qemu-server's vm_start/vm_stop/vm_shutdown only ask the HA manager
    (`ha-manager set vm:N --state started`, `ha-manager crm-command stop vm:N TIMEOUT`) in an
    `hastart`/`hastop` task that ends at once; the node's LRM starts or stops the VM later,
    in a `qmstart`/`qmshutdown` task of its own (API2/Qemu.pm, pve-ha-manager)."""
    starting = action == "start"

    def request(log: TaskLog) -> None:
        log(f"Requesting HA {'start' if starting else 'stop'} for VM {vmid}")
        ha_request(state, vmid, "started" if starting else "stopped",
                   shutdown=action == "shutdown")

    return state.tasks.run("hastart" if starting else "hastop", str(vmid), ident.authuser,
                           request)


def ha_request(state: NodeState, vmid: int, wanted: str, *, shutdown: bool = True) -> None:
    """Set the HA resource's state; the simulated LRM acts on it after HA_DELAY_S. A start it
    cannot make leaves the resource in `error` here (the real CRM would first retry and may
    relocate the VM to another node: max_restart, max_relocate)."""
    state.set_ha_state(vmid, wanted)
    node = state.vms().get(vmid, state.node)

    def start(log: TaskLog) -> None:
        _start_now(state, vmid, node, False, log)

    def stop(log: TaskLog) -> None:
        _stop_now(state, vmid, node)

    def lrm() -> None:
        with state.lock:
            if state.run_state(vmid).ha_state != wanted:
                return  # asked otherwise since
            running = state.run_state(vmid).status == "running"
            if wanted == "started" and not running:
                upid = state.tasks.run("qmstart", str(vmid), "root@pam", start)
                ended = state.tasks.get(upid).exitstatus
                if ended != "OK" and not ended.startswith("WARNINGS"):
                    state.set_ha_state(vmid, "error")
            elif wanted in ("stopped", "disabled") and running:
                state.tasks.run("qmshutdown" if shutdown else "qmstop", str(vmid), "root@pam",
                                stop)

    timer = threading.Timer(HA_DELAY_S, lrm)
    timer.daemon = True
    timer.start()


def start_on_boot(state: NodeState) -> None:
    """After a host reboot: every local VM is stopped, those with `onboot: 1` start again,
    templates never (pve-manager PVE/API2/Nodes.pm startall: get_filtered_vmlist leaves out
    every template, whatever its `onboot` says), HA-managed ones not by startall (it skips
    every VM PVE::HA::Config::vm_is_ha_managed names) but by the HA stack, which starts those
    whose requested state is `started`, `onboot` or not."""
    for vmid, node in state.vms().items():
        if node != state.node:
            continue
        if state.run_state(vmid).status == "running":
            state.set_stopped(vmid)
            loaded = state.load(vmid, node)
            cfg = loaded.parse()
            if cfg.has_pending:
                apply_pending(cfg)
                state.store(loaded, cfg)
        cfg = state.load(vmid, node).parse()
        if state.ha_routed(vmid):
            if state.run_state(vmid).ha_state == "started":
                ha_request(state, vmid, "started")
            continue
        if parse_bool(cfg.main.get("onboot") or "0") and not is_template(
                cfg.main.get("template")):

            def start(log: TaskLog, vmid: int = vmid, node: str = node) -> None:
                _start_now(state, vmid, node, False, log)

            state.tasks.run("qmstart", str(vmid), "root@pam", start)


# -- snapshots --------------------------------------------------------------------------------


def list_snapshots(state: NodeState, node: str, vmid: int) -> list[dict[str, object]]:
    cfg = state.load(vmid, node).parse()
    out: list[dict[str, object]] = []
    for name, sec in cfg.snapshots.items():
        item: dict[str, object] = {"name": name, "description": sec.description or ""}
        snaptime = sec.get("snaptime")
        if snaptime and snaptime.isdigit():
            item["snaptime"] = int(snaptime)
        if sec.get("parent"):
            item["parent"] = sec.get("parent")
        item["vmstate"] = 1 if sec.get("vmstate") else 0
        out.append(item)
    current: dict[str, object] = {
        "name": "current", "description": "You are here!", "digest": state.load(vmid).digest,
        "running": 1 if state.run_state(vmid).status == "running" else 0,
    }
    if cfg.main.get("parent"):
        current["parent"] = cfg.main.get("parent")
    out.append(current)
    return out


def create_snapshot(
    state: NodeState, ident: Identity, node: str, vmid: int, params: dict[str, str]
) -> str:
    name = params.get("snapname", "")
    if not SNAPNAME_RE.match(name):
        raise param_error({"snapname": f"invalid format - invalid configuration ID '{name}'"})
    if name == "current":
        raise die("unable to use snapshot name 'current' (reserved name)")
    if name.lower() == "pending":
        raise die("unable to use snapshot name 'pending' (reserved name)")
    vmstate = bool(parse_bool(params.get("vmstate", "0") or "0"))
    with state.lock:
        state.load(vmid, node)

        def work(log: TaskLog) -> None:
            loaded = state.load(vmid, node)
            cfg = loaded.parse()
            check_template(cfg, "you can't take a snapshot if it's a template")
            check_lock(cfg)
            if name in cfg.snapshots:
                raise die(f"snapshot name '{name}' already used")
            running = state.run_state(vmid).status == "running"
            if vmstate and running:
                for key in sorted(cfg.main.keys()):
                    if HOSTPCI_KEY.match(key):
                        dev = HostPci.parse(cfg.main.get(key) or "", key)
                        raise die(
                            "unable to save VM state and RAM - "
                            f"{_vfio_name(state, dev)}: VFIO device doesn't support migration"
                        )
            values = section_values(cfg.main)
            values.pop("lock", None)
            values["snaptime"] = str(int(time.time()))
            values["description"] = params.get("description", "")
            if vmstate and running:
                values["vmstate"] = f"local:state-{name}"
                values["runningmachine"] = state.run_state(vmid).running_machine or ""
            for key, volume in _snapshot_volumes(cfg):
                log(f"snapshotting 'drive-{key}' ({volume})")
            add_snapshot(cfg, name, values)
            cfg.main.set("parent", name)
            state.store(loaded, cfg)

        return state.tasks.run("qmsnapshot", str(vmid), ident.authuser, work)


_DISK_RE = re.compile(r"(ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0")


def _snapshot_volumes(cfg: VMConfig) -> list[tuple[str, str]]:
    """The drives a snapshot covers (QemuConfig's volume loop): every disk with a storage
    volume, CD-ROMs left out."""
    out: list[tuple[str, str]] = []
    for key, value in cfg.main.as_dict().items():
        volume, *opts = value.split(",")
        if _DISK_RE.fullmatch(key) and ":" in volume and "media=cdrom" not in opts:
            out.append((key, volume))
    return out


def rollback_snapshot(
    state: NodeState, ident: Identity, node: str, vmid: int, name: str
) -> str:
    with state.lock:
        state.load(vmid, node)

        def work(log: TaskLog) -> None:
            loaded = state.load(vmid, node)
            cfg = loaded.parse()
            check_template(cfg, "you can't rollback if vm is a template")
            check_lock(cfg)
            snap = cfg.snapshots.get(name)
            if snap is None:
                raise die(f"snapshot '{name}' does not exist")
            if state.run_state(vmid).status == "running" and not snap.get("vmstate"):
                state.set_stopped(vmid)
            values = section_values(snap)
            for key in ("snaptime", "vmstate", "runningmachine", "snapstate"):
                values.pop(key, None)
            main = cfg.main
            main.lines = []
            for key in sorted(values):
                if key != "description":
                    main.set(key, values[key])
            set_description(main, values.get("description"))
            if cfg.has_pending:
                cfg.pending.lines = []
            main.set("parent", name)
            state.store(loaded, cfg)

        return state.tasks.run("qmrollback", str(vmid), ident.authuser, work)


def api_error_text(exc: ApiError) -> str:
    """One line for an SSH client (`qm` prints Proxmox's message)."""
    if exc.errors:
        return "\n".join(f"{k}: {v}" for k, v in exc.errors.items())
    return exc.message
