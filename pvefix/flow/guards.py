"""Refusals shared by the apply and rollback flows, made before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pvefix.errors import RefusedError
from pvefix.planner.model import Phase
from pvefix.state import HostState
from pvefix.target.privileges import AGENT_EXEC, key_privileges, missing_privileges

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
        source=f"VM {vmid}",
    )


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
