"""The guest over SSH: SFTP for the upload, one exec channel per command.

The connection is pvefix's own SshShell (paramiko, strict host keys, never added silently),
pointed at the guest instead of the node. A probe may run for minutes, longer than the
connection timeout, so the exec here waits for the probe's own budget.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from pvefix.errors import PvefixError
from pvefix.target.guest.access import GuestAccess
from pvefix.target.guest.channel import cat_file
from pvefix.target.result import CommandResult
from pvefix.target.settings import Connection
from pvefix.target.ssh import SshShell
from pvefix.target.sshlib import paramiko


def guest_connection(guest: GuestAccess) -> Connection:
    """The guest's SSH settings as a Connection (no API part)."""
    return Connection(
        ssh_host=guest.ssh_host, ssh_port=guest.ssh_port, ssh_user=guest.ssh_user,
        ssh_key=guest.ssh_key, ssh_password=guest.ssh_password, known_hosts=guest.known_hosts,
        accept_new_host_key=guest.accept_new_host_key, timeout=guest.connect_timeout)


class SshChannel:
    """Files and commands in a guest reached over SSH."""

    def __init__(self, shell: SshShell) -> None:
        """`shell` is the guest's SSH session (pvefix.target.open.open_guest opens it)."""
        self.shell = shell
        self.where = f"SSH {self.shell.where}"

    def upload(self, path: str, data: bytes) -> None:
        try:
            sftp = self.shell.client.open_sftp()
            try:
                sftp.putfo(io.BytesIO(data), path)
                sftp.chmod(path, 0o600)
            finally:
                sftp.close()
        except (OSError, paramiko.SSHException) as exc:
            raise PvefixError(f"{self.where}: cannot upload {path}: {exc}") from None

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult:
        # The shell's exec loop, waiting for the probe's own budget; the guest's output is
        # decoded with replacement characters (the probe's JSON must stay valid text).
        return self.shell.execute(argv, timeout, errors="replace")

    def read_file(self, path: str) -> str | None:
        """`cat PATH` in the guest (None when the file does not exist)."""
        return cat_file(self, path)

    def replace_file(self, path: str, text: str) -> None:
        """The shell's SFTP replace: a temporary file beside `path` with its mode, then a
        posix-rename; a failure removes the temporary file."""
        self.shell.replace_file(path, text)

    def close(self) -> None:
        self.shell.close()
