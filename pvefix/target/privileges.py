"""What Proxmox's privilege checks refuse, and what to grant: one place for pvefix's hints.

Proxmox VE (PVE::RPCEnvironment) answers a missing privilege with HTTP 403 `Permission check
failed (PATH, PRIV)`, and lists to a privilege-separated API token only the guests its ACLs let
it audit. docs/connection.md has the least privileges of each command, measured against
Proxmox's own API daemons (tests/conformance/test_real_api_privileges.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pvefix.errors import PvefixError

# Proxmox's 403 text: "Permission check failed (PATH, PRIV)" (PVE::RPCEnvironment check_*);
# PRIV may be "A|B" (any of them) or "A, B" in some handlers.
_PERMISSION = re.compile(r"Permission check failed \((?P<path>/[^,)]*), (?P<privs>[^)]+)\)")
# The smallest built-in role of Proxmox VE (pve-access-control) that holds each privilege.
_ROLE_FOR = (("Sys.", "PVEAuditor"), ("VM.Audit", "PVEAuditor"),
             ("VM.PowerMgmt", "PVEVMUser"), ("VM.Console", "PVEVMUser"),
             ("Mapping.Audit", "PVEAuditor"), ("Mapping.Use", "PVEMappingUser"),
             ("VM.GuestAgent.Unrestricted", "PVEVMAdmin"), ("VM.GuestAgent.", "PVEVMUser"),
             ("Mapping.", "PVEMappingAdmin"), ("VM.", "PVEVMAdmin"),
             ("Datastore.Audit", "PVEAuditor"), ("Datastore.", "PVEDatastoreUser"))


def permission_hint(text: str, who: str | None) -> str:
    """What to grant, after Proxmox's 403 text: the privilege, the path and a role with it."""
    found = _PERMISSION.search(text)
    if found is None:
        return ""
    path, privs = found["path"], found["privs"].strip()
    first = re.split(r"[|,]", privs)[0].strip()
    role = next((r for prefix, r in _ROLE_FOR if first.startswith(prefix)), "a role with it")
    grantee = f"--tokens '{who}'" if who and "!" in who else f"--users '{who or 'USER'}'"
    return (f" (the API {'token' if who and '!' in who else 'user'} lacks {privs} on {path}:"
            f" e.g. `pveum acl modify {path} {grantee} --roles {role}`; docs/connection.md"
            " lists what each command needs)")


def unseen_vm_hint(vmid: int, who: str | None) -> str:
    """Why a token may not see a VM that exists: Proxmox lists to a privilege-separated token
    only what its ACLs let it audit (an empty /cluster/resources without any)."""
    if not (who and "!" in who):
        return ""
    return (f"; an API token sees only the VMs its ACLs allow: if VM {vmid} exists, give {who}"
            f" VM.Audit on /vms/{vmid} (e.g. `pveum acl modify /vms/{vmid} --tokens '{who}'"
            " --roles PVEAuditor`; docs/connection.md lists what each command needs)")


def missing_privileges(get: Callable[..., Any], wants: Mapping[str, Sequence[str]],
                       who: str | None) -> list[str]:
    """Each `PRIV on PATH` of `wants` that the API's caller lacks, from GET /access/permissions
    (the caller's effective privileges at each path: Proxmox applies propagation and a token's
    privilege separation itself). An answer pvefix cannot read lacks nothing: the write then
    meets Proxmox's own check."""
    out: list[str] = []
    for path, privs in wants.items():
        try:
            have = (get("/access/permissions", {"path": path}) or {}).get(path) or {}
        except PvefixError:  # a pre-check only: Proxmox still checks the write itself
            continue
        for priv in privs:  # the value is Proxmox's propagate flag: 0 is still held
            if priv not in have:
                text = f"Permission check failed ({path}, {priv})"
                out.append(f"{priv} on {path}{permission_hint(text, who)}")
    return out


#: Running a command in the guest through its agent (POST .../agent/exec): Proxmox VE 9 checks
#: VM.GuestAgent.Unrestricted (qemu-server API2/Qemu/Agent.pm; file-write and file-read also
#: accept it); before 9, every agent command checked VM.Monitor (pve8to9's check of custom roles:
#: "replaced ... 'VM.Monitor' ... with ... new dedicated 'VM.GuestAgent.*' privileges").
AGENT_EXEC = ("VM.GuestAgent.Unrestricted", "VM.Monitor")


def agent_exec_refusal(get: Callable[..., Any], vmid: int, who: str | None) -> str | None:
    """Why a token may not run the probe in VM `vmid`'s guest through its agent, asked before
    anything is written there (the agent's file-write needs less than its exec, so a token
    without the exec right would leave the probe's file behind); None when it may, when the
    caller is not a token, or when the answer cannot be read (Proxmox then checks itself)."""
    if not (who and "!" in who):
        return None
    path = f"/vms/{vmid}"
    try:
        have = (get("/access/permissions", {"path": path}) or {}).get(path) or {}
    except PvefixError:
        return None
    if any(priv in have for priv in AGENT_EXEC):
        return None
    hint = permission_hint(f"Permission check failed ({path}, {AGENT_EXEC[0]})", who)
    return (f"running the probe through the QEMU guest agent of VM {vmid} needs"
            f" {AGENT_EXEC[0]} on {path} (VM.Monitor before Proxmox VE 9){hint}; nothing was"
            " written in the guest")
