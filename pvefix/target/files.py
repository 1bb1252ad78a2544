"""File operations every way into a node or a guest shares: the temporary name a replace
writes first, and what a `cat PATH` result means.

Reads are `cat PATH` (the same command over SSH, the local backend and the guest agent): its
output is the text, "No such file" means the file is absent (None), anything else is an error
that names the file. A replace never leaves half a file: the new text goes to a temporary file
beside the target, which is then renamed over it, with the old file's mode.
"""

from __future__ import annotations

import posixpath
import secrets

from pvefix.errors import PvefixError
from pvefix.target.result import CommandResult

#: Seconds a file command may take (cat, cp, mv) where the channel has no timeout of its own.
FILE_TIMEOUT_S = 60.0


class ReplaceFailed(PvefixError):
    """A replace failed; `tmp` is the temporary file it may have left (its remover tried, but
    on a broken connection only a new one can remove it)."""

    def __init__(self, message: str, *, tmp: str, source: str | None = None) -> None:
        super().__init__(message, source=source)
        self.tmp = tmp


def temp_path(path: str) -> str:
    """A fresh name beside `path` for the new text before the rename."""
    folder, name = posixpath.split(path)
    return posixpath.join(folder, f".{name}.pvefix-tmp-{secrets.token_hex(4)}")


def cat_text(result: CommandResult, path: str, where: str) -> str | None:
    """What `cat PATH` said: the file's text, None when it does not exist; PvefixError (naming
    the file and who answered) for anything else."""
    if result.ok:
        return result.stdout
    if "No such file" in result.stderr:
        return None
    detail = result.stderr.strip()[:300] or (
        "timed out" if result.timed_out else f"exit {result.exit_code}")
    raise PvefixError(f"cannot read {path}: {detail}", source=where)
