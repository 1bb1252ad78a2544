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
    """Each `PRIV on PATH` of `wants` that the API's caller lacks (`A|B`: any of them will
    do), from GET /access/permissions?path=PATH, one per path (Proxmox computes the caller's
    effective privileges there: propagation and a token's privilege separation). The
    whole-tree answer (no `path`) is not enough: it leaves out every path where the caller
    holds nothing, so a `NoAccess` entry below a granting one would not show. An answer pvefix
    cannot read lacks nothing: the write then meets Proxmox's own check."""
    out: list[str] = []
    for path, privs in wants.items():
        try:
            have = (get("/access/permissions", {"path": path}) or {}).get(path) or {}
        except PvefixError:  # a pre-check only: Proxmox still checks the write itself
            continue
        for priv in privs:  # the value is Proxmox's propagate flag: 0 is still held
            if not any(one in have for one in priv.split("|")):
                text = f"Permission check failed ({path}, {priv})"
                out.append(f"{priv} on {path}{permission_hint(text, who)}")
    return out


# What a VM config key needs on /vms/VMID when a token sets or deletes it, as Proxmox VE's
# qemu-server checks it (API2/Qemu.pm, the config-modify check and its hostpci/usb helpers).
# Keys not named here that no privilege covers (args, hookscript, affinity, lock, ...) are
# root@pam's alone: the planner marks them `needs_root_pam`.
KEY_PRIVILEGE: dict[str, str] = {
    **dict.fromkeys(("cores", "cpu", "runningcpu", "cpulimit", "cpuunits", "numa", "smp",
                     "sockets", "vcpus"), "VM.Config.CPU"),
    **dict.fromkeys(("memory", "balloon", "shares", "allow-ksm"), "VM.Config.Memory"),
    **dict.fromkeys(("acpi", "hotplug", "kvm", "machine", "runningmachine", "scsihw", "smbios1",
                     "tablet", "vga", "watchdog", "audio0", "rng0"), "VM.Config.HWType"),
    **dict.fromkeys(("agent", "autostart", "bios", "description", "keyboard", "localtime",
                     "migrate_downtime", "migrate_speed", "name", "onboot", "ostype",
                     "protection", "reboot", "startdate", "startup", "tdf", "template"),
                    "VM.Config.Options"),
    "freeze": "VM.PowerMgmt",
    **dict.fromkeys(("boot", "bootdisk", "vmstatestorage"), "VM.Config.Disk"),
}
_DRIVE = re.compile(r"(ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0|cdrom")
_PATTERNED = ((re.compile(r"numa\d+"), "VM.Config.CPU"),
              (re.compile(r"net\d+"), "VM.Config.Network"),
              (re.compile(r"ipconfig\d+"), "VM.Config.Cloudinit|VM.Config.Network"))
_CLOUDINIT = frozenset({"cicustom", "cipassword", "citype", "ciuser", "ciupgrade", "nameserver",
                        "searchdomain", "sshkeys"})
_MAPPED = re.compile(r"(?:^|,)mapping=([^,]+)")


def key_privileges(vmid: int, key: str, values: Sequence[str | None]) -> dict[str, list[str]]:
    """path -> privileges a token needs to set or delete VM config `key` (its `values`: the
    value written and the one replaced, for a device key whose mapping is checked too); `A|B`
    means any of them. Empty where no privilege can do it (root@pam's alone)."""
    vm = f"/vms/{vmid}"
    if key.startswith(("hostpci", "usb")) and key[len(key.rstrip("0123456789")):].isdigit():
        kind = "pci" if key.startswith("hostpci") else "usb"
        out: dict[str, list[str]] = {vm: ["VM.Config.HWType"]}
        for value in values:
            found = _MAPPED.search(value or "")
            if found:
                out.setdefault(f"/mapping/{kind}/{found.group(1)}", []).append("Mapping.Use")
        return out
    if _DRIVE.fullmatch(key):
        return {vm: ["VM.Config.Disk"]}
    priv = KEY_PRIVILEGE.get(key) or next(
        (p for pattern, p in _PATTERNED if pattern.fullmatch(key)), None)
    if priv is None and key in _CLOUDINIT:
        priv = "VM.Config.Cloudinit|VM.Config.Network"
    if priv is None:
        return {}
    return {vm: [priv], **({"/": ["Sys.Modify"]} if key == "startup" else {})}


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
