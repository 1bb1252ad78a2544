"""Privileges, roles and ACLs as Proxmox VE's access control computes them.

pvefix's own table of Proxmox's built-in roles (pve-access-control builds them from privilege
groups: each category's root/admin/user/audit privileges; `PVE<Cat>Admin` = admin+user+audit,
`PVE<Cat>User` = user+audit for categories with user privileges, `PVEAuditor` = every audit
privilege, `PVEAdmin` = every admin+user+audit privilege except Mapping.Modify, `Administrator`
= everything). ACL entries (`acl:PROPAGATE:PATHS:UGIDS:ROLES:` in user.cfg) apply to their path
and, when they propagate, below it; a deeper entry replaces what the path above gave. root@pam
and tokens without privilege separation of root@pam have every privilege; a token with
privilege separation has only what its own ACL entries give it.

A failed check is Proxmox's 403 `Permission check failed (PATH, PRIV)`, with `A|B` when any of
several privileges would do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pvefix.sim.errors import ApiError
from pvefix.target.privileges import KEY_PRIVILEGE

# category -> (root-only, admin, user, audit) privileges
_GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "VM": (
        (),
        ("VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network",
         "VM.Config.HWType", "VM.Config.Options", "VM.Allocate", "VM.Clone",
         "VM.GuestAgent.Unrestricted", "VM.Migrate", "VM.Replicate", "VM.Snapshot",
         "VM.Snapshot.Rollback"),
        ("VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup",
         "VM.GuestAgent.FileRead", "VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite",
         "VM.PowerMgmt"),
        ("VM.Audit", "VM.GuestAgent.Audit"),
    ),
    "Sys": (
        ("Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"),
        ("Sys.Console", "Sys.Syslog"),
        (),
        ("Sys.Audit",),
    ),
    "Datastore": (
        (),
        ("Datastore.Allocate", "Datastore.AllocateTemplate"),
        ("Datastore.AllocateSpace",),
        ("Datastore.Audit",),
    ),
    "SDN": ((), ("SDN.Allocate", "SDN.Audit"), ("SDN.Use",), ("SDN.Audit",)),
    "User": (("Realm.Allocate",), ("User.Modify", "Group.Allocate", "Realm.AllocateUser"), (),
             ()),
    "Pool": ((), ("Pool.Allocate",), ("Pool.Audit",), ("Pool.Audit",)),
    "Mapping": ((), ("Mapping.Modify",), ("Mapping.Use",), ("Mapping.Audit",)),
}


def _build_roles() -> dict[str, frozenset[str]]:
    roles: dict[str, set[str]] = {"NoAccess": set(), "PVEAuditor": set(), "PVEAdmin": set(),
                                  "Administrator": {"Permissions.Modify"}}
    for cat, (root, admin, user, audit) in _GROUPS.items():
        roles["Administrator"].update(root, admin, user, audit)
        roles[f"PVE{cat}Admin"] = {*admin, *user, *audit}
        roles["PVEAdmin"].update(admin, user, audit)
        if user:
            roles[f"PVE{cat}User"] = {*user, *audit}
        roles["PVEAuditor"].update(audit)
    roles["PVEAdmin"].discard("Mapping.Modify")
    roles["PVETemplateUser"] = {"VM.Clone", "VM.Audit"}
    return {name: frozenset(privs) for name, privs in roles.items()}


ROLES = _build_roles()
ALL_PRIVILEGES = ROLES["Administrator"]

# The privilege-separated token every simulated node has (as pve-api's harness makes one).
PRIVSEP_TOKEN_ID = "root@pam!privsep"  # noqa: S105 (an id, not a secret)


@dataclass(frozen=True)
class AclEntry:
    path: str
    ugid: str  # a user, `@group` or a token id
    role: str
    propagate: bool = True


PRIVSEP_TOKEN_ACL = (
    AclEntry("/vms", PRIVSEP_TOKEN_ID, "PVEVMAdmin"),
    AclEntry("/mapping/pci", PRIVSEP_TOKEN_ID, "PVEMappingUser"),
)


def parse_user_cfg_acls(text: str) -> list[AclEntry]:
    """The `acl:` lines of /etc/pve/user.cfg (other lines are not the simulator's business)."""
    out: list[AclEntry] = []
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) < 5 or parts[0] != "acl":
            continue
        propagate = parts[1] != "0"
        for path in filter(None, parts[2].split(",")):
            for ugid in filter(None, parts[3].split(",")):
                for role in filter(None, parts[4].split(",")):
                    out.append(AclEntry(_normalize(path), ugid, role, propagate))
    return out


