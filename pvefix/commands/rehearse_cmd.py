"""`pvefix rehearse VMID [--phase N | --plan FILE]`: boot the firmware of the config a plan
leads to with the node's own QEMU and firmware, stand-ins of the passed GPUs' BARs and sparse
RAM, and say where each BAR lands (docs/rehearse.md).

Exit 0: every BAR placed; 2: a BAR not placed or beyond the vCPU's reach, the firmware did not
finish (the VM would not boot), or QEMU refused the configuration; 1: error, or a verdict not
established (the next start holds an input that can move a BAR and that the rehearsal does not
boot: pvefix/rehearse/unmodelled.py); 3: refused (it cannot run on the node: no QEMU, no
python3, no KVM and no time for TCG, too little memory).
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pvefix.commands.options import ConnectionOptions, connection_options
from pvefix.commands.vmid import parse_vmid
from pvefix.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, PvefixError

if TYPE_CHECKING:
    from pvefix.rehearse.verdict import Verdict


class Accel(StrEnum):
    auto = "auto"
    kvm = "kvm"
    tcg = "tcg"


class Format(StrEnum):
    text = "text"
    json = "json"


@connection_options
def rehearse_command(
    vmid: int = typer.Argument(..., parser=parse_vmid, help="The VM to rehearse (its VMID).",
                               show_default=False),
    phase: int | None = typer.Option(
        None, "--phase", help="Rehearse the VM's next start once phases 1..N of a fresh plan "
        "are applied (default: the next start as it is, [PENDING] included).",
        show_default=False),
    plan_file: Path | None = typer.Option(
        None, "--plan", help="Rehearse the config this saved plan file leads to (all its "
        "phases; with --phase, phases 1..N of it).", show_default=False),
    accel: Accel = typer.Option(
        Accel.auto, "--accel", help="auto: KVM when /dev/kvm is usable on the node, else TCG "
        "(the host's phys-bits and vendor given explicitly); kvm or tcg to insist."),
    boot_timeout: float = typer.Option(
        120.0, "--boot-timeout", help="Seconds the firmware may take to reach its boot "
        "manager; past them: 'this VM would not boot'. TCG needs 30 or more."),
    firmware_dir: str | None = typer.Option(
        None, "--firmware-dir", help="The folder of OVMF (and bios-256k.bin) on the node "
        "(default /usr/share/pve-edk2-firmware, Proxmox's; SeaBIOS: QEMU's own).",
        show_default=False),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
    show_command: bool = typer.Option(
        False, "--show-command", help="Also print the QEMU command the rehearsal ran."),
    *,
    opts: ConnectionOptions,
) -> int:
    """Prove, before the restart, that the firmware places every GPU BAR: boot only the
    firmware of VM VMID's planned config on its node, with the node's own QEMU and firmware,
    one stand-in device per passed GPU (its largest 64-bit BAR from sysfs), the same machine,
    CPU, phys-bits and RAM size (sparse, never allocated), and read where each BAR landed.
    Touches nothing of the VM: no vfio, disk, network or display, no VM file. Exit 0 all
    placed, 2 not placed / would not boot / QEMU refuses, 1 error, 3 cannot run here."""
    from pvefix.rehearse.flow import Settings

    if opts.bundle is not None:
        raise PvefixError("rehearse runs QEMU on the VM's node: a bundle (--bundle) has no node;"
                          " use the API and SSH, or --local on the node")
    settings = Settings(accel=accel.value, timeout=boot_timeout,
                        firmware_dir=firmware_dir or Settings.firmware_dir,
                        explicit_firmware_dir=firmware_dir is not None)
    verdict, command = _run(opts, vmid, phase, plan_file, settings)
    if fmt is Format.json:
        data = verdict.to_json()
        if show_command:
            data["command"] = command
        print(json.dumps(data, indent=2))
    else:
        from pvefix.console.terminal import on_tty
        from pvefix.rehearse.verdict import render_text

        sys.stdout.write(render_text(verdict, on_tty(sys.stdout)))
        if show_command:
            print(f"command: {command}")
    return exit_code(verdict)


def _run(opts: ConnectionOptions, vmid: int, phase: int | None, plan_file: Path | None,
         settings: object) -> tuple[Verdict, str]:
    from pvefix.commands.options import resolve_connection_options
    from pvefix.flow.planfile import load_plan_file
    from pvefix.flow.rehearsal import rehearse_live
    from pvefix.planner import plan as make_plan
    from pvefix.rehearse.flow import Settings
    from pvefix.sources.live import read_live
    from pvefix.target.sessions import Sessions

    assert isinstance(settings, Settings)
    plan = load_plan_file(plan_file) if plan_file is not None else None
    if plan is not None and plan.target.get("vmid") != vmid:
        raise PvefixError(f"the plan file is for VM {plan.target.get('vmid')}, not {vmid}",
                          source=str(plan_file))
    conn = resolve_connection_options(opts)
    with Sessions(conn) as sessions:
        state = read_live(conn, vmid, sessions=sessions)
        if plan is None and phase is not None:
            plan = make_plan(state)
        return rehearse_live(conn, sessions, state, plan, phase, settings)


def exit_code(verdict: Verdict) -> int:
    if verdict.ok:
        return EXIT_OK
    if verdict.outcome == "error" or verdict.not_established:
        return EXIT_ERROR  # nothing established: never a pass, nor a failing verdict
    return EXIT_CHANGES
