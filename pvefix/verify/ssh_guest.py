"""The guest over SSH: SFTP for the upload, one exec channel per command.

The connection is pvefix's own SshShell (paramiko, strict host keys, never added silently),
pointed at the guest instead of the node. A probe may run for minutes, longer than the
connection timeout, so the exec here waits for the probe's own budget.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Sequence

import paramiko

from pvefix.connection.settings import Connection
from pvefix.connection.ssh import HostKeyChanged, HostKeyUnknown, SshShell
from pvefix.errors import PvefixError
from pvefix.verify.channel import ExecResult
from pvefix.verify.guest import GuestAccess


def guest_connection(guest: GuestAccess) -> Connection:
    """The guest's SSH settings as a Connection (no API part)."""
    return Connection(
        ssh_host=guest.ssh_host, ssh_port=guest.ssh_port, ssh_user=guest.ssh_user,
        ssh_key=guest.ssh_key, ssh_password=guest.ssh_password, known_hosts=guest.known_hosts,
        accept_new_host_key=guest.accept_new_host_key, timeout=guest.connect_timeout,
    )


class SshChannel:
    """Files and commands in a guest reached over SSH."""

    def __init__(self, guest: GuestAccess) -> None:
        try:
            self.shell = SshShell(guest_connection(guest))
        except (HostKeyUnknown, HostKeyChanged) as exc:
            # Same rules as for the node; the hint names the guest's flag.
            message = exc.message.replace("--accept-new-host-key", "--guest-accept-new-host-key")
            message = message.replace("on the node", "in the guest")
            raise type(exc)(message, source=exc.source) from None
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

    def run(self, argv: Sequence[str], timeout: float) -> ExecResult:
        command = shlex.join(argv)
        try:
            channel = self.shell.transport.open_session(timeout=self.shell.timeout)
            channel.settimeout(timeout)
            channel.exec_command(command)
            stdout = channel.makefile("rb").read()
            stderr = channel.makefile_stderr("rb").read()
            code = channel.recv_exit_status()
            channel.close()
        except TimeoutError:  # socket.timeout: no byte for `timeout` seconds
            return ExecResult(tuple(argv), None, "", "", timed_out=True)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise PvefixError(f"{self.where}: {command!r}: {exc or 'closed'}") from None
        return ExecResult(tuple(argv), code, stdout.decode("utf-8", "replace"),
                          stderr.decode("utf-8", "replace"))

    def close(self) -> None:
        self.shell.close()
