"""The VM config as the executor sees it (values, pending, digest) and the two ways to write it:
the API (with the digest, waiting for the task) or `qm set` as root over SSH (for changes only
root@pam may make when the connection is an API token)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Protocol

from pvefix.console.progress import waiting
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.remote import Remote, TaskFailed
from pvefix.target.api import ApiError

DIGEST_MISMATCH = "checksum mismatch"


@dataclass(frozen=True)
class VmView:
    """One read of a VM's config through the API: current values, pending ones, the digest."""

    digest: str
    main: dict[str, str]
    pending: dict[str, str] = field(default_factory=dict)
    deletes: frozenset[str] = frozenset()

    def effective(self, key: str) -> str | None:
        """The value the VM will have at its next cold start."""
        if key in self.deletes:
            return None
        if key in self.pending:
            return self.pending[key]
        return self.main.get(key)

    def is_pending(self, key: str) -> bool:
        return key in self.pending or key in self.deletes


def read_vm(remote: Remote, vmid: int) -> VmView:
    """GET .../pending: one round trip gives values, pending values and the digest."""
    rows = remote.get(f"/nodes/{remote.node}/qemu/{vmid}/pending") or []
    main: dict[str, str] = {}
    pending: dict[str, str] = {}
    deletes: set[str] = set()
    digest = ""
    for row in rows:
        key = str(row.get("key"))
        if key == "digest":
            digest = str(row.get("value", ""))
            continue
        if "value" in row:
            main[key] = str(row["value"])
        if "pending" in row:
            pending[key] = str(row["pending"])
        if row.get("delete"):
            deletes.add(key)
    if not digest:
        config = remote.get(f"/nodes/{remote.node}/qemu/{vmid}/config", {"current": "1"}) or {}
        digest = str(config.get("digest", ""))
    return VmView(digest=digest, main=main, pending=pending, deletes=frozenset(deletes))


class VmWriter(Protocol):
    """Writes one set of config parameters, guarded by the digest."""

    name: str

    def write(self, params: dict[str, str], digest: str) -> None: ...


def _refuse_if_moved(message: str, vmid: int) -> None:
    if DIGEST_MISMATCH in message:
        raise RefusedError(
            f"VM {vmid}: its config changed since pvefix read it (Proxmox: 'checksum mismatch "
            "(file change by other user?)'); pvefix does not write over someone else's edit",
            source=f"VM {vmid}",
        )


class ApiVmWriter:
    """POST .../config with the digest; waits for the task and checks its exit status."""

    name = "api"

    def __init__(self, remote: Remote, vmid: int, task_timeout: float) -> None:
        self.remote = remote
        self.vmid = vmid
        self.task_timeout = task_timeout

    def write(self, params: dict[str, str], digest: str) -> None:
        path = f"/nodes/{self.remote.node}/qemu/{self.vmid}/config"
        try:
            with waiting(f"VM {self.vmid}", "the config write task", self.remote.on_warning):
                self.remote.run_task(path, {**params, "digest": digest}, self.task_timeout)
        except ApiError as exc:
            _refuse_if_moved(exc.message, self.vmid)
            raise
        except TaskFailed as exc:
            _refuse_if_moved(exc.exitstatus, self.vmid)
            raise


def qm_set_argv(vmid: int, params: dict[str, str], digest: str | None) -> list[str]:
    """`qm set VMID --key value ... --digest D` as an argument list."""
    argv = ["qm", "set", str(vmid)]
    for key, value in params.items():
        argv += [f"--{key}", value]
    if digest:
        argv += ["--digest", digest]
    return argv


def qm_set_command(vmid: int, params: dict[str, str], digest: str | None = None) -> str:
    """The same command as one shell line, every argument quoted."""
    return shlex.join(qm_set_argv(vmid, params, digest))


class QmVmWriter:
    """`qm set` as root over SSH: what root@pam may do, for a token connection."""

    name = "qm set over SSH"

    def __init__(self, remote: Remote, vmid: int) -> None:
        self.remote = remote
        self.vmid = vmid

    def write(self, params: dict[str, str], digest: str) -> None:
        result = self.remote.run(qm_set_argv(self.vmid, params, digest))
        if not result.ok:
            message = (result.stderr or result.stdout).strip()
            _refuse_if_moved(message, self.vmid)
            raise PvefixError(f"qm set exited with {result.exit_code}: {message}",
                              source=f"VM {self.vmid}")
