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
        for priv in privs:
            if not have.get(priv):
                text = f"Permission check failed ({path}, {priv})"
                out.append(f"{priv} on {path}{permission_hint(text, who)}")
    return out
