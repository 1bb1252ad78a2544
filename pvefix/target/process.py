"""The one place pvefix starts a process on this machine (`pvesh`, `qm`, `proxmox-boot-tool`
with --local, a `*_command` secret source): an argument list, never a shell, with an
environment that carries none of pvefix's secrets.

pvefix takes secrets from its environment (PROXMOX_PASSWORD, PROXMOX_TOKEN_SECRET,
PROXMOX_VE_API_TOKEN, PVEFIX_SSH_PASSWORD, ...); a child has no use for them and could log or
leak them (a task log, a boot hook, `ps e`). So every variable named PROXMOX_* or PVEFIX_* that
names a password, secret or token is left out of a child's environment; the rest is kept
(PATH, LANG, HOME, and the other PVEFIX_* settings, which are not secret).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence

_SECRET_NAME = re.compile(r"^(PROXMOX|PVEFIX)_\w*(PASSWORD|PASSWD|SECRET|TOKEN)", re.IGNORECASE)


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) without pvefix's secrets."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if not _SECRET_NAME.match(k)}


def run_process(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `argv` (output captured as text), without pvefix's secrets in its environment.
    Raises what subprocess.run raises (FileNotFoundError, subprocess.TimeoutExpired)."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False, env=child_environment())


def run_process_bytes(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    """`run_process`, its output as bytes (a secret command's: decoded by the caller)."""
    return subprocess.run(list(argv), capture_output=True, timeout=timeout, check=False,
                          env=child_environment())


def start_process(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start `argv` without stdin, its output piped, without pvefix's secrets in its
    environment (a long command the caller waits for and may stop). Raises FileNotFoundError."""
    return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_environment())
