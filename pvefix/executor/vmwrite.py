"""The VM config as the executor reads it (the next start's model: values, pending, digest)
and the two ways to write it: the API (with the digest, waiting for the task) or `qm set` as
root over SSH (for changes only root@pam may make when the connection is an API token)."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from pvefix.console.progress import waiting
from pvefix.errors import PvefixError, RefusedError
from pvefix.target.api import ApiError
from pvefix.target.node import ReopeningNode
from pvefix.target.sessions import Sessions
from pvefix.target.tasks import TaskFailed, Warn, run_task, stderr
from pvefix.vmconfig.nextstart import NextStart
from pvefix.vmconfig.qmset import qm_set_argv

DIGEST_MISMATCH = "checksum mismatch"


def read_vm(sessions: Sessions, node: str, vmid: int) -> NextStart:
    """GET .../pending on `node`: one round trip gives values, pending values and the digest
    (the next start's model, pvefix.vmconfig.nextstart)."""
    api = sessions.api()
    rows = api.get(f"/nodes/{node}/qemu/{vmid}/pending") or []
    view = NextStart.from_rows(rows)
    if not view.digest:
        config = api.get(f"/nodes/{node}/qemu/{vmid}/config", {"current": "1"}) or {}
        view = replace(view, digest=str(config.get("digest", "")))
    return view


def digest_of(view: NextStart) -> str:
    """The digest a write is guarded by (empty when the API gave none)."""
    return view.digest or ""


class VmWriter(Protocol):
    """Writes one set of config parameters, guarded by the digest."""

    name: str

    def write(self, params: dict[str, str], digest: str) -> None: ...


def _refuse_if_moved(message: str, vmid: int) -> None:
    if DIGEST_MISMATCH in message:
        raise RefusedError(
            f"VM {vmid}: its config changed since pvefix read it (Proxmox: 'checksum mismatch "
            "(file change by other user?)'); pvefix does not write over someone else's edit",
            source=f"VM {vmid}")


class ApiVmWriter:
    """POST .../config with the digest; waits for the task and checks its exit status
    (`warn`: where its progress and warnings are shown)."""

    name = "api"

    def __init__(self, sessions: Sessions, node: str, vmid: int, task_timeout: float,
                 warn: Warn = stderr) -> None:
        self.sessions = sessions
        self.node = node
        self.vmid = vmid
        self.task_timeout = task_timeout
        self.warn = warn

    def write(self, params: dict[str, str], digest: str) -> None:
        path = f"/nodes/{self.node}/qemu/{self.vmid}/config"
        try:
            with waiting(f"VM {self.vmid}", "the config write task", self.warn):
                run_task(self.sessions.api(), self.node, path, {**params, "digest": digest},
                         self.task_timeout, self.warn)
        except ApiError as exc:
            _refuse_if_moved(exc.message, self.vmid)
            raise
        except TaskFailed as exc:
            _refuse_if_moved(exc.exitstatus, self.vmid)
            raise


class QmVmWriter:
    """`qm set` as root over SSH: what root@pam may do, for a token connection."""

    name = "qm set over SSH"

    def __init__(self, host: ReopeningNode, vmid: int) -> None:
        self.host = host
        self.vmid = vmid

    def write(self, params: dict[str, str], digest: str) -> None:
        result = self.host.run_in_time(qm_set_argv(self.vmid, params, digest))
        if not result.ok:
            message = (result.stderr or result.stdout).strip()
            _refuse_if_moved(message, self.vmid)
            raise PvefixError(f"qm set exited with {result.exit_code}: {message}",
                              source=f"VM {self.vmid}")
