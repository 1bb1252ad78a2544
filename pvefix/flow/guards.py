"""Refusals shared by the apply and rollback flows, made before anything is written: an
HA-managed VM not stopped or started, the privileges a phase or a restore needs, and a host
reboot that would hurt (`guard_host_reboot`: apply's and rollback's one set of reboot
refusals, docs/apply.md step 4: not the host pvefix runs on (--local), no HA-managed target,
every VM of the node listed (`node_vms`, read from the API; pvefix.executor.neighbours judges
them), a running or locked VM refused unless --stop-others (HA-managed and backup/migrate-locked
ones never stopped), and no VM that must come back finding its GPU taken by an onboot VM after
the boot), with `confirm_reboot`, the node's name typed when other VMs stop."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.console import Console
from pvefix.executor.neighbours import NodeVm, check_after_boot, check_host_reboot, startup_order
from pvefix.facts.api import MAPPINGS, NODE_VMS, VM_CONFIG
from pvefix.hosttree.mapping import PciMapping
from pvefix.planner.model import Phase
from pvefix.sources.common import vm_device_addresses
from pvefix.sources.remote_facts import mappings_from_api
from pvefix.state import HostState
from pvefix.target.nodes import RESOURCES, RESOURCES_PARAMS, listed_vms
from pvefix.target.privileges import AGENT_EXEC, key_privileges, missing_privileges
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

#: Writing a file in the guest through its agent (POST .../agent/file-write): Proxmox VE 9's
#: VM.GuestAgent.FileWrite (or Unrestricted), VM.Monitor before 9.
AGENT_FILE_WRITE = "VM.GuestAgent.FileWrite|" + "|".join(AGENT_EXEC)


def refuse_ha_restart(live: HostState, what: str) -> None:
    """An HA-managed VM (its HA state is not `ignored`) is not stopped or started by pvefix:
    qemu-server hands a shutdown or start of such a VM to the HA manager (API2/Qemu.pm:
    `ha-manager crm-command stop`, `ha-manager set --state started`), which acts later and, when
    a start fails, may retry it or start the VM on another node."""
    ha = live.vm.ha_state
    if not ha or ha == "ignored":
        return
    vmid = live.vm.vmid
    raise RefusedError(
        f"VM {vmid} is managed by HA (state {ha}): Proxmox hands its shutdown and start to the"
        " HA manager, which acts later on its own and may start it on another node, so pvefix"
        f" does not do {what} for it; nothing was written. Either run `ha-manager set"
        f" vm:{vmid} --state ignored`, apply with --restart, then `ha-manager set vm:{vmid}"
        " --state started`; or apply without --restart and restart it through HA yourself.",
        source=f"VM {vmid}")


def phase_privileges(vmid: int, phase: Phase, *, api_keys: bool, starts: bool,
                     agent: bool) -> dict[str, list[str]]:
    """path -> every privilege a token needs for the writes of `phase` (docs/connection.md's
    table): each VM config key through the API (`api_keys`: not `qm set` over SSH), a mapped
    device's Mapping.Use, guest files through the agent, and the start's VM.PowerMgmt. Host
    files go over SSH (or --local) and need no API privilege; keys only root@pam may set are
    refused elsewhere (`needs_root_pam`)."""
    wants: dict[str, list[str]] = {}

    def add(path: str, privs: Sequence[str]) -> None:
        have = wants.setdefault(path, [])
        have += [p for p in privs if p not in have]

    for change in phase.changes:
        if change.target == "vm-config" and api_keys and not change.needs_root_pam:
            for path, privs in key_privileges(vmid, change.key,
                                              [change.after, change.before]).items():
                add(path, privs)
        elif change.target == "guest-cmdline" and agent:
            add(f"/vms/{vmid}", [AGENT_FILE_WRITE, "|".join(AGENT_EXEC)])
    if starts:
        add(f"/vms/{vmid}", ["VM.PowerMgmt"])
    return wants


def restore_privileges(vmid: int, saved: str, now: str, *, api_keys: bool,
                       starts: bool) -> dict[str, list[str]]:
    """path -> every privilege a token needs to put the VM config `saved` back over `now`
    through the API (`api_keys`: not the file byte for byte over SSH): each key whose next-start
    value differs or waits in [PENDING], and the start's VM.PowerMgmt."""
    from pvefix.vmconfig.nextstart import NextStart

    wants: dict[str, list[str]] = {}
    if api_keys:
        snap = NextStart.from_text(saved, "snapshot")
        view = NextStart.from_text(now, f"VM {vmid} now")
        keys = {k for k in snap.values.keys() | view.values.keys()
                if snap.values.get(k) != view.values.get(k)}
        for key in sorted(keys | set(view.pending) | set(view.deletes)):
            values = [snap.values.get(key), view.values.get(key)]
            for path, privs in key_privileges(vmid, key, values).items():
                wants.setdefault(path, [])
                wants[path] += [p for p in privs if p not in wants[path]]
    if starts:
        wants.setdefault(f"/vms/{vmid}", []).append("VM.PowerMgmt")
    return wants


