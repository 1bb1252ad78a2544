"""Probe reports kept in the state directory: `<state>/probes/<vmid>/<timestamp>.json`.

Folders 0700, files 0600 (written atomically), as the snapshots next to them. A report's id is
its file name without `.json`: a UTC timestamp like `20261202T143002.123456Z`, so names sort
in the order the reports were taken.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pvefix.errors import ParseError, PvefixError
from pvefix.probe.main import load_report
from pvefix.probe.report import Report
from pvefix.store.statedir import ensure_private_dir, write_private

PROBES = "probes"


def probes_dir(state_dir: Path, vmid: int) -> Path:
    return state_dir / PROBES / str(vmid)


def new_report_id(now: dt.datetime | None = None) -> str:
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.strftime("%Y%m%dT%H%M%S.%fZ")


def store_report(state_dir: Path, vmid: int, report: Report) -> Path:
    """Keep `report` as the newest report of VM `vmid`; its path (file 0600)."""
    for folder in (state_dir, state_dir / PROBES, probes_dir(state_dir, vmid)):
        ensure_private_dir(folder)  # each level 0700, not only the last
    ident = new_report_id()
    path = folder / f"{ident}.json"
    n = 1
    while path.exists():  # two probes in one microsecond: keep both
        path = folder / f"{ident}-{n}.json"
        n += 1
    write_private(path, (report.to_json() + "\n").encode("utf-8"))
    return path


def stored_reports(state_dir: Path, vmid: int) -> list[Path]:
    """VM `vmid`'s stored reports, oldest first."""
    folder = probes_dir(state_dir, vmid)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def find_report(state_dir: Path, vmid: int, ident: str) -> Path:
    """The stored report named by `ident`: its id, a unique prefix of it, or `latest`."""
    reports = stored_reports(state_dir, vmid)
    if ident == "latest" and reports:
        return reports[-1]
    exact = [p for p in reports if p.stem == ident]
    matches = exact or [p for p in reports if p.stem.startswith(ident)]
    if len(matches) == 1:
        return matches[0]
    where = str(probes_dir(state_dir, vmid))
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
