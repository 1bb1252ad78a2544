"""Every pvefix command line pvefix prints for the admin to run (`Next:`, `to undo:`, the
Ctrl-C and failure lines): built here, in one place, shell-quoted, so that each runs as printed.

A printed command carries the `context` of the command that printed it: the options that reach
the same target, state directory and guest (`--connection`, `--auth`, `--node`, `--local`,
`--state-dir`, `--guest-ssh-host`, ...: a Context; commands/optgroup.py `given_argv` turns
the options as given into those words). Never a secret: a password or token secret is never
an option value (they come from the environment or a profile), only the options that name
where it is.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import NamedTuple

from pvefix.planner.model import Plan, root_flags
from pvefix.unseen import UNSAFE

# The apply flag that activates a phase of each disruption, as the phase's activation says
# (planner/plan.py): a guest reboot is the admin's, and a stopped VM's changes need no restart.
_ACTIVATE = {"vm-restart": ("--restart",), "host-reboot": ("--reboot-host",)}


class Context(NamedTuple):
    """The options of the command that prints a hint, as command-line words: `target` (the
    connection and --state-dir: every command takes them) and `guest` (the way into the guest:
    apply and rollback take it, check does not). A NamedTuple: built at start-up of `plan`,
    ten times cheaper to define than a frozen dataclass (~0.1 ms against ~0.9 ms)."""

    target: tuple[str, ...] = ()
    guest: tuple[str, ...] = ()
    plan_file: str | None = None  # the reviewed plan file: a printed apply names it, not VMID

    def command(self, words: Sequence[str], *, guest: bool = True,
                last: Sequence[str] = ()) -> str:
        """`pvefix WORDS... OPTIONS... LAST...`, each word shell-quoted (`shell_word`): what
        every hint prints. `last` comes after the options as given, so it wins over one of
        theirs (the last of an option given twice counts: `--auth password` over `--auth
        token`)."""
        argv = ["pvefix", *words, *self.target, *(self.guest if guest else ()), *last]
        return " ".join(shell_word(word) for word in argv)


# A word holding one of these is written in bash's $'...' form: printed raw they would act on
# the terminal, and printed escaped (render/inert.py) the line would run with other bytes.
_UNSEEN = re.compile(f"[{UNSAFE}\t\n\ud800-\udfff]")


def shell_word(word: str) -> str:
    """`word` as a shell word that runs as printed: shlex.quote's '...', or, for a word with a
    control, bidi, zero-width or undecodable character, $'...' with each such character as
    the \\xHH escapes of its bytes (bash, zsh and ksh read them back to exactly those bytes,
    in any locale); nothing in it acts on a terminal or is escaped again when printed."""
    if not _UNSEEN.search(word):
        return shlex.quote(word)
    out = []
    for char in word:
        if char in "\\'" or _UNSEEN.match(char):
            out += [f"\\x{b:02x}" for b in char.encode("utf-8", "surrogateescape")]
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def apply_words(plan: Plan, number: int, plan_file: str | None = None) -> list[str]:
    """`apply VMID --phase N` (or `apply PLAN_FILE --phase N`: the reviewed file, which
    carries its own P2P options) with what applying and activating phase N needs: --restart
    or --reboot-host by its disruption, and the P2P flags a fresh plan needs to derive it."""
    words = ["apply", plan_file or str(plan.observed.vmid), "--phase", str(number)]
    phase = plan.phase(number)
    stopped = phase is not None and phase.disruption == "vm-restart" and (
        plan.observed.vm_status != "running")
    # On the node itself (--local) pvefix never reboots the host it runs on: the admin does.
    local_reboot = phase is not None and phase.disruption == "host-reboot" and (
        plan.observed.access.startswith("local:"))
    if phase is not None and not stopped and not local_reboot:
        words += _ACTIVATE.get(phase.disruption, ())
    return words + ([] if plan_file else p2p_words(plan, number))


def root_words(plan: Plan, number: int) -> list[str]:
    """What an apply of phase N needs when it changes VM keys only root@pam's password ticket
    may write and the plan's connection is not that (flow/prepare.py refuses it otherwise):
    `--qm-set` or `--auth password` (planner.model `root_flags`). Printed after the options
    as given, so that they win over an `--auth token` there."""
    phase = plan.phase(number)
    if phase is None:
        return []
    return root_flags(phase.changes, plan.observed.access, plan.observed.ssh)


def p2p_words(plan: Plan, number: int) -> list[str]:
    """The flags an apply of phase 3 needs to re-derive it: none when the desired state or the
    profile asks for P2P (apply reads them too), else --p2p (and the clique map) again."""
    from pvefix.planner.rules.p2p import PHASE as P2P_PHASE

    o = plan.options
    if number != P2P_PHASE or not o.p2p or (o.p2p_from and not o.p2p_from.startswith("flag")):
        return []
    flag_map = o.clique_map and (o.clique_map_from or "").startswith("flag")
    if not (flag_map or (o.clique_map and o.clique_map_from is None)):
        return ["--p2p"]
    return ["--p2p", "--clique-map", ",".join(f"{k}={v}" for k, v in o.clique_map.items())]


def next_phase(plan: Plan, after: int) -> int | None:
    """The number of the plan's first phase after phase `after` (0: the first), if any."""
    return next((p.number for p in plan.phases if p.number > after and p.changes), None)


def next_line(plan: Plan, after: int, context: Context, *, live: bool = True,
              unbooted: bool = False) -> str:
    """What to run after phase `after` (0: nothing applied yet): the next phase's apply, or,
    when none is left, `pvefix check VMID` (the desired state the apply recorded). `live`
    False (the plan was read from a bundle): the apply needs the live node, which the bundle's
    options do not reach, so the line says so instead of `Next:`. `unbooted`: phase `after`
    wrote a host cmdline without --reboot-host: its activation comes first (the same phase,
    planned again as activation only)."""
    if unbooted and not plan.observed.access.startswith("local:"):
        return "Next: " + context.command(
            ["apply", context.plan_file or str(plan.observed.vmid), "--phase", str(after),
             "--reboot-host"])
    number = next_phase(plan, after)
    if number is None:
        return "Next: " + context.command(["check", str(plan.observed.vmid)], guest=False)
    line = context.command(apply_words(plan, number, context.plan_file if live else None),
                           last=root_words(plan, number))
    return f"Next: {line}" if live else (
        f"Next, against the live node (a bundle is read-only): {line}")
