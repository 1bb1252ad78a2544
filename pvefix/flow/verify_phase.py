"""The verify stage of `pvefix apply`: the target read again after activation and held against
what the plan expects of this phase (the VM config's next start, the host files; after a
restart, the running QEMU's P2P cliques in its /proc/PID/cmdline; after a host reboot, the
running kernel's /proc/cmdline). Journals the apply's end; a problem raises with the exact
rollback command. It lives in the flow, not the executor: it reads the target
(pvefix.sources) and proves the QEMU command line (pvefix.verify)."""

from __future__ import annotations

from collections.abc import Callable

from pvefix.cmdline.running import cmdline_problems
from pvefix.errors import PvefixError
from pvefix.executor import checks
from pvefix.executor.activate import Activated
from pvefix.executor.console import Console
from pvefix.executor.options import ApplyOptions
from pvefix.executor.reached import reached_fields
from pvefix.executor.write import Written
from pvefix.paths import PROC_CMDLINE
from pvefix.planner.model import HOST_BOOT_TARGETS, Phase, Plan
from pvefix.state import HostState
from pvefix.target.sessions import Sessions
from pvefix.verify.qemu_proof import prove as prove_cmdline


def verify_phase(sessions: Sessions, node: str, written: Written, activated: Activated, plan: Plan,
                 phase: Phase, options: ApplyOptions, console: Console,
                 reread: Callable[[], HostState]) -> HostState:
    """The target as read after activation (`reread`), once it holds what the phase should
    leave; raises (the journal says verify-failed) with the way back otherwise."""
    journal = written.journal
    after = reread()
    problems = checks.verify_live(phase, plan, after, restarted=activated.restarted)
    clique = next((c for c in phase.changes if c.rule == "p2p" and c.key == "args"), None)
    if activated.restarted and clique is not None:
        proof = prove_cmdline(sessions, node, after.vm.vmid, clique.after)
        journal.record("qemu-cmdline", pid=proof.pid, problems=proof.problems, note=proof.note)
        if proof.note:
            console.progress(f"the running QEMU's cliques are not proven: {proof.note}")
        elif not proof.problems:
            console.progress(f"/proc/{proof.pid}/cmdline on {node}: every clique is there,"
                             " no kvm=off")
        problems += proof.problems
    if options.reboot_host:
        proc = after.file(PROC_CMDLINE).text or ""
        problems += cmdline_problems(proc, [(c.before, c.after) for c in phase.changes
                                            if c.target in HOST_BOOT_TARGETS])
    if problems:
        journal.record("apply-end", status="verify-failed", problems=problems)
        raise PvefixError(
            "verification after the phase failed:\n  " + "\n  ".join(problems)
            + f"\nto put everything back: {written.rollback_command}"
        )
    journal.record("apply-end", status="applied", **reached_fields(after))
    return after
