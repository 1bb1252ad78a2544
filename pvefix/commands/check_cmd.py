"""`pvefix check [VMID ...] [--all]`: drift between the target and its desired state.

Exit 0 no drift, 2 drift, 1 error (including a property that could not be checked), as
`terraform plan -detailed-exitcode` does for CI.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from pvefix.commands.options import (
    ConnectionOptions,
    connection_options,
    resolve_connection_options,
)
from pvefix.commands.rehearse_options import RehearseAsk, rehearse_options
from pvefix.commands.vmid import parse_vmid

if TYPE_CHECKING:
    from pvefix.check.report import CheckItem, CheckReport
    from pvefix.desired.model import DesiredState
    from pvefix.rehearse.flow import Settings

DEFAULT_WORKERS = 32
F = TypeVar("F", bound=Callable[..., Any])


class CheckFormat(StrEnum):
    text = "text"
    json = "json"
    junit = "junit"


def _desired(desired: Path | None, state_dir: Path | None, vmids: list[int],
             cluster: str | None = None) -> DesiredState:
    if desired is not None:
        from pvefix.desired.parse import load_desired

        return load_desired(desired)  # the recorded-state store (and what it needs) unloaded
    from pvefix.desired.store import load_recorded
    from pvefix.store.statedir import open_state_dir

    return load_recorded(open_state_dir(state_dir), vmids or None, cluster)


def _cluster(opts: ConnectionOptions) -> str | None:
    """The identity the recorded desired states are kept under (pvefix.desired.store)."""
    if opts.bundle is not None:
        from pvefix.hosttree.meta import META_FILE, load_meta

        meta = load_meta(opts.bundle / META_FILE)
        return f"cluster-{meta.cluster_name}" if meta.cluster_name else f"node-{meta.node}"
    from pvefix.errors import PvefixError
    from pvefix.target.nodes import cluster_identity

    def refused(exc: PvefixError) -> None:
        # Recorded states are kept per cluster (pvefix.desired.store): one it cannot tell
        # would be looked for where no other command writes them. Name the missing right.
        raise PvefixError(
            "the desired states pvefix apply recorded are kept per cluster, which pvefix tells"
            f" by GET /cluster/status, and this connection may not read it: {exc.message};"
            " or pass --desired FILE (then PVEAuditor on /vms/VMID is enough)",
            source=exc.source) from None

    return cluster_identity(resolve_connection_options(opts), refused=refused)


def _rule_files(desired: Path | None, state_dir: Path | None,
                cluster: str | None = None) -> Callable[[Any], Path | None]:
    """The desired-state file each report item's rule comes from (for annotations)."""
    if desired is not None:
        return lambda item: desired
    from pvefix.desired.store import recorded_path
    from pvefix.store.statedir import open_state_dir

    folder = open_state_dir(state_dir)

    def recorded(item: Any) -> Path | None:
        path = recorded_path(folder, item.vmid, cluster) if item.vmid is not None else None
        return path if path is not None and path.is_file() else None

    return recorded


def _cycle_collector_paused(command: F) -> F:
    """Run `command` with CPython's cycle collector off, and on again after (tests run the
    command in-process). A 10,000-VM check makes about a million objects and keeps nearly all
    of them to the report; the collector walks the growing heap again and again on the way
    (~0.4 s of CPU, docs/benchmarks.md) and finds next to nothing to free. What cycles the
    run does leave (a traceback, a closed session) are collected once it is back on."""

    @functools.wraps(command)
    def paused(*args: Any, **kwargs: Any) -> Any:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return command(*args, **kwargs)
        finally:
            if was_on:
                gc.enable()

    return paused  # type: ignore[return-value]