def _normalize(path: str) -> str:
    return "/" + "/".join(p for p in path.split("/") if p)


@dataclass
class AccessControl:
    """Who may do what: the ACL entries and which tokens are privilege-separated. With
    `user_cfg`, that file's `acl:` lines are read again whenever it changes (an admin's
    `pveum acl modify` on a running node), after the fixed `acls`."""

    fixed: list[AclEntry] = field(default_factory=list)
    privsep_tokens: set[str] = field(default_factory=set)
    user_cfg: Path | None = None
    _seen: tuple[tuple[int, int] | None, list[AclEntry]] = (None, [])

    @property
    def acls(self) -> list[AclEntry]:
        if self.user_cfg is None:
            return self.fixed
        try:
            st = self.user_cfg.stat()
            key: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        if key != self._seen[0]:
            text = self.user_cfg.read_text(errors="replace") if key else ""
            self._seen = (key, parse_user_cfg_acls(text))
        return [*self._seen[1], *self.fixed]

    def privileges(self, authuser: str, path: str) -> frozenset[str]:
        """RPCEnvironment::permissions: the privileges `authuser` has on `path`."""
        user, _, token = authuser.partition("!")
        if authuser == "root@pam" or (token and authuser not in self.privsep_tokens
                                      and user == "root@pam"):
            return ALL_PRIVILEGES
        if token and authuser not in self.privsep_tokens:
            return self._compiled(user, path)
        if token:  # privilege separation: the token's ACLs within its user's privileges
            return self._compiled(authuser, path) & self.privileges(user, path)
        return self._compiled(authuser, path)

    def _compiled(self, ugid: str, path: str) -> frozenset[str]:
        parts = [p for p in _normalize(path).split("/") if p]
        found: frozenset[str] = frozenset()
        acls = self.acls
        for depth in range(len(parts) + 1):
            here = "/" + "/".join(parts[:depth])
            entries = [a for a in acls if a.ugid == ugid and a.path == here
                       and (a.propagate or depth == len(parts))]
            if entries:
                privs: set[str] = set()
                for entry in entries:
                    privs.update(ROLES.get(entry.role, frozenset()))
                found = frozenset(privs)
        return found

    def effective(self, authuser: str, path: str) -> dict[str, int]:
        """GET /access/permissions?path=PATH: each privilege `authuser` has there, with 1 where
        it reaches below PATH (Proxmox's "propagate boolean"; 0 where it comes from an entry on
        PATH itself that does not propagate)."""
        privs = self.privileges(authuser, path)
        user, _, token = authuser.partition("!")
        here = _normalize(path)
        kept = [a for a in self.acls if a.path == here and not a.propagate
                and a.ugid in (authuser, user if not token else authuser)]
        local = set().union(*(ROLES.get(a.role, frozenset()) for a in kept)) if kept else set()
        return {priv: 0 if priv in local else 1 for priv in sorted(privs)}

    def allowed(self, authuser: str, path: str, privs: Iterable[str], any_: bool = False) -> bool:
        have = self.privileges(authuser, path)
        wanted = list(privs)
        return any(p in have for p in wanted) if any_ else all(p in have for p in wanted)

    def check(self, authuser: str, path: str, privs: Sequence[str], any_: bool = False) -> None:
        """RPCEnvironment::check / check_any: 403 with Proxmox's text when not allowed."""
        have = self.privileges(authuser, path)
        if any_:
            if not any(p in have for p in privs):
                raise ApiError(403, f"Permission check failed ({path}, {'|'.join(privs)})")
            return
        for priv in privs:
            if priv not in have:
                raise ApiError(403, f"Permission check failed ({path}, {priv})")


