"""Snapshots: one folder per apply in the state directory, holding what is needed to put the
target back exactly as it was.

    <state>/snapshots/<cluster>/<id>/   keyed by the cluster's identity (`cluster-NAME`, or
                                        `node-NAME` for a standalone host); snapshots of
                                        earlier versions sit at <state>/snapshots/<id>/ and
                                        are still found and rolled back
        meta.json        what the snapshot holds (pvefix.snapshot/v1), no secrets
        vm.conf          the VM config as stored (raw file over SSH, else rebuilt from the API)
        pending.json     the pending changes at that time
        plan.json        the plan the apply followed
        files/<name>     host files (guest files as files/guest__<name>), with their SHA-256
                         in meta.json
        journal.jsonl    every step, recorded before and after it ran
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pvefix import __version__
from pvefix.digest import sha256_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor.journal import JOURNAL_FILE, Hook, Journal, Record, read_journal
from pvefix.paths import PROC_CMDLINE
from pvefix.planner.model import Plan
from pvefix.state import HostState, PendingItem
from pvefix.store.statedir import ensure_private_dir, read_private_text, write_private
from pvefix.target.identity import SEPARATOR, name_of

SNAPSHOT_SCHEMA = "pvefix.snapshot/v1"
SNAPSHOTS = "snapshots"
VM_FILE = "vm.conf"
PENDING_FILE = "pending.json"
PLAN_FILE = "plan.json"
META_FILE = "meta.json"
FILES_DIR = "files"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileRecord(_Frozen):
    """One file as it was: its path on the target, SHA-256 (None: absent), where it is kept."""

    path: str
    sha256: str | None
    stored_as: str | None = None
    restorable: bool = Field(True, description="False for /proc/cmdline (a fact, not a file)"
                             " and for a file not read")
    read: bool = Field(True, description="False: not read (no SSH): `sha256` None then says"
                       " nothing, the file is neither compared nor restored")


class VmRecord(_Frozen):
    digest: str
    config_source: str
    status: str
    running_machine: str | None = None
    lock: str | None = None
    pending: list[PendingItem] = Field(default_factory=list)


class SnapshotMeta(_Frozen):
    """What a snapshot holds. Never secrets: the target is named, not its credentials."""

    schema_: str = Field(default=SNAPSHOT_SCHEMA, alias="schema")
    id: str
    created_at: str
    pvefix_version: str
    node: str
    vmid: int
    phase: int
    target: dict[str, str | int | None]
    vm: VmRecord
    files: list[FileRecord]
    guest_files: list[FileRecord] = Field(default_factory=list)
    pve_snapshot: str | None = None
    cluster: str | None = Field(default=None, description="cluster identity (None: older)")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def created(self) -> str:
        """When it was taken, as the text shows it: `2026-12-06 11:34:22Z` (UTC, to the
        second; the stored `created_at` keeps the microseconds), or as stored if unreadable."""
        from datetime import UTC, datetime

        try:
            when = datetime.fromisoformat(self.created_at)
        except ValueError:
            return self.created_at
        if when.tzinfo is None:
            return when.strftime("%Y-%m-%d %H:%M:%S")
        return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")

    def holds(self) -> list[str]:
        items = [f"VM {self.vmid} config ({self.vm.config_source}, digest {self.vm.digest[:12]})"]
        items += [f.path for f in self.files if f.restorable and f.sha256 is not None]
        items += [f"guest {f.path}" for f in self.guest_files if f.restorable and f.sha256]
        if self.pve_snapshot:
            items.append(f"Proxmox snapshot {self.pve_snapshot}")
        return items


def _stored_name(path: str) -> str:
    return path.strip("/").replace("/", "__")


class Snapshot:
    """A snapshot folder on disk."""

    def __init__(self, path: Path, meta: SnapshotMeta) -> None:
        self.path = path
        self.meta = meta

    @property
    def id(self) -> str:
        return self.meta.id

    def vm_config_text(self) -> str:
        return read_private_text(self.path / VM_FILE, "surrogateescape")

    def file_text(self, path: str) -> str | None:
        """The snapshot's copy of a target file (None when it did not exist)."""
        for record in self.meta.files:
            if record.path == path:
                if record.stored_as is None:
                    return None
                stored = self.path / FILES_DIR / record.stored_as
                return read_private_text(stored, "surrogateescape")
        raise PvefixError(f"the snapshot does not hold {path}", source=str(self.path))

    def guest_file_text(self, path: str) -> str | None:
        """The snapshot's copy of a guest file (None when it did not exist)."""
        for record in self.meta.guest_files:
            if record.path == path:
                if record.stored_as is None:
                    return None
                stored = self.path / FILES_DIR / record.stored_as
                return read_private_text(stored, "surrogateescape")
        raise PvefixError(f"the snapshot holds no guest {path} (was the guest read?)",
                          source=str(self.path))

    def file_record(self, path: str) -> FileRecord | None:
        return next((f for f in self.meta.files if f.path == path), None)

    def plan(self) -> Plan:
        data = json.loads(read_private_text(self.path / PLAN_FILE))
        data.pop("created_at", None)
        return Plan.model_validate(data)

    def journal(self, hook: Hook | None = None) -> Journal:
        return Journal(self.path / JOURNAL_FILE, hook)

    def records(self) -> list[Record]:
        return read_journal(self.path / JOURNAL_FILE)

    def status(self) -> str:
        """taken, interrupted (an apply without its end: kill -9, power cut), applied,
        undone, failed, rolled-back."""
        status = "taken"
        for record in self.records():
            event = record["event"]
            if event == "apply-start":
                status = "interrupted"
            elif event == "apply-end":
                status = str(record.get("status", "failed"))
            elif event == "rollback-begin":
                status = "rollback-interrupted"
            elif event == "rollback-end":
                status = "rolled-back"
        return status