@connection_options
@rehearse_options
@_cycle_collector_paused
def check_command(
    vmids: list[int] | None = typer.Argument(
        None, parser=parse_vmid, help="VMs to check (VMIDs). With --all: every VM.",
        show_default=False),
    all_vms: bool = typer.Option(
        False, "--all", help="Every VM of every node (with --desired: the VMs the file names; "
        "without: every VM, and one lacking a recorded desired state fails the check, exit 1, "
        "unless --only-desired)."),
    only_desired: bool = typer.Option(
        False, "--only-desired", help="Check only the VMs that have a desired state (recorded, "
        "or in --desired); name the others on stderr instead of failing."),
    desired: Path | None = typer.Option(
        None, "--desired", "-d", help="Desired-state file (TOML, pvefix.desired/v1). Default: "
        "what `pvefix apply` recorded in the state directory.", show_default=False),
    fmt: CheckFormat = typer.Option(
        CheckFormat.text, "--format", "-f", help="text: a diff per drifted property; json: "
        "pvefix.check/v1; junit: JUnit XML (a testcase per VM and property)."),
    output: Path | None = typer.Option(
        None, "--output", "--out", "-o", help="Write the report (in --format) to this file; the "
        "text view then goes to stdout.", show_default=False),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="State directory (env PVEFIX_STATE_DIR; default "
        "$XDG_STATE_HOME/pvefix).", show_default=False),
    workers: int = typer.Option(
        DEFAULT_WORKERS, "--workers", min=1, max=256, help="Concurrent API reads; with "
        "--rehearse also the most nodes rehearsing at once (at most 8; each node one VM at "
        "a time)."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="List every property checked, not only the drifted."),
    *,
    opts: ConnectionOptions,
    rehearsal: RehearseAsk,
) -> int:
    """Compare VMs (and their nodes' kernel cmdlines) with the desired state. With
    --rehearse, also boot each checked VM's next start's firmware on its node (pvefix
    rehearse) and report a BAR not placed, a VM that would not boot or QEMU refusing it.

    Exit codes: 0 no drift, 2 drift (also when it only waits in [PENDING] or for a host
    reboot; with --rehearse, a failing rehearsal), 1 error or something that could not be
    checked (a rehearsal that could not run).
    """
    ids = list(vmids or [])
    if not ids and not all_vms:
        raise typer.BadParameter("name the VMs to check (VMID ...) or pass --all")
    settings = rehearsal.settings()
    if settings is not None and opts.bundle is not None:
        from pvefix.errors import PvefixError

        raise PvefixError("--rehearse boots the firmware on each VM's node: a bundle (--bundle)"
                          " has no node; check the live cluster (API and SSH, or --local)")
    cluster = None if desired is not None else _cluster(opts)
    loaded = _desired(desired, state_dir, ids if not all_vms and not only_desired else [],
                      cluster)
    if only_desired and ids:
        ids = _with_desired(ids, loaded)
    report = _checked(opts, loaded, ids, all_vms, desired is not None or only_desired, workers,
                      settings)
    _write(report, fmt, output, verbose, _rule_files(desired, state_dir, cluster))
    return report.exit_code


def _with_desired(ids: list[int], loaded: DesiredState) -> list[int]:
    """--only-desired: the VMs named that have a desired state (the others said on stderr)."""
    left_out = sorted(set(ids) - set(loaded.vms))
    if left_out:
        print("not checked (no desired state; --only-desired): VM "
              + ", ".join(map(str, left_out)), file=sys.stderr)
    ids = [v for v in ids if v in loaded.vms]
    if not ids:
        raise typer.BadParameter("none of the VMs named has a desired state")
    return ids


def _checked(opts: ConnectionOptions, loaded: DesiredState, ids: list[int], all_vms: bool,
             scoped_by_desired: bool, workers: int, settings: Settings | None) -> CheckReport:
    """The check's report: from the bundle, or read live (and rehearsed with --rehearse)."""
    from pvefix.check.progress import ProgressBar
    from pvefix.check.run import check_bundle, check_live

    if opts.bundle is not None:
        return check_bundle(opts.bundle, loaded, ids, all_vms=all_vms,
                            from_file=scoped_by_desired)
    bar = ProgressBar.for_terminal("checking VMs")
    conn = resolve_connection_options(opts)
    report = check_live(conn, loaded, ids, all_vms=all_vms, from_file=scoped_by_desired,
                        workers=workers, progress=bar)
    if settings is not None:
        from pvefix.flow.check_rehearsal import NODE_WORKERS, rehearse_live_check

        report = rehearse_live_check(conn, report, settings,
                                     ProgressBar.for_terminal("rehearsing VMs"),
                                     min(workers, NODE_WORKERS))
    return report


def _write(report: CheckReport, fmt: CheckFormat, output: Path | None, verbose: bool,
           files: Callable[[CheckItem], Path | None]) -> None:
    """The report in `fmt` to stdout or `output` (the text view then to stdout), and the
    GitHub annotations under GITHUB_ACTIONS=true."""
    from pvefix.check.render import github_annotations, render_json, render_text

    text_on_stdout = output is not None or fmt is CheckFormat.text
    from pvefix.console.terminal import on_tty

    # Filled on a terminal; in a CI log each line stays whole, to grep.
    term = on_tty(sys.stdout) if output is None else None
    text = render_text(report, verbose=verbose, term=term) if text_on_stdout else ""
    if fmt is CheckFormat.text:
        body = text
    elif fmt is CheckFormat.json:
        body = render_json(report)
    else:
        from pvefix.check.junit import render_junit  # XML only when asked for

        body = render_junit(report)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(body, encoding="utf-8")
        sys.stdout.write(text)
        print(f"report written to {output}", file=sys.stderr)
    else:
        sys.stdout.write(body)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # Workflow commands are read from the log; keep machine output on stdout parseable.
        stream = sys.stdout if text_on_stdout else sys.stderr
        stream.write(github_annotations(report, files))
    sys.stdout.flush()
