"""`pvefix check --rehearse`: rehearse each checked VM's next start on its node and keep the
verdict in the report (docs/rehearse.md, docs/ci.md).

One rehearsal per VM (each boots only the firmware: a few seconds under KVM or TCG, up to the
boot timeout): the nodes in parallel, each node's VMs one after another (a node runs one
rehearsal at a time: its script's lock). The config is the one the VM's next cold start runs
([PENDING] applied). Severity, as the check's exit codes have it: every BAR placed is `ok`; a
BAR not placed or beyond the vCPU's reach, a firmware that does not finish, QEMU refusing the
configuration is a finding (`drift`, exit 2: the VM's next start loses its GPUs or does not
start); a rehearsal that cannot run (refused: no QEMU, no memory, no time for TCG) or fails, or
whose verdict is not established (the next start holds an input that can move a BAR and that
the rehearsal does not boot), is `unknown` (exit 1), never a pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from pvefix.check.compare import NO_DESIRED
from pvefix.check.report import CheckItem, CheckReport
from pvefix.errors import PvefixError
from pvefix.rehearse.build import RehearseRefused
from pvefix.rehearse.flow import NEXT_START, Settings, next_start_config
from pvefix.rehearse.verdict import Verdict, bar_line
from pvefix.target.settings import Connection
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

PROPERTY = "rehearsal"
WANT = "placed"
EXPECTED = "every BAR placed, the firmware boots"
FAILED = {"not-placed": "BARs not placed", "no-boot": "this VM would not boot",
          "qemu-refused": "QEMU refuses this configuration"}


def rehearsal_item(verdict: Verdict) -> CheckItem:
    """The check finding of one verdict: ok, drift (a failing verdict) or unknown (error)."""
    if verdict.ok:
        status = "ok"
    elif verdict.outcome == "error" or verdict.not_established:
        status = "unknown"  # not established: never a pass, nor drift
    else:
        status = "drift"
    head = FAILED.get(verdict.outcome, verdict.outcome)
    if verdict.not_established:
        head = f"not established (the firmware without what was left out: {head})"
    lines = [f"{verdict.qemu} ({verdict.accel.upper()}), {verdict.firmware}, machine "
             f"{verdict.machine}, -cpu {verdict.cpu}"]
    lines += [bar_line(b) for b in verdict.bars if status == "ok" or b.status != "placed"]
    if verdict.boot_s is not None:
        lines.append(f"{verdict.boot_s:g} s, peak {verdict.peak_rss_mb} MiB")
    lines += [f"not booted: {x}" for x in verdict.not_established]
    lines += [f"note: {n}" for n in verdict.notes]
    return CheckItem(
        target="vm", vmid=verdict.vmid, node=verdict.node, property=PROPERTY, status=status,
        expected=EXPECTED, actual=f"{head}: {verdict.message}" if status != "ok" else
        verdict.message, detail="\n".join(lines), key=PROPERTY, want=WANT,
        got=verdict.outcome, where="rehearsal")


def not_run_item(vmid: int, node: str, exc: PvefixError) -> CheckItem:
    """A rehearsal that could not run: unknown (exit 1), and why."""
    refused = isinstance(exc, RehearseRefused)
    what = "rehearsal refused" if refused else "rehearsal did not run"
    return CheckItem(
        target="vm", vmid=vmid, node=node, property=PROPERTY, status="unknown",
        expected=EXPECTED, actual=what, detail=f"{what}: {exc}", key=PROPERTY, want=WANT,
        got="refused" if refused else "error", where="rehearsal")


def rehearsal_targets(report: CheckReport) -> list[tuple[int, str]]:
    """The VMs the check compared (read, with a desired state): (vmid, node), in order."""
    out: dict[int, str] = {}
    for item in report.items:
        if (item.target == "vm" and item.vmid is not None and item.property != NO_DESIRED
                and item.status in ("ok", "drift")):
            out.setdefault(item.vmid, item.node)
    return list(out.items())


Rehearse = Callable[[int], Verdict]
#: Nodes rehearsed at once by `check --rehearse` (each node runs one rehearsal at a time).
NODE_WORKERS = 8


class NothingToPlace(PvefixError):
    """The VM's next start passes no PCI device: there is no BAR to place, and its rehearsal
    is not run (an `--all` over a cluster rehearses only the VMs with passed devices)."""


def passes_devices(config: Mapping[str, str]) -> bool:
    """Does this config pass a PCI device (a `hostpciN` entry)?"""
    return any(HOSTPCI_KEY.fullmatch(key) for key in config)


Outcome = Verdict | PvefixError | None  # None: nothing to place, not rehearsed


def by_node(targets: list[tuple[int, str]]) -> dict[str, list[int]]:
    """The VMs of each node, in the order given (nodes in the order first named)."""
    out: dict[str, list[int]] = {}
    for vmid, node in targets:
        out.setdefault(node, []).append(vmid)
    return out


def rehearse_nodes(targets: list[tuple[int, str]], rehearse: Rehearse,
                   progress: Callable[[int, int], None] | None = None,
                   workers: int = NODE_WORKERS) -> dict[int, Outcome]:
    """Each VM's rehearsal: the nodes in parallel (up to `workers` at once), each node's VMs
    one after another in a thread of that node (the node script's lock would make a second
    one wait anyway: docs/rehearse.md). An error other than a PvefixError is raised."""
    groups = by_node(targets)
    done: list[int] = []
    lock = threading.Lock()

    def one_node(vmids: list[int]) -> dict[int, Outcome]:
        out: dict[int, Outcome] = {}
        for vmid in vmids:
            try:
                out[vmid] = rehearse(vmid)
            except NothingToPlace:
                out[vmid] = None
            except PvefixError as exc:
                out[vmid] = exc
            with lock:
                done.append(vmid)
                if progress is not None:
                    progress(len(done), len(targets))
        return out

    if len(groups) <= 1:
        return {k: v for vmids in groups.values() for k, v in one_node(vmids).items()}
    results: dict[int, Outcome] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(groups))),
                            thread_name_prefix="pvefix-rehearse") as pool:
        for future in [pool.submit(one_node, vmids) for vmids in groups.values()]:
            results.update(future.result())
    return results


def rehearse_each(report: CheckReport, rehearse: Rehearse,
                  progress: Callable[[int, int], None] | None = None,
                  workers: int = NODE_WORKERS) -> CheckReport:
    """The report with one rehearsal item after each compared VM's items, its verdicts in
    `rehearsals` (in the report's order) and a note of the time it took."""
    targets = rehearsal_targets(report)
    start = time.monotonic()
    outcomes = rehearse_nodes(targets, rehearse, progress, workers)
    found: dict[int, CheckItem] = {}
    verdicts: list[Verdict] = []
    for vmid, node in targets:
        outcome = outcomes[vmid]
        if isinstance(outcome, Verdict):
            verdicts.append(outcome)
            found[vmid] = rehearsal_item(outcome)
        elif outcome is not None:
            found[vmid] = not_run_item(vmid, node, outcome)
    empty = sum(1 for o in outcomes.values() if o is None)
    items = list(report.items)
    for vmid, item in found.items():
        last = max(i for i, it in enumerate(items) if it.target == "vm" and it.vmid == vmid)
        items.insert(last + 1, item)
    accels = sorted({v.accel.upper() for v in verdicts})
    nodes = len(by_node(targets))
    note = (f"rehearsed the {NEXT_START} of {len(targets) - empty} VM(s) in "
            f"{time.monotonic() - start:.1f} s" + (f" ({', '.join(accels)})" if accels else "")
            + (f", {nodes} nodes in parallel" if nodes > 1 else "")
            + (f"; {empty} VM(s) pass no PCI device: nothing to place, not rehearsed"
               if empty else ""))
    return report.model_copy(update={
        "items": items, "notes": [*report.notes, note],
        "rehearsals": [v.to_json() for v in verdicts]})


def rehearse_live_check(connection: Connection, report: CheckReport, settings: Settings,
                        progress: Callable[[int, int], None] | None = None,
                        workers: int = NODE_WORKERS) -> CheckReport:
    """`check --rehearse` on a live cluster: each compared VM read again with its node (its
    PCI facts size the stand-ins) and rehearsed there, through one set of sessions shared by
    the nodes' threads (pvefix.target.sessions: one SSH session per node, one API session)."""
    from pvefix.flow.rehearsal import rehearse_next_start
    from pvefix.sources.live import read_live
    from pvefix.target.sessions import Sessions

    with Sessions(connection, workers=workers) as sessions:
        def one(vmid: int) -> Verdict:
            state = read_live(connection, vmid, sessions=sessions)
            if not passes_devices(next_start_config(state)):
                raise NothingToPlace(f"VM {vmid} passes no PCI device")
            return rehearse_next_start(connection, sessions, state, settings)[0]

        return rehearse_each(report, one, progress, workers)
