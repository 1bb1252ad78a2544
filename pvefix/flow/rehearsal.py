"""The rehearsal inside the flow: `pvefix rehearse`, `plan --rehearse` and `apply --rehearse`
rehearse a config of a plan on the VM's node through the command's sessions (docs/rehearse.md).
"""

from __future__ import annotations

import dataclasses

from pvefix.errors import RefusedError
from pvefix.planner.model import Plan
from pvefix.rehearse.flow import NEXT_START, Settings, next_start_config, planned_config, rehearse
from pvefix.rehearse.verdict import Verdict
from pvefix.state import HostState
from pvefix.target.nodes import address_of
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection


def rehearse_live(conn: Connection, sessions: Sessions, state: HostState, plan: Plan | None,
                  phase: int | None, settings: Settings) -> tuple[Verdict, str]:
    """Rehearse the VM's next start, phases 1..`phase` of `plan` over it, or its end, on the
    VM's node (SSH, or this host with --local); the verdict and the QEMU command."""
    config, label = planned_config(state, plan, phase)
    return _on_node(conn, sessions, state, config, label, settings)


def rehearse_next_start(conn: Connection, sessions: Sessions, state: HostState,
                        settings: Settings) -> tuple[Verdict, str]:
    """`check --rehearse`: rehearse the config the VM's next cold start runs ([PENDING]
    applied: pvefix/vmconfig/nextstart.py) on its node."""
    return _on_node(conn, sessions, state, next_start_config(state), NEXT_START, settings)


def _on_node(conn: Connection, sessions: Sessions, state: HostState, config: dict[str, str],
             label: str, settings: Settings) -> tuple[Verdict, str]:
    name = state.vm.node
    sessions.claim(name)  # --local: this host must be the VM's node
    node = sessions.host(name, lambda: address_of(conn.for_node(name), name, sessions.cluster))
    # a lost SSH connection closes the node script's stdin; locally it has none to watch
    settings = dataclasses.replace(settings, watch_stdin=node.watch_stdin)
    return rehearse(node, state, config, label, settings)


def refuse_failed(verdict: Verdict, phase: int) -> None:
    """apply --rehearse: a phase whose rehearsal does not place every BAR is not applied."""
    if verdict.ok:
        return
    what = (f"is not established (it leaves out {'; '.join(verdict.not_established)}; the"
            f" firmware without that: {verdict.outcome})" if verdict.not_established
            else f"fails: {verdict.outcome}")
    raise RefusedError(
        f"the rehearsal of phase {phase} {what}: {verdict.message}\n"
        "nothing was written; see `pvefix rehearse "
        f"{verdict.vmid} --phase {phase}` for each BAR. To apply anyway, run apply without "
        "--rehearse", source=f"VM {verdict.vmid}")
