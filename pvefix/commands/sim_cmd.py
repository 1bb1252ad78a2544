"""`pvefix sim`: run a simulated Proxmox VE node (HTTPS API + SSH) from a host tree.

paramiko, cryptography and the simulator itself are imported inside the commands, so
`pvefix --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    help="A simulated Proxmox VE node speaking the real API and SSH (demo, tests, benchmarks).",
    no_args_is_help=True,
)


@app.command("serve")
def serve(
    scenario: str = typer.Option(
        "kpro6", "--scenario", help="Built-in scenario name or a host tree directory."
    ),
    root: Path = typer.Option(
        ..., "--root", help="Working copy of the host tree (made on first use, then kept)."
    ),
    port: int = typer.Option(0, "--port", help="HTTPS port on 127.0.0.1 (0: pick a free one)."),
    ssh_port: int = typer.Option(0, "--ssh-port", help="SSH port on 127.0.0.1 (0: pick one)."),
    latency_ms: int = typer.Option(0, "--latency-ms", help="Added latency per request."),
    ready_file: Path | None = typer.Option(
        None, "--ready-file", help="Write connection details (JSON, 0600) here when ready."
    ),
    inject: list[str] = typer.Option(
        [], "--inject",
        help="Fault: latency=MS | fail-write=N | edit-between | lock=VMID:NAME | "
        "ssh-disconnect=BYTES (repeatable)."),
    task_seconds: float | None = typer.Option(
        None, "--task-seconds", help="How long tasks report 'running' (default 0.2)."
    ),
    status_lag: float = typer.Option(
        10.0, "--status-lag", min=0.0,
        help="Seconds between pvestatd's samples behind /cluster/resources' VM status "
        "(default 10, as pvestatd; 0: live)."),
    auth_fail_delay: float = typer.Option(
        0.0, "--auth-fail-delay", min=0.0,
        help="Seconds a 401 answer waits (Proxmox: 3; default 0)."),
    vms: int | None = typer.Option(
        None, "--vms", min=1, max=100_000,
        help="How many VMs a generated scenario (large) has (default 1,000); applies when "
        "--root is made."),
) -> None:
    """Serve a simulated node until SIGTERM or Ctrl-C (then exit 0)."""
    from pvefix.sim.serve import Simulator, serve_until_signal

    if vms is not None:
        from pvefix.hosttree import materialize_scenario

        materialize_scenario(scenario, root, vms=vms)

    sim = Simulator(scenario, root, port=port, ssh_port=ssh_port, latency_ms=latency_ms,
                    inject=inject, task_seconds=task_seconds, status_lag=status_lag,
                    auth_fail_delay=auth_fail_delay)
    raise typer.Exit(serve_until_signal(sim, ready_file))


@app.command("scenarios")
def scenarios() -> None:
    """List the built-in scenarios."""
    from pvefix.hosttree import list_scenarios

    infos = list_scenarios()
    width = max((len(i.name) for i in infos), default=0)
    for info in infos:
        typer.echo(f"{info.name.ljust(width)}  {info.summary}")