def new_snapshot_id(vmid: int, phase: int, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-vm{vmid}-p{phase}-{secrets.token_hex(2)}"


def _host_records(state: HostState, files_dir: Path) -> list[FileRecord]:
    """The node's files, each kept in `files_dir`; without SSH each is recorded as not read
    (its text None there means nothing, never "absent")."""
    records: list[FileRecord] = []
    read = state.host_files_read
    for path in sorted(state.files):
        fact = state.files[path]
        stored = None
        if fact.text is not None:
            stored = _stored_name(path)
            write_private(files_dir / stored, fact.text.encode("utf-8", "surrogateescape"))
        records.append(FileRecord(
            path=path, sha256=None if fact.text is None else sha256_text(fact.text),
            stored_as=stored, restorable=read and path != PROC_CMDLINE, read=read))
    return records


def take_snapshot(
    state_dir: Path,
    state: HostState,
    plan: Plan,
    phase: int,
    target: dict[str, str | int | None],
    pve_snapshot: str | None = None,
    *,
    cluster: str | None = None,
) -> Snapshot:
    """Write a snapshot of `state` (read live just before) and return it. Every file 0600."""
    vm = state.vm
    now = datetime.now(UTC)
    snap_id = new_snapshot_id(vm.vmid, phase, now)
    ensure_private_dir(state_dir)
    folder = ensure_private_dir(state_dir / SNAPSHOTS)
    if cluster is not None:
        folder = ensure_private_dir(folder / cluster)
    folder = ensure_private_dir(folder / snap_id)
    files_dir = ensure_private_dir(folder / FILES_DIR)
    write_private(folder / VM_FILE, vm.config_text.encode("utf-8", "surrogateescape"))
    pending = [p.model_dump() for p in vm.pending]
    write_private(folder / PENDING_FILE, (json.dumps(pending, indent=2) + "\n").encode())
    plan_data = plan.to_json_dict()
    write_private(folder / PLAN_FILE, (json.dumps(plan_data, indent=2) + "\n").encode())
    records = _host_records(state, files_dir)
    guest_records: list[FileRecord] = []
    for path, fact in sorted((state.guest.files if state.guest else {}).items()):
        stored = None
        if fact.text is not None:
            stored = "guest__" + _stored_name(path)  # the host may have the same path
            write_private(files_dir / stored, fact.text.encode("utf-8", "surrogateescape"))
        guest_records.append(FileRecord(
            path=path, sha256=fact.sha256, stored_as=stored, restorable=path != PROC_CMDLINE))
    meta = SnapshotMeta(
        id=snap_id, created_at=now.isoformat(timespec="microseconds"), pvefix_version=__version__,
        node=vm.node, vmid=vm.vmid, phase=phase, target=target,
        vm=VmRecord(
            digest=vm.digest, config_source=vm.config_source, status=vm.status,
            running_machine=vm.running_machine, lock=vm.lock, pending=list(vm.pending)),
        files=records, guest_files=guest_records, pve_snapshot=pve_snapshot, cluster=cluster)
    _write_meta(folder, meta)
    return Snapshot(folder, meta)


def _write_meta(folder: Path, meta: SnapshotMeta) -> None:
    data = meta.model_dump(mode="json", by_alias=True)
    write_private(folder / META_FILE, (json.dumps(data, indent=2) + "\n").encode())


def load_snapshot(path: Path) -> Snapshot:
    try:
        data = json.loads(read_private_text(path / META_FILE))
    except FileNotFoundError:
        raise PvefixError("not a pvefix snapshot (no meta.json)", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise PvefixError(f"meta.json is not valid JSON: {exc.msg}", source=str(path)) from None
    return Snapshot(path, SnapshotMeta.model_validate(data))


def _folders(state_dir: Path) -> list[Path]:
    """Every snapshot folder: keyed ones (snapshots/<cluster>/<id>) and older unkeyed ones
    (snapshots/<id>)."""
    root = state_dir / SNAPSHOTS
    if not root.is_dir():
        return []
    found: list[Path] = []
    for entry in sorted(root.iterdir()):
        if (entry / META_FILE).is_file():
            found.append(entry)
        elif entry.is_dir():
            found += [sub for sub in sorted(entry.iterdir()) if (sub / META_FILE).is_file()]
    return found


def _ours(snap: Snapshot, cluster: str) -> bool:
    """Is `snap` this identity's: its own, or an older one of the same name (or of none),
    which the identity then claims (pvefix.target.identity)?"""
    return snap.meta.cluster in (None, cluster, name_of(cluster))


def _claim(snap: Snapshot, cluster: str) -> Snapshot:
    """An older snapshot (keyed by a name only, or by nothing) rewritten under `cluster`, once,
    so another host of the same name no longer finds it."""
    if snap.meta.cluster == cluster or SEPARATOR not in cluster:
        return snap
    meta = snap.meta.model_copy(update={"cluster": cluster})
    _write_meta(snap.path, meta)
    return Snapshot(snap.path, meta)


def list_snapshots(state_dir: Path, vmid: int | None = None,
                   cluster: str | None = None) -> list[Snapshot]:
    """Every snapshot (of one VM, of one cluster plus the older unkeyed ones, if given),
    oldest first."""
    found: list[Snapshot] = []
    for entry in _folders(state_dir):
        snap = load_snapshot(entry)
        if vmid is not None and snap.meta.vmid != vmid:
            continue
        if cluster is not None:
            if not _ours(snap, cluster):
                continue
            snap = _claim(snap, cluster)
        found.append(snap)
    return sorted(found, key=lambda s: (s.meta.created_at, s.id))


def find_snapshot(state_dir: Path, snapshot_id: str | None, vmid: int | None,
                  cluster: str | None = None) -> Snapshot:
    """The snapshot named, or the newest one (of `vmid` in `cluster`) not yet rolled back."""
    if snapshot_id is not None:
        named = [p for p in _folders(state_dir) if p.name == snapshot_id]
        if not named:
            raise PvefixError(f"no snapshot {snapshot_id}", source=str(state_dir / SNAPSHOTS))
        snap = load_snapshot(named[0])
        if vmid is not None and snap.meta.vmid != vmid:
            raise PvefixError(f"snapshot {snapshot_id} is of VM {snap.meta.vmid}, not {vmid}")
        if cluster is not None and not _ours(snap, cluster):
            raise RefusedError(f"snapshot {snapshot_id} is of {snap.meta.cluster}, and this "
                               f"connection reaches {cluster}: nothing was written")
        return _claim(snap, cluster) if cluster is not None else snap
    candidates = [s for s in list_snapshots(state_dir, vmid, cluster)
                  if s.status() != "rolled-back"]
    if not candidates:
        who = f"VM {vmid}" if vmid is not None else "any VM"
        raise PvefixError(f"no snapshot of {who} to roll back", source=str(state_dir))
    return candidates[-1]
