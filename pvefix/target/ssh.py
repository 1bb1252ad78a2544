"""SSH to the node through paramiko: checked host keys, one transport, concurrent commands.

Host keys are checked against a known_hosts file and never added silently: an unknown host is
refused with its SHA256 fingerprint (as `ssh` prints it) and the way to accept it;
`accept_new_host_key` trusts it on first use and writes it to the known_hosts file. A changed
key is always refused. Every command is an argument list joined with shlex.join, and the
independent ones run at once as separate exec channels of one connection.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import io
import os
import shlex
import socket
import stat
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from pvefix.errors import PvefixError, RefusedError
from pvefix.target import framed
from pvefix.target.files import ReplaceFailed, cat_text, temp_path
from pvefix.target.result import CommandResult
from pvefix.target.settings import Connection
from pvefix.target.sshlib import paramiko

__all__ = ["MAX_CHANNELS", "CommandResult", "HostKeyChanged", "HostKeyUnknown", "KnownHosts",
           "SshShell", "load_known_hosts"]

# The most one command may print (each of stdout, stderr): above the bulk read's bound
# (sources/pmxcfs.py MAX_STREAM); a node sending more is not answering a command of pvefix.
READ_LIMIT = 256 * 1024 * 1024
# OpenSSH's sshd allows 10 sessions per connection (MaxSessions); stay under it.
MAX_CHANNELS = 8


def run_each(run: Callable[[Sequence[str]], CommandResult],
             commands: Sequence[Sequence[str]]) -> list[CommandResult]:
    """Independent commands at once (at most MAX_CHANNELS at a time), each by `run` on its own
    channel or process; results in order."""
    if not commands:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_CHANNELS, len(commands))) as pool:
        return list(pool.map(run, commands))


class HostKeyUnknown(RefusedError):
    """The SSH host is not in known_hosts (and trust on first use was not asked for)."""


class HostKeyChanged(RefusedError):
    """The SSH host presents a different key than known_hosts records."""


def openssh_fingerprint(key: paramiko.PKey) -> str:
    """`SHA256:...` as `ssh-keygen -lf` and ssh's prompts print it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class HostKeyRevoked(RefusedError):
    """The SSH host presents a key that known_hosts marks @revoked."""


@dataclass
class KnownHosts:
    """An OpenSSH known_hosts file: its lines, and the keys marked `@revoked` (as "type
    base64"), never trusted. A host's keys are found in one pass over the lines (linear: a
    line that cannot name the host is skipped by a substring test), parsed only then."""

    lines: list[str] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)

    def keys_for(self, name: str) -> list[paramiko.PKey]:
        """Every usable key known for `name` (as `known_hosts_name` spells it), in file order,
        revoked ones left out. OpenSSH accepts a host presenting any one of them."""
        keys: list[paramiko.PKey] = []
        for line in self.lines:
            if name not in line and "|1|" not in line:
                continue
            fields = line.split()
            if len(fields) < 3 or fields[0].startswith(("@", "#")) \
                    or not any(_names(host, name) for host in fields[0].split(",")) \
                    or f"{fields[1]} {fields[2]}" in self.revoked:
                continue
            key = _parse_key(fields[1], fields[2])
            if key is not None and all(key != k for k in keys):
                keys.append(key)
        return keys


def _names(host: str, name: str) -> bool:
    """Does a known_hosts host field (plain, or hashed `|1|salt|hash`: HMAC-SHA1 of the name
    keyed with the salt, as OpenSSH writes it) name `name`?"""
    if not host.startswith("|1|"):
        return host == name
    parts = host.split("|")
    if len(parts) != 4:
        return False
    try:
        salt = binascii.a2b_base64(parts[2])
    except ValueError:  # binascii.Error: broken base64, that entry names nothing
        return False
    mine = binascii.b2a_base64(hmac.digest(salt, name.encode(), "sha1"), newline=False)
    return mine.decode() == parts[3]


