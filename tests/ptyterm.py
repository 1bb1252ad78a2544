"""pvefix as an admin runs it at a terminal: stdin, stdout and stderr on a pseudo-terminal of a
given size (the window size set on it, and COLUMNS), plain text (NO_COLOR), answers typed in.

    code, text = on_pty(["plan", "100", "--bundle", str(tree)], columns=80)
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_pty(argv: list[str], *, columns: int = 80, answers: bytes = b"",
           env: Mapping[str, str] | None = None, cwd: Path | None = None,
           timeout: float = 120) -> tuple[int, str]:
    """Exit status and everything pvefix wrote (stdout and stderr, as the terminal shows
    them: `\\n` line ends, no escape sequences) for `pvefix ARGV` on a `columns`-wide
    pseudo-terminal."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    attrs = termios.tcgetattr(follower)
    attrs[3] &= ~termios.ECHO  # what is typed is not shown back: the text is pvefix's alone
    termios.tcsetattr(follower, termios.TCSANOW, attrs)
    full = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns), "LINES": "24",
            "NO_COLOR": "1", "TERM": "xterm", **(env or {})}
    full.pop("FORCE_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "pvefix", *argv], stdin=follower,
                            stdout=follower, stderr=follower, env=full, cwd=cwd,
                            start_new_session=True)
    os.close(follower)
    if answers:
        os.write(leader, answers)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk or time.monotonic() > deadline:
            break
        chunks.append(chunk)
    os.close(leader)
    code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    # What the terminal shows: rich keeps bold and dim under NO_COLOR; they take no column.
    return code, CSI.sub("", text)
