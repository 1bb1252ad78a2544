"""Files and checked commands in a guest, over either channel (SSH or the QEMU guest agent).

Reads are `cat PATH` (the same command on both channels; a missing file reads as None).
Replacing a file never leaves half a file behind: the new text goes to a temporary file in the
same folder, which is then renamed over the target.

- SSH: SFTP writes the temporary file (with the old file's mode), then an SFTP rename.
- Agent: file-write replaces a file's content but creates new files with the agent's own
  mode, so the old file is first copied (`cp -p`, keeping its mode and owner) to the temporary
  name, file-write overwrites its content, and `mv` renames it over the target.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import secrets
from collections.abc import Sequence

from pvefix.errors import PvefixError
from pvefix.verify.channel import ExecResult, GuestChannel

#: Seconds a file command may take in the guest (cat, cp, mv).
FILE_TIMEOUT_S = 60.0
#: Seconds a boot loader refresh may take (update-grub scans every kernel).
REFRESH_TIMEOUT_S = 300.0


def guest_check(channel: GuestChannel, argv: Sequence[str],
                timeout: float = FILE_TIMEOUT_S) -> ExecResult:
    """Run `argv` in the guest; PvefixError with its last stderr line unless it exits 0."""
    result = channel.run(argv, timeout)
    if result.timed_out:
        raise PvefixError(f"`{' '.join(argv)}` did not finish within {timeout:g} s",
                          source=channel.where)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise PvefixError(f"`{' '.join(argv)}` exited with {result.exit_code}"
                          + (f": {detail[-1][:300]}" if detail else ""), source=channel.where)
    return result


def read_guest_file(channel: GuestChannel, path: str) -> str | None:
    """A guest file's text (None when it does not exist)."""
    result = channel.run(["cat", path], FILE_TIMEOUT_S)
    if result.ok:
        return result.stdout
    if "No such file" in result.stderr:
        return None
    detail = result.stderr.strip()[:300] or f"exit {result.exit_code}"
    raise PvefixError(f"cannot read {path} in the guest: {detail}", source=channel.where)


def temp_path(path: str) -> str:
    folder, name = posixpath.split(path)
    return posixpath.join(folder, f".{name}.pvefix-tmp-{secrets.token_hex(4)}")


def replace_guest_file(channel: GuestChannel, path: str, text: str) -> None:
    """Replace `path` in the guest with `text` (temporary file + rename, mode kept)."""
    from pvefix.verify.agent import AgentChannel

    tmp = temp_path(path)
    data = text.encode("utf-8", "surrogateescape")
    try:
        if isinstance(channel, AgentChannel):
            guest_check(channel, ["cp", "-p", path, tmp])
            channel.write_file(tmp, data)
            guest_check(channel, ["mv", "-f", tmp, path])
        else:
            _sftp_replace(channel, path, tmp, data)
    except PvefixError:
        with contextlib.suppress(PvefixError):
            channel.run(["rm", "-f", tmp], FILE_TIMEOUT_S)
        raise


def _sftp_replace(channel: GuestChannel, path: str, tmp: str, data: bytes) -> None:
    import paramiko

    from pvefix.verify.ssh_guest import SshChannel

    if not isinstance(channel, SshChannel):
        raise PvefixError(f"cannot write files through {channel.where}")
    try:
        sftp = channel.shell.client.open_sftp()
        try:
            mode: int | None = None
            with contextlib.suppress(OSError):
                mode = sftp.stat(path).st_mode
            sftp.putfo(io.BytesIO(data), tmp)
            if mode is not None:
                sftp.chmod(tmp, mode & 0o7777)
            sftp.posix_rename(tmp, path)
        finally:
            sftp.close()
    except (OSError, EOFError, paramiko.SSHException) as exc:
        raise PvefixError(f"cannot write {path} in the guest: {exc}",
                          source=channel.where) from None