def load_known_hosts(path: Path) -> KnownHosts:
    """Read an OpenSSH known_hosts file (linear time: 100,000 lines in well under a second).
    Lines pvefix cannot use are skipped, never fatal: `@cert-authority` (pvefix checks plain
    host keys only), bad base64, unknown key types (found when a host's keys are parsed). A
    missing file is an empty one."""
    from pvefix.hosttree import safe

    try:  # bounded, a regular file (a FIFO cannot hang it); links are the user's own
        data = safe.read_bytes(path, Path("/"), safe.FILE_CAP)
    except NotADirectoryError:
        data = None
    except PvefixError as exc:
        raise PvefixError(f"cannot read known_hosts: {exc.message}", source=str(path)) from None
    lines = (data or b"").decode("utf-8", "replace").splitlines()
    revoked = set()
    for line in lines:
        if line.lstrip().startswith("@revoked"):
            fields = line.split()
            if len(fields) >= 4:
                revoked.add(f"{fields[2]} {fields[3]}")
    return KnownHosts(lines, revoked)


def _parse_key(keytype: str, data: str) -> paramiko.PKey | None:
    """One known_hosts key, or None when paramiko cannot use it (it raises several kinds for
    bad base64, a broken key or an unknown type)."""
    try:
        entry = paramiko.hostkeys.HostKeyEntry.from_line(f"h {keytype} {data}")
    except Exception:
        return None
    return None if entry is None else entry.key


def _refuse_revoked(revoked: set[str], hostname: str, key: paramiko.PKey,
                    known_hosts: Path) -> None:
    if f"{key.get_name()} {key.get_base64()}" in revoked:
        raise HostKeyRevoked(
            f"SSH host key of {hostname} ({key.get_name()} {openssh_fingerprint(key)}) is "
            "marked @revoked in known_hosts; pvefix does not connect", source=str(known_hosts))


def _keyscan(host: str, port: int, known: Path, keytype: str | None = None) -> str:
    """The `ssh-keyscan` line that adds `host`'s key to `known`, as OpenSSH names it there
    (`[HOST]:PORT` off port 22): shell-quoted, to run as printed."""
    argv = ["ssh-keyscan", *(["-t", keytype] if keytype else []), "-p", str(port), host]
    return f"{shlex.join(argv)} >> {shlex.quote(str(known))}"


def _keygen_remove(host: str, port: int, known: Path) -> str:
    """The `ssh-keygen -R` line that removes `host`'s keys from `known` (with `-f` unless it
    is OpenSSH's own default file)."""
    default = Path.home() / ".ssh" / "known_hosts"
    where = [] if known == default else ["-f", str(known)]
    return shlex.join(["ssh-keygen", *where, "-R", known_hosts_name(host, port)])


class _Refuse(paramiko.RejectPolicy):
    def __init__(self, known_hosts: Path, revoked: set[str], host: str, port: int) -> None:
        self.known_hosts = known_hosts
        self.revoked = revoked
        self.host, self.port = host, port

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> NoReturn:
        _refuse_revoked(self.revoked, hostname, key, self.known_hosts)
        raise HostKeyUnknown(
            f"SSH host key of {hostname} is not known ({key.get_name()} "
            f"{openssh_fingerprint(key)}). Check it on the node with "
            "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`; if it matches, accept it "
            f"once with --accept-new-host-key (it is then saved to {self.known_hosts}), or "
            "add it yourself: "
            + _keyscan(self.host, self.port, self.known_hosts, key.get_name()),
            source=str(self.known_hosts))


