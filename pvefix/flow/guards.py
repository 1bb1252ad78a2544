"""Refusals shared by the apply and rollback flows, made before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pvefix.errors import RefusedError
from pvefix.state import HostState
from pvefix.target.privileges import missing_privileges


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


def refuse_missing_privileges(get: Callable[..., Any], live: HostState,
                              wants: Mapping[str, Sequence[str]], what: str) -> None:
    """A token that lacks a privilege the command will need after writing (the restart's
    VM.PowerMgmt) is refused before anything is written, not stopped half way. Asked only of
    API tokens: root@pam with a password holds every privilege."""
    if live.access.auth != "token" or not wants:
        return
    lacking = missing_privileges(get, wants, live.access.user)
    if lacking:
        raise RefusedError(
            f"{what} needs privileges this token lacks:\n  " + "\n  ".join(lacking)
            + "\nnothing was written", source=f"VM {live.vm.vmid}")
