"""The SSH side of the simulated node: paramiko server with key/password auth, exec and SFTP."""

from __future__ import annotations

import base64
import contextlib
import hmac
import socket
import threading
import time
from typing import Any

from pvefix.sim.commands import Shell
from pvefix.sim.commands_rehearse import client_gone
from pvefix.sim.sftp import SimSFTPServer
from pvefix.sim.state import NodeState
from pvefix.sim.stats import stats_for
from pvefix.sim.tls import SimKeys
from pvefix.target.sshlib import paramiko

AUTH_FAILED = paramiko.common.AUTH_FAILED
AUTH_SUCCESSFUL = paramiko.common.AUTH_SUCCESSFUL
OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED = paramiko.common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
OPEN_SUCCEEDED = paramiko.common.OPEN_SUCCEEDED

_CHANNEL_REPLIES = (99, 100)  # SSH_MSG_CHANNEL_SUCCESS, SSH_MSG_CHANNEL_FAILURE


class _Transport(paramiko.Transport):
    """Tells exec workers when the reply to their request is on the wire.

    paramiko sends the CHANNEL_SUCCESS reply only after check_channel_exec_request returns; a
    fast command could otherwise send its output and close the channel before that reply, and
    the client would see "Channel closed".
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self.exec_waiters: dict[int, threading.Event] = {}

    def _send_user_message(self, data: Any) -> None:
        raw = data.asbytes() if hasattr(data, "asbytes") else bytes(data)
        event = None
        if len(raw) >= 5 and raw[0] in _CHANNEL_REPLIES:
            event = self.exec_waiters.pop(int.from_bytes(raw[1:5], "big"), None)
        super()._send_user_message(data)  # type: ignore[misc]
        if event is not None:
            event.set()


class _Interface(paramiko.ServerInterface):
    def __init__(self, server: SshServer) -> None:
        self.sim = server
        self.transport: _Transport | None = None

    def get_allowed_auths(self, username: str) -> str:
        return "publickey,password"

    def check_auth_password(self, username: str, password: str) -> int:
        if username == "root" and hmac.compare_digest(
            password.encode("utf-8", "surrogateescape"), self.sim.keys.password.encode()
        ):
            return int(AUTH_SUCCESSFUL)
        return int(AUTH_FAILED)

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        offered = f"{key.get_name()} {base64.b64encode(key.asbytes()).decode()}"
        if username == "root" and offered == self.sim.keys.root_pub:
            return int(AUTH_SUCCESSFUL)
        return int(AUTH_FAILED)

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return int(OPEN_SUCCEEDED)
        return int(OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED)

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        text = command.decode("utf-8", "replace")
        stats_for(self.sim.state).ssh_channel("exec")
        replied = threading.Event()
        if isinstance(self.transport, _Transport):
            self.transport.exec_waiters[channel.remote_chanid] = replied
        threading.Thread(
            target=self.sim.run_exec, args=(channel, text, replied), daemon=True,
            name="sim-ssh-exec",
        ).start()
        return True

    def check_channel_subsystem_request(self, channel: paramiko.Channel, name: str) -> bool:
        stats_for(self.sim.state).ssh_channel(name)
        return bool(super().check_channel_subsystem_request(channel, name))

    def check_channel_pty_request(self, *args: Any) -> bool:
        return True


class SshServer:
    """Accepts SSH connections on 127.0.0.1 and serves them until `stop()`."""

    def __init__(self, state: NodeState, keys: SimKeys, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.state = state
        self.keys = keys
        self.host_key = paramiko.Ed25519Key.from_private_key_file(str(keys.host_key))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.port: int = self.sock.getsockname()[1]
        self._transports: set[paramiko.Transport] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="sim-ssh")

    def start(self) -> None:
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self._stopped.is_set():  # woken by stop(): never serve with a stopped node's key
                conn.close()
                return
            if self.state.is_down():
                conn.close()  # rebooting: nobody answers
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="sim-ssh-conn").start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as sshd does
        transport = _Transport(conn)
        transport.add_server_key(self.host_key)
        iface = _Interface(self)
        iface.transport = transport
        transport.set_subsystem_handler("sftp", paramiko.SFTPServer, SimSFTPServer, self.state)
        with self._lock:
            self._transports.add(transport)
        try:
            transport.start_server(server=iface)
            stats_for(self.state).ssh_connection(self.state.node)
        except (paramiko.SSHException, OSError, EOFError):
            transport.close()
        while transport.is_active() and not self._stopped.is_set():
            time.sleep(0.2)
        transport.close()
        with self._lock:
            self._transports.discard(transport)

    def run_exec(self, channel: paramiko.Channel, command: str,
                 replied: threading.Event | None = None) -> None:
        if replied is not None:
            replied.wait(5)
        with stats_for(self.state).busy():
            latency = self.state.faults.latency_s
            if latency:
                time.sleep(latency)
            with client_gone(lambda: _gone(channel)):
                result = Shell(self.state).run(command)
        try:
            if result.stdout:
                _send(channel, result.stdout.encode("utf-8", "surrogateescape"),
                      self.state.faults.drip_s)
            if result.stderr:
                channel.sendall_stderr(result.stderr.encode("utf-8", "surrogateescape"))
            channel.send_exit_status(result.code)
        except (OSError, EOFError, paramiko.SSHException):
            pass
        finally:
            with contextlib.suppress(Exception):
                channel.shutdown_write()
                channel.close()
        for action in result.after:
            action()
        if self.state.is_down():
            # The host went down: give the client a moment to read the exit status.
            time.sleep(0.2)
            self.drop_all()

    def drop_all(self) -> None:
        with self._lock:
            transports = list(self._transports)
        for transport in transports:
            with contextlib.suppress(Exception):
                transport.close()

    def stop(self) -> None:
        self._stopped.set()
        # close() alone does not wake a thread blocked in accept(): the kernel socket would keep
        # listening (and answering) after stop. shutdown() wakes it; then the port is released.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.drop_all()


def _gone(channel: paramiko.Channel) -> bool:
    """The client of `channel` has closed it or dropped the connection."""
    transport = channel.get_transport()
    return bool(channel.closed or transport is None or not transport.is_active())


def _send(channel: paramiko.Channel, data: bytes, drip: float) -> None:
    """All of `data`, or with the drip fault one byte every `drip` seconds."""
    if not drip:
        channel.sendall(data)
        return
    for at in range(len(data)):
        if channel.closed:
            return
        channel.sendall(data[at:at + 1])
        time.sleep(drip)