class _TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path, revoked: set[str]) -> None:
        self.known_hosts = known_hosts
        self.revoked = revoked

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        _refuse_revoked(self.revoked, hostname, key, self.known_hosts)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        fd = os.open(self.known_hosts, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        print(
            f"pvefix: trusting new SSH host key of {hostname} ({key.get_name()} "
            f"{openssh_fingerprint(key)}), saved to {self.known_hosts}",
            file=sys.stderr, flush=True)


class _OtherKnownKey(Exception):
    """The host showed a key known_hosts holds for it, not the one paramiko checked first."""

    def __init__(self, key: paramiko.PKey) -> None:
        super().__init__("another known key")
        self.key = key


def _bad_host_key(exc: paramiko.BadHostKeyException, address: tuple[str, int], known: Path,
                  revoked: set[str], keys: list[paramiko.PKey],
                  checked: dict[str, paramiko.PKey]) -> NoReturn:
    """What a key other than the one paramiko checked means, as OpenSSH decides: a revoked
    key is refused; one of the host's known keys is accepted (`_OtherKnownKey`: connect
    again); with no known key of its type the host is unknown, not changed; only a key
    unlike every known key of its own type is CHANGED."""
    shown = exc.key
    host = known_hosts_name(*address)  # as known_hosts and OpenSSH name it: [HOST]:PORT
    _refuse_revoked(revoked, host, shown, known)
    if any(k == shown for k in keys) and checked.get(shown.get_name()) != shown:
        raise _OtherKnownKey(shown)
    same_type = [k for k in keys if k.get_name() == shown.get_name()]
    if not same_type:
        types = ", ".join(sorted({k.get_name() for k in keys}))
        raise HostKeyUnknown(
            f"SSH host key of {host} is not known ({shown.get_name()} "
            f"{openssh_fingerprint(shown)}); known_hosts holds only {types} for it. Check it "
            "on the node with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub`; if it matches, add "
            "it: " + _keyscan(*address, known, shown.get_name()),
            source=str(known))
    raise HostKeyChanged(
        f"SSH host key of {host} CHANGED: known_hosts has "
        + ", ".join(openssh_fingerprint(k) for k in same_type)
        + f" ({shown.get_name()}), the server shows {openssh_fingerprint(shown)}. This may be "
        "an attack; if the node was reinstalled, remove the old key: "
        + _keygen_remove(*address, known) + " ; then check the new one on the node with"
        " `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` and add it: "
        + _keyscan(*address, known, shown.get_name()), source=str(known))


def refuse_open_private_key(path: Path) -> None:
    """Refuse a private key file of the user's own that group or others may read or write, as
    OpenSSH does ("UNPROTECTED PRIVATE KEY FILE"), naming the chmod that fixes it."""
    try:
        st = path.stat()
    except OSError:
        return  # missing or unreadable: paramiko's own error names it
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == os.getuid() and mode & 0o077:
        raise PvefixError(
            f"private key {path} is open to others (mode {mode:04o}); OpenSSH refuses such a "
            f"key, and so does pvefix: run `chmod 600 {shlex.quote(str(path))}`",
            source=str(path))


class SshShell:
    """One SSH connection to the node; run commands on it, many at once."""

    def __init__(self, conn: Connection) -> None:
        host = conn.effective_ssh_host
        if not host:
            raise PvefixError("no SSH host: set --ssh-host or --host")
        self.where = f"{conn.ssh_user}@{host}:{conn.ssh_port}"
        self.timeout = conn.timeout
        self.exec_count = 0
        known = conn.expanded(conn.known_hosts)
        if conn.ssh_key:
            refuse_open_private_key(conn.expanded(conn.ssh_key))
        hosts = load_known_hosts(known)
        keys = hosts.keys_for(known_hosts_name(host, conn.ssh_port))
        try:
            client = self._connect(conn, host, known, hosts.revoked, keys)
        except _OtherKnownKey as other:
            # The host showed a key known_hosts also holds for it, beside another of its type
            # that paramiko checked (OpenSSH accepts any matching one): once more, with it.
            client = self._connect(conn, host, known, hosts.revoked, [other.key, *keys])
        transport = client.get_transport()
        assert transport is not None
        self.client = client
        self.transport = transport

    def _connect(self, conn: Connection, host: str, known: Path, revoked: set[str],
                 keys: list[paramiko.PKey]) -> paramiko.SSHClient:
        """A client connected to `host`, its host key checked: paramiko checks the first key
        of each type in `keys`; a host with none is asked of the policy (unknown)."""
        client = paramiko.SSHClient()
        name = known_hosts_name(host, conn.ssh_port)
        first: dict[str, paramiko.PKey] = {}
        for key in keys:
            first.setdefault(key.get_name(), key)
        for keytype, key in first.items():
            client.get_host_keys().add(name, keytype, key)
        policy: paramiko.MissingHostKeyPolicy = (
            _TrustOnFirstUse(known, revoked) if conn.accept_new_host_key
            else _Refuse(known, revoked, host, conn.ssh_port))
        client.set_missing_host_key_policy(policy)
        try:
            # Our own socket, to set TCP_NODELAY as OpenSSH does: small command round trips
            # otherwise wait on Nagle and delayed ACKs (~40 ms each).
            sock = socket.create_connection((host, conn.ssh_port), timeout=conn.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.connect(
                host,
                port=conn.ssh_port, username=conn.ssh_user,
                password=conn.ssh_password.get_secret_value() if conn.ssh_password else None,
                key_filename=str(conn.expanded(conn.ssh_key)) if conn.ssh_key else None,
                allow_agent=conn.ssh_agent, look_for_keys=False, timeout=conn.timeout,
                banner_timeout=conn.timeout, auth_timeout=conn.timeout, sock=sock)
        except paramiko.BadHostKeyException as exc:
            client.close()
            _bad_host_key(exc, (host, conn.ssh_port), known, revoked, keys, first)
        except paramiko.AuthenticationException:
            client.close()
            raise PvefixError(
                f"SSH authentication failed for {self.where} (tried: "
                f"{_methods(conn)})"
            ) from None
        except (ConnectionRefusedError, ConnectionResetError) as exc:
            client.close()
            raise PvefixError(f"cannot connect over SSH to {self.where}: the node is away "
                              f"({exc.strerror or type(exc).__name__}; rebooting or down?)"
                              ) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            raise PvefixError(f"cannot connect over SSH to {self.where}: {exc}") from None
        except RefusedError:
            client.close()
            raise
        except Exception as exc:  # a bad key file and the like: name it, never a traceback
            client.close()
            raise PvefixError(f"cannot connect over SSH to {self.where}: "
                              f"{type(exc).__name__}") from None
        return client

    def execute(self, argv: Sequence[str], timeout: float | None = None, *,
                errors: str = "surrogateescape") -> CommandResult:
        """The one exec loop: run an argument list (quoted with shlex.join) on its own channel.
        A command not done within `timeout` seconds (default: the connection's) comes back
        `timed_out`: an overall deadline, so a node sending a byte now and then cannot stretch
        it. Output past READ_LIMIT or a broken connection is a PvefixError. `errors` decodes
        the output."""
        command = shlex.join(argv)
        self.exec_count += 1
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            channel = self.transport.open_session(timeout=self.timeout)
            try:
                channel.exec_command(command)
                stdout = _read_until(channel, channel.recv, deadline)
                stderr = _read_until(channel, channel.recv_stderr, deadline)
                if not channel.status_event.wait(max(deadline - time.monotonic(), 0.0)):
                    raise TimeoutError
                code = channel.recv_exit_status()
            finally:
                channel.close()
        except TimeoutError:  # socket.timeout: the deadline passed
            return CommandResult(tuple(argv), None, "", "", timed_out=True)
        except _TooMuch:
            raise PvefixError(f"SSH command {command!r} on {self.where}: more than "
                              f"{READ_LIMIT >> 20} MiB of output") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise PvefixError(f"SSH command {command!r} on {self.where}: "
                              f"{exc or 'closed'}") from None
        return CommandResult(tuple(argv), code, stdout.decode("utf-8", errors),
                             stderr.decode("utf-8", errors))

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run one command on the node; one that outlasts the connection's timeout is a
        PvefixError (a node command that hangs is a failure, not a result)."""
        result = self.execute(argv)
        if result.timed_out:
            raise PvefixError(f"SSH command {shlex.join(argv)!r} on {self.where}: not done "
                              f"within {self.timeout:g} s (--timeout)")
        return result

    def read_file(self, path: str) -> str | None:
        """`cat PATH`: its text (None when it does not exist)."""
        return cat_text(self.run(["cat", path]), path, self.where)

    def replace_file(self, path: str, text: str) -> None:
        """Replace `path` atomically: SFTP writes a temporary file beside it with the old
        file's mode, then renames it over `path` (posix-rename). A reader never sees half a
        file; a failure removes the temporary file (on a new channel if this one broke)."""
        tmp = temp_path(path)
        data = text.encode("utf-8", "surrogateescape")
        try:
            sftp = self.client.open_sftp()
            try:
                mode: int | None = None
                with contextlib.suppress(OSError):
                    mode = sftp.stat(path).st_mode
                sftp.putfo(io.BytesIO(data), tmp)
                if mode is not None:
                    sftp.chmod(tmp, mode & 0o7777)
                sftp.posix_rename(tmp, path)
            finally:
                with contextlib.suppress(Exception):
                    sftp.close()
        except Exception as exc:  # OSError, EOFError, paramiko's SSHException family
            with contextlib.suppress(Exception):
                self.execute(["rm", "-f", tmp])
            raise ReplaceFailed(f"cannot write {path}: {type(exc).__name__}: {exc}",
                                tmp=tmp, source=self.where) from None

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        """Run independent commands at once, each on its own channel; results in order."""
        return run_each(self.run, commands)

    def run_batch(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        """Short, read-only commands one after another on one channel (pvefix.target.framed),
        each with its own output and status; if the frames do not come back whole (a shell
        that is not sh), each command on its own channel instead; so too when the script
        would not fit one exec's command line (framed.fits)."""
        if len(commands) < 2 or not framed.fits(commands):
            return self.run_many(commands)
        nonce = framed.new_nonce()
        result = self.run(framed.framed_argv(commands, nonce))
        try:
            return framed.unframe(commands, nonce, result, self.where)
        except PvefixError:
            return self.run_many(commands)

    def close(self) -> None:
        self.client.close()


class _TooMuch(Exception):
    """A command printed more than READ_LIMIT."""


def _read_until(channel: paramiko.Channel, recv: Callable[[int], bytes],
                deadline: float) -> bytearray:
    """One of the channel's streams to its end, by the deadline (TimeoutError after it) and
    within READ_LIMIT (_TooMuch past it)."""
    out = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        channel.settimeout(left)
        chunk = recv(65536)
        if not chunk:
            return out  # decoded as it is: no copy of up to READ_LIMIT
        out += chunk
        if len(out) > READ_LIMIT:
            raise _TooMuch


def _methods(conn: Connection) -> str:
    methods = []
    if conn.ssh_key:
        methods.append(f"key {conn.ssh_key}")
    if conn.ssh_agent:
        methods.append("agent")
    if conn.ssh_password is not None:
        methods.append("password")
    return ", ".join(methods) or "none configured"


def same_node(hostname: str, node: str) -> bool:
    """Is the far side's `hostname` the Proxmox node `node`? (Proxmox names a node by its
    short host name.)"""
    return hostname.strip().split(".")[0].lower() == node.split(".")[0].lower()


def node_mismatch(where: str, hostname: str, node: str, vmid: int | None = None) -> str:
    vm = f"VM {vmid} lives on" if vmid is not None else "the target is"
    return (
        f"SSH to {where} reaches node '{hostname.strip()}', but {vm} node '{node}'; nothing was"
        f" used or written. Point SSH at {node}: `[profiles.NAME.ssh.nodes] {node} ="
        ' "ADDRESS"` in the config file, or --ssh-host'
    )