# -- what a config key needs (qemu-server's check_vm_modify_config_perm) ---------------------

_KEY_PRIVS = KEY_PRIVILEGE  # the pre-check's table: one place (pvefix.target.privileges)
_CLOUDINIT = frozenset({"cicustom", "cipassword", "citype", "ciuser", "ciupgrade", "nameserver",
                        "searchdomain", "sshkeys"})
_DRIVE_RE = re.compile(r"(ide|sata|scsi|virtio)\d+|efidisk0|tpmstate0")
_OWN_CHECK_RE = re.compile(r"(unused|serial|usb|hostpci|virtiofs)\d+")
CONFIG_PRIVS = ("VM.Config.Disk", "VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Memory",
                "VM.Config.Network", "VM.Config.HWType", "VM.Config.Options",
                "VM.Config.Cloudinit")


def check_config_keys(access: AccessControl, authuser: str, vmid: int,
                      keys: Iterable[str]) -> None:
    """The privilege each changed key needs on /vms/VMID; keys no privilege covers (args,
    affinity, hugepages, lock, ...) are root@pam's alone: 500 `only root can set 'X' config`."""
    if authuser == "root@pam":
        return
    path = f"/vms/{vmid}"
    for key in keys:
        if _DRIVE_RE.fullmatch(key) or key in ("cdrom", "tags") or _OWN_CHECK_RE.fullmatch(key):
            if _DRIVE_RE.fullmatch(key):
                access.check(authuser, path, ["VM.Config.Disk"])
            continue
        priv = _KEY_PRIVS.get(key)
        if priv is None and re.fullmatch(r"numa\d+", key):
            priv = "VM.Config.CPU"
        if priv is not None:
            access.check(authuser, path, [priv])
            if key == "startup":
                access.check(authuser, "/", ["Sys.Modify"])
        elif re.fullmatch(r"net\d+", key):
            access.check(authuser, path, ["VM.Config.Network"])
        elif key in _CLOUDINIT or re.fullmatch(r"ipconfig\d+", key):
            access.check(authuser, path, ["VM.Config.Cloudinit", "VM.Config.Network"], True)
        elif key == "vmstate":
            access.check(authuser, path, ["VM.Config.Disk", "VM.PowerMgmt"])
        else:
            raise ApiError(500, f"only root can set '{key}' config")


# -- the login answer's `cap` (RPCEnvironment::compute_api_permission) -----------------------

_CAP_FILTERS = {
    "vms": r"VM\.|Permissions\.Modify",
    "access": r"(User|Group)\.|Permissions\.Modify",
    "storage": r"Datastore\.|Permissions\.Modify",
    "nodes": r"Sys\.|Permissions\.Modify",
    "sdn": r"SDN\.|Permissions\.Modify",
    "dc": r"Sys\.Audit|Sys\.Modify|SDN\.",
    "mapping": r"Mapping\.|Permissions.Modify",
}
#: The paths GET /access/permissions always reports (RPCEnvironment get_effective_permissions),
#: beside every path an ACL names.
TOP_PATHS = ("/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms")
_CAP_PATHS = ("/", "/nodes", "/access/groups", "/vms", "/storage", "/sdn", "/mapping")


def capabilities(access: AccessControl, authuser: str) -> dict[str, dict[str, int]]:
    """What the GUI may offer: per top-level path, the privileges held there or on any ACL
    path below it, filtered to that area's privileges."""
    out: dict[str, dict[str, int]] = {area: {} for area in _CAP_FILTERS}
    paths = dict.fromkeys([*_CAP_PATHS, *(a.path for a in access.acls)])
    for path in paths:
        top = path.split("/")[1] if path != "/" else "dc"
        regex = _CAP_FILTERS.get(top)
        if regex is None:
            continue
        for priv in access.privileges(authuser, path):
            if re.match(f"({regex})", priv):
                out[top][priv] = 1
    return out