def refuse_missing_privileges(get: Callable[..., Any], live: HostState,
                              wants: Mapping[str, Sequence[str]], what: str) -> None:
    """A token that lacks a privilege the command needs (any planned write's, the restart's
    VM.PowerMgmt) is refused before anything is written, naming every one missing, not
    stopped half way. Asked only of API tokens: root@pam with a password holds every
    privilege."""
    if live.access.auth != "token" or not wants:
        return
    lacking = missing_privileges(get, wants, live.access.user)
    if lacking:
        raise RefusedError(
            f"{what} needs privileges this token lacks:\n  " + "\n  ".join(lacking)
            + "\nnothing was written", source=f"VM {live.vm.vmid}")


def guard_host_reboot(conn: Connection, sessions: Sessions, live: HostState, *,
                      stop_others: bool, start: bool, console: Console,
                      command: str, vms: list[NodeVm] | None = None) -> list[NodeVm]:
    """Refuse a host reboot that would hurt (RefusedError, nothing written); list the node's
    VMs (`vms`: already read); return the other running VMs pvefix stops first
    (--stop-others) and starts again."""
    vmid, node = live.vm.vmid, live.vm.node
    if conn.on_this_host:
        raise RefusedError(
            "--reboot-host with --local would reboot the host pvefix runs on, in the middle of"
            f" its own run; nothing was written. Run {command} without --reboot-host, reboot"
            f" the node yourself, then check it: pvefix check {vmid} --local",
            source=f"node {node}")
    refuse_ha_restart(live, "a host reboot")
    if vms is None:
        vms = node_vms(sessions.api().get, node)
    console.say(f"A host reboot stops every VM on {node}:")
    for v in vms:
        console.say_wrapped(f"  {v.describe()}", hang=4)  # under the VM, not a new one
    others = check_host_reboot(vms, vmid, stop_others)
    back = [v.vmid for v in others]
    if live.vm.status == "running" or start:
        back.append(vmid)
    check_after_boot(vms, back)
    return others


def confirm_reboot(console: Console, question: str, node: str, others: list[NodeVm],
                   refused: str = "dry run; --yes to apply", yes: str = "apply") -> None:
    """The admin's yes; when a host reboot stops other running VMs, the node's name typed in
    full (a `y` typed out of habit does not stop a whole node). `refused`: what a refusal adds
    in parentheses; `yes`: what --yes does (`--yes to apply`)."""
    if not others:
        if not console.confirm(question):
            raise RefusedError(f"not confirmed: nothing was written ({refused})")
        return
    stops = ", ".join(f"VM {v.vmid}" for v in others)
    typed = console.confirm_typed(
        f"{question} The host reboot also stops {stops} on node {node} (shut down cleanly,"
        " started again afterwards).", node)
    if typed is None:
        raise RefusedError(
            f"not confirmed: a host reboot that stops other VMs ({stops}) is confirmed by typing"
            f" the node's name at a terminal, and there is none (stdin is not a terminal); "
            f"nothing was written (--yes to {yes} without asking)", source=f"node {node}")
    if not typed:
        raise RefusedError(f"not confirmed: the node's name ({node}) was not typed; nothing "
                           f"was written ({refused})", source=f"node {node}")


def node_vms(get: Callable[[str, Mapping[str, str] | None], Any], node: str) -> list[NodeVm]:
    """The VMs of `node`, from the API (list, HA state, each config); `get`: an API GET."""
    items = get(*NODE_VMS.at(node)) or []
    ha: dict[int, str] = {}
    with contextlib.suppress(PvefixError):  # no right to the listing: HA states unknown
        listed = listed_vms(get(RESOURCES, RESOURCES_PARAMS))
        ha = {vmid: vm.hastate for vmid, vm in listed.items() if vm.hastate}
    try:
        mappings = mappings_from_api(get(*MAPPINGS.at()) or [])
    except PvefixError:
        mappings = []
    out: list[NodeVm] = []
    for item in sorted(items, key=lambda i: int(i.get("vmid", 0))):
        vmid = int(item["vmid"])
        cfg = get(*VM_CONFIG.at(node, vmid)) or {}
        gpus = [f"{k}: {v}" for k, v in sorted(cfg.items()) if HOSTPCI_KEY.match(str(k))]
        out.append(NodeVm(
            vmid=vmid, name=str(cfg.get("name") or item.get("name") or ""),
            status=str(item.get("status", "unknown")),
            lock=str(cfg["lock"]) if cfg.get("lock") else (
                str(item["lock"]) if item.get("lock") else None),
            hastate=ha.get(vmid), onboot=str(cfg.get("onboot", "0")) == "1",
            order=startup_order(cfg.get("startup")), gpus=gpus,
            devices=_devices(cfg, node, mappings)))
    return out


def _devices(cfg: dict[str, Any], node: str, mappings: list[PciMapping]) -> tuple[str, ...]:
    values = {str(k): str(v) for k, v in cfg.items() if HOSTPCI_KEY.match(str(k))}
    return tuple(vm_device_addresses(VMConfig.from_dicts(values), node, mappings, []))
