"""VM and host power over the API, for the activate stage (pvefix.executor.activate) and a
rollback's --restart: a VM's clean shutdown (`--force-stop` only if asked), its start (the
start task and `running-machine` checked), and the host's reboot over SSH, waited for until
the API and SSH come back with progress shown."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from pvefix.console.progress import waiting
from pvefix.errors import PvefixError
from pvefix.target.nodes import NodeMismatch
from pvefix.target.open import open_api, open_node
from pvefix.target.sessions import Sessions
from pvefix.target.tasks import TaskFailed, run_task
from pvefix.vmconfig.machine import Machine

Say = Callable[[str], None]
POLL_S = 0.25


class ActivationError(PvefixError):
    """The VM or host could not be activated (shutdown refused, host did not come back)."""


class StartFailed(ActivationError):
    """Proxmox refused to start the VM (its task's exit status is the message)."""

    def __init__(self, vmid: int, exitstatus: str) -> None:
        self.exitstatus = exitstatus
        super().__init__(f"VM {vmid} failed to start: {exitstatus}", source=f"VM {vmid}")


@dataclass(frozen=True)
class VmRun:
    status: str
    running_machine: str | None


def vm_run(sessions: Sessions, node: str, vmid: int) -> VmRun:
    data = sessions.api().get(f"/nodes/{node}/qemu/{vmid}/status/current") or {}
    return VmRun(str(data.get("status", "unknown")), data.get("running-machine"))


def shutdown_vm(sessions: Sessions, node: str, vmid: int, *, timeout: float, force_stop: bool,
                task_timeout: float, say: Say) -> bool:
    """Shut the VM down cleanly; stop it hard only with force_stop. True if it was running."""
    if vm_run(sessions, node, vmid).status != "running":
        return False
    base = f"/nodes/{node}/qemu/{vmid}/status"
    say(f"VM {vmid}: shutting down (clean ACPI shutdown, up to {timeout:g} s)")
    try:
        with waiting(f"VM {vmid}", "the shutdown task", say):
            run_task(sessions.api(), node, f"{base}/shutdown",
                     {"timeout": str(int(timeout))}, timeout + task_timeout, say)
    except PvefixError as exc:
        if getattr(exc, "status", None) == 403:
            raise  # a privilege the API user lacks: a hard stop would be refused the same way
        if not force_stop:
            raise ActivationError(
                f"VM {vmid} did not shut down cleanly ({exc}); pvefix does not stop a VM hard "
                "unless asked: add --force-stop", source=f"VM {vmid}",
            ) from None
        say(f"VM {vmid}: clean shutdown failed ({exc}); stopping it (--force-stop)")
        with waiting(f"VM {vmid}", "the stop task", say):
            run_task(sessions.api(), node, f"{base}/stop", {}, task_timeout, say)
    return True


def start_vm(sessions: Sessions, node: str, vmid: int, *, task_timeout: float, say: Say,
             machine: str | None, if_stopped: bool = False) -> VmRun:
    """Start the VM; StartFailed with Proxmox's message when the start task fails. A start
    that ends with `WARNINGS: N` started the VM: the warnings are shown, nothing is undone.
    With `if_stopped`, a VM that already runs (onboot) is only checked."""
    if not (if_stopped and vm_run(sessions, node, vmid).status == "running"):
        say(f"VM {vmid}: starting")
        warnings: list[str] = []
        try:
            with waiting(f"VM {vmid}", "the start task", say) as wait:
                ended = run_task(sessions.api(), node, f"/nodes/{node}/qemu/{vmid}/status/start",
                                 {}, task_timeout, say, warnings.append)
                wait.awaited = "running-machine"
        except TaskFailed as exc:
            raise StartFailed(vmid, exc.exitstatus) from None
        for line in warnings:
            say(f"VM {vmid}: {line}")
        if ended != "OK":
            say(f"VM {vmid}: the start task ended with {ended}: it started; the warnings are "
                "above")
    run = vm_run(sessions, node, vmid)
    if run.status != "running":
        raise ActivationError(f"VM {vmid} is {run.status} after a successful start task")
    want_q35 = Machine.parse(machine).is_q35
    got = run.running_machine or ""
    if want_q35 != ("q35" in got):
        raise ActivationError(
            f"VM {vmid} runs {got or 'an unknown machine'}, but its config says "
            f"{machine or 'pc (i440fx)'}", source=f"VM {vmid}")
    say(f"VM {vmid}: running, running-machine {got}")
    return run


def _probe(sessions: Sessions, node: str) -> tuple[bool, bool, int | None]:
    """Is the API up, is SSH up, and the node's uptime (fresh connections each time)."""
    ours = sessions.conn.for_node(node)
    conn = ours.model_copy(update={"timeout": min(ours.timeout, 5.0)})
    api_up, ssh_up, uptime = False, False, None
    try:
        client = open_api(conn)
        try:
            status = client.get(f"/nodes/{node}/status") or {}
            uptime = int(status.get("uptime", 0)) or None
            api_up = True
        finally:
            client.close()
    except PvefixError:
        pass
    if conn.ssh:
        try:
            shell = open_node(conn, sessions.address(node))  # the node's own hostname, too
            try:
                ssh_up = shell.run(["true"]).ok
            finally:
                shell.close()
        except NodeMismatch as exc:
            # Up, but another host (or one under another name): waiting cannot mend it.
            raise ActivationError(f"host {node} is up again, but under another name:"
                                  f" {exc.message}", source=exc.source) from None
        except PvefixError:
            pass
    else:
        ssh_up = True
    return api_up, ssh_up, uptime


def reboot_host(sessions: Sessions, node: str, *, timeout: float, say: Say) -> float:
    """Reboot `node` over SSH and wait until API and SSH answer again; returns seconds. The
    command's sessions are opened afresh afterwards (the reboot dropped them)."""
    before = sessions.api().get(f"/nodes/{node}/status") or {}
    uptime_before = int(before.get("uptime", 0))
    say(f"host {node}: rebooting (every VM on it stops; onboot=1 VMs start again)")
    # The connection may drop before the exit status arrives: expected.
    with contextlib.suppress(PvefixError):
        sessions.at(node).run_in_time(["reboot"])
    start = time.monotonic()
    seen_down = False
    with waiting(f"host {node}", "API and SSH to go down and come back", say) as wait:
        while True:
            elapsed = time.monotonic() - start
            if elapsed > timeout:
                raise ActivationError(
                    f"host {node} did not come back within {timeout:g} s "
                    f"(last seen: {wait.state or 'nothing'})"
                )
            api_up, ssh_up, uptime = _probe(sessions, node)
            wait.update(f"api {'up' if api_up else 'down'}, ssh {'up' if ssh_up else 'down'}")
            if not (api_up and ssh_up):
                seen_down = True
            elif seen_down or (uptime is not None and uptime < uptime_before):
                break
            time.sleep(POLL_S)
    say(f"host {node}: back after {elapsed:.1f} s")
    sessions.forget()
    return elapsed
