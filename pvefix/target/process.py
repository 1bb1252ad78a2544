"""The one place pvefix starts a process on this machine (`pvesh`, `qm`, `proxmox-boot-tool`
with --local, a `*_command` secret source): an argument list, never a shell, with an
environment that carries none of pvefix's secrets.

pvefix takes secrets from its environment (PROXMOX_PASSWORD, PROXMOX_TOKEN_SECRET,
PROXMOX_VE_API_TOKEN, PVEFIX_SSH_PASSWORD, ...); a child has no use for them and could log or
leak them (a task log, a boot hook, `ps e`). So every variable named PROXMOX_* or PVEFIX_* that
names a password, secret or token is left out of a child's environment; the rest is kept
(PATH, LANG, HOME, and the other PVEFIX_* settings, which are not secret).

Every child runs in its own session, so its process group is its own: past its time it is
stopped as a group (SIGTERM, then SIGKILL after `GRACE` seconds), grandchildren included, and
every wait is bounded. A child that ignores TERM, or leaves a grandchild holding its output
(`sh -c "sleep 8 & echo started"`), cannot keep pvefix past its time by more than the grace
(twice it, where even SIGKILL leaves a pipe open: then the output so far is dropped).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence

_SECRET_NAME = re.compile(r"^(PROXMOX|PVEFIX)_\w*(PASSWORD|PASSWD|SECRET|TOKEN)", re.IGNORECASE)


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) without pvefix's secrets."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if not _SECRET_NAME.match(k)}


GRACE = 2.0  # seconds from SIGTERM to SIGKILL, and from SIGKILL to giving up on the pipes


def run_process(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `argv` (output captured as text), without pvefix's secrets in its environment.
    Raises FileNotFoundError, or subprocess.TimeoutExpired once its group is stopped."""
    done = run_process_bytes(argv, timeout)
    return subprocess.CompletedProcess(done.args, done.returncode,
                                       done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))


def run_process_bytes(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    """`run_process`, its output as bytes (a secret command's: decoded by the caller)."""
    proc = start_process(argv)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        raise subprocess.TimeoutExpired(list(argv), timeout) from None
    except BaseException:  # Ctrl-C: the child's group goes too
        stop_group(proc)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def start_process(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start `argv` without stdin, its output piped, without pvefix's secrets in its
    environment, in a session (and so a process group) of its own: a long command the caller
    waits for and may stop with `stop_group`. Raises FileNotFoundError."""
    return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_environment(),
                            start_new_session=True)


def stop_group(proc: subprocess.Popen[bytes], grace: float = GRACE) -> tuple[bytes, bytes]:
    """Stop `proc` and everything in its process group: SIGTERM, SIGKILL after `grace`
    seconds, each wait bounded. Returns the output collected (empty when a process outside
    the group still held the pipes after the KILL: they are closed and it is left behind)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_group(proc.pid, sig)
        try:
            return proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    return b"", b""


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal the group the child leads (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
