"""Probe reports kept in the state directory: `<state>/probes/<owner>/<vmid>/<timestamp>.json`.

The owner keeps two hosts' VM 100 apart: through the guest agent, the node's identity
(`node-pve@KEY`, pvefix.target.identity); over SSH to the guest, the address it was reached at
(`guest-gpu-vm.lab-22`). Reports of earlier versions (`probes/<vmid>/`) are moved under the
first owner that asks for that VMID, once.

Folders 0700, files 0600 (written atomically), as the snapshots next to them. A report's id is
its file name without `.json`: a UTC timestamp like `20261202T143002.123456Z`, so names sort
in the order the reports were taken.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pvefix.errors import ParseError, PvefixError
from pvefix.probe.main import load_report
from pvefix.probe.report import Report
from pvefix.store.statedir import ensure_private_dir, write_private

if TYPE_CHECKING:
    from pvefix.target.guest.access import GuestAccess
    from pvefix.target.settings import Connection

PROBES = "probes"


def probe_owner(guest: GuestAccess, conn: Connection | None) -> str | None:
    """Whose VM the reports are of (see the module doc); None: not known (older layout)."""
    if guest.method == "ssh":
        where = f"{guest.ssh_host}-{guest.ssh_port}"
        return "guest-" + re.sub(r"[^A-Za-z0-9._-]", "_", where)
    if conn is None:
        return None
    from pvefix.target.nodes import cluster_identity

    return cluster_identity(conn)


def probes_dir(state_dir: Path, vmid: int, owner: str | None = None) -> Path:
    """VM `vmid`'s reports of `owner`; an older unowned folder is moved there first, once."""
    old = state_dir / PROBES / str(vmid)
    if owner is None:
        return old
    folder = state_dir / PROBES / owner / str(vmid)
    if old.is_dir() and not folder.exists():
        ensure_private_dir(folder.parent)
        old.replace(folder)
    return folder


def new_report_id(now: dt.datetime | None = None) -> str:
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.strftime("%Y%m%dT%H%M%S.%fZ")


def store_report(state_dir: Path, vmid: int, report: Report, owner: str | None = None) -> Path:
    """Keep `report` as the newest report of VM `vmid` (of `owner`); its path (file 0600)."""
    levels = [state_dir, state_dir / PROBES, *([state_dir / PROBES / owner] if owner else []),
              probes_dir(state_dir, vmid, owner)]
    for folder in levels:
        ensure_private_dir(folder)  # each level 0700, not only the last
    ident = new_report_id()
    path = folder / f"{ident}.json"
    n = 1
    while path.exists():  # two probes in one microsecond: keep both
        path = folder / f"{ident}-{n}.json"
        n += 1
    write_private(path, (report.to_json() + "\n").encode("utf-8"))
    return path


def stored_reports(state_dir: Path, vmid: int, owner: str | None = None) -> list[Path]:
    """VM `vmid`'s stored reports (of `owner`), oldest first."""
    folder = probes_dir(state_dir, vmid, owner)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def find_report(state_dir: Path, vmid: int, ident: str, owner: str | None = None) -> Path:
    """The stored report named by `ident`: its id, a unique prefix of it, or `latest`."""
    reports = stored_reports(state_dir, vmid, owner)
    if ident == "latest" and reports:
        return reports[-1]
    exact = [p for p in reports if p.stem == ident]
    matches = exact or [p for p in reports if p.stem.startswith(ident)]
    if len(matches) == 1:
        return matches[0]
    where = str(probes_dir(state_dir, vmid, owner))
    if not matches:
        known = ", ".join(p.stem for p in reports[-5:]) or "none stored yet"
        raise PvefixError(f"no probe report '{ident}' for VM {vmid} (latest: {known})",
                          source=where)
    raise PvefixError(f"'{ident}' names {len(matches)} reports of VM {vmid}: be more precise",
                      source=where)


def read_report(path: Path) -> Report:
    """A stored or saved report; ParseError names the file when it is not one."""
    try:
        return load_report(path)
    except ParseError:
        raise
    except OSError as exc:
        raise ParseError(f"cannot read: {exc}", source=str(path)) from None
