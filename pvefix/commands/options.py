"""Connection options shared by plan, apply and check, and the one call that reads the target.

Use the decorator on a typer command that takes `opts: ConnectionOptions`:

    @app.command()
    @connection_options
    def plan(vmid: int, opts: ConnectionOptions) -> None:
        state = resolve_state(opts, vmid)

The decorator adds every option below to the command's signature (so `--help` lists them with
their help text) and hands them over as one frozen ConnectionOptions value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pvefix.commands.optgroup import CONNECTION, given_argv, option_group, unset

if TYPE_CHECKING:
    from pvefix.commands.guest_options import GuestOptions
    from pvefix.hints import Context
    from pvefix.state import HostState
    from pvefix.target.guest.access import GuestAccess
    from pvefix.target.settings import Connection

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ConnectionOptions:
    """The connection flags as given on the command line (None: not given)."""

    connection: Path | None = None
    config: Path | None = None
    profile: str | None = None
    bundle: Path | None = None
    local: bool | None = None
    host: str | None = None
    port: int | None = None
    node: str | None = None
    user: str | None = None
    token_id: str | None = None
    auth: str | None = None
    insecure: bool | None = None
    ca_cert: Path | None = None
    fingerprint: str | None = None
    timeout: float | None = None
    ssh: bool | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    ssh_user: str | None = None
    ssh_key: Path | None = None
    known_hosts: Path | None = None
    accept_new_host_key: bool | None = None

    def flags(self) -> dict[str, Any]:
        """The Connection fields given as flags (file/profile/bundle selectors left out)."""
        skip = {"connection", "config", "profile", "bundle", "local"}
        values = {k: v for k, v in asdict(self).items() if k not in skip and v is not None}
        if self.local:
            values["backend"] = "local"
        return values


_OPTIONS: dict[str, tuple[Any, Any]] = {
    # One line each at 80 columns where the words allow (`-h` at most 100 lines): the
    # environment variables are said once, in ENV_NOTE; the whole story is docs/connection.md.
    "connection": (Path | None, unset(
        "--connection", "A simulator's ready file (JSON); its settings win.")),
    "config": (Path | None, unset(
        "--config", "Config file (default ~/.config/pvefix/config.toml).")),
    "profile": (str | None, unset(
        "--profile", "Profile to use (default: the file's default_profile).")),
    "bundle": (Path | None, unset(
        "--bundle", "Read a host tree (a bundle or scenario), no network.")),
    "local": (bool | None, unset(
        "--local", "Run on the node itself, as root (the API by pvesh).")),
    "host": (str | None, unset("--host", "API host name or address.")),
    "port": (int | None, unset("--port", "API port (default 8006).")),
    "node": (str | None, unset("--node", "The VM's node, saves a round trip.")),
    "user": (str | None, unset(
        "--user", "API user, e.g. root@pam (the password: PROXMOX_PASSWORD or the profile).")),
    "token_id": (str | None, unset(
        "--token-id", "API token, NAME or user@realm!NAME (the secret: PROXMOX_TOKEN_SECRET"
        " or the profile).")),
    "auth": (str | None, unset("--auth", "token, password or auto (default auto).")),
    "insecure": (bool | None, unset(
        "--insecure", "Do not check the API's TLS certificate (warns).")),
    "ca_cert": (Path | None, unset(
        "--ca-cert", "CA file: the node's /etc/pve/pve-root-ca.pem.")),
    "fingerprint": (str | None, unset(
        "--fingerprint", "Pin the API certificate's SHA-256 (hex).", metavar="SHA256")),
    "timeout": (float | None, unset("--timeout", "Seconds for the API and SSH (default 30).")),
    "ssh": (bool | None, unset("--ssh/--no-ssh", "SSH for host files and sysfs (default on).")),
    "ssh_host": (str | None, unset("--ssh-host", "SSH host (default the API host).")),
    "ssh_port": (int | None, unset("--ssh-port", "SSH port (default 22).")),
    "ssh_user": (str | None, unset("--ssh-user", "SSH user (default root).")),
    "ssh_key": (Path | None, unset("--ssh-key", "SSH private key (default: agent).")),
    "known_hosts": (Path | None, unset(
        "--known-hosts", "known_hosts (default ~/.ssh/known_hosts).")),
    "accept_new_host_key": (bool | None, unset(
        "--accept-new-host-key", "Save an unknown host key; a changed one is refused.")),
}
_TABLE = {name: (name, annotation, option) for name, (annotation, option) in _OPTIONS.items()}


# Every option of the table but these two is also read from the environment, by this rule
# (tests/commands/test_output_length.py holds it to pvefix/target/settings.py).
NO_ENV = ("bundle", "local")
PROXMOX_ENV = ("host", "port", "user", "token_id")
ENV_NOTE = ("Also from a profile or the environment (not --bundle, --local): --ssh-port is "
            "PVEFIX_SSH_PORT, --host PROXMOX_HOST (--port, --user, --token-id alike).")


def connection_options(func: F) -> F:
    """Add the connection options to a typer command that takes `opts: ConnectionOptions`."""
    return option_group("opts", ConnectionOptions, _TABLE, CONNECTION, ENV_NOTE)(func)


def hint_context(opts: ConnectionOptions, state_dir: Path | None,
                 guest: GuestOptions | None = None) -> Context:
    """The options a command printed by this one carries (pvefix/hints.py): the connection
    options as given (never --bundle: apply writes to the live node, which a bundle is not;
    never a secret: none is an option), --state-dir, and the guest options."""
    from pvefix.commands.guest_options import guest_argv
    from pvefix.hints import Context

    target = given_argv(asdict(opts), _TABLE, skip=("bundle",))
    if state_dir is not None:
        target += ["--state-dir", str(state_dir)]
    return Context(tuple(target), tuple(guest_argv(guest)) if guest is not None else ())


def resolve_connection_options(opts: ConnectionOptions) -> Connection:
    """The Connection these options, the environment and the config file describe."""
    from pvefix.target.settings import resolve_connection

    return resolve_connection(
        flags=opts.flags(), config=opts.config, profile=opts.profile,
        connection_file=opts.connection)


def resolve_states(opts: ConnectionOptions, vmids: list[int]) -> list[HostState]:
    """Read several VMs and their nodes, each node once: a bundle is loaded once; a live
    cluster is read with one API session and one SSH session per node (read_live_many)."""
    if opts.bundle is not None:
        from pvefix.sources.bundle import read_bundle_many

        return read_bundle_many(opts.bundle, vmids)
    from pvefix.sources.live import read_live_many

    return read_live_many(resolve_connection_options(opts), vmids)


def read_path_note(states: list[HostState]) -> str:
    """How several VMs were read (printed by `plan A B` and `desired A B`)."""
    nodes = sorted({s.vm.node for s in states})
    where = f"{len(states)} VMs on {len(nodes)} node(s) ({', '.join(nodes)})"
    access = states[0].access
    if access.method == "bundle":
        return f"read {where} from one host tree"
    if access.method == "local":
        return f"read {where} on this node (pvesh, local files)"
    if not access.ssh:
        return (f"read {where} through one API session, per VM (no SSH: host files, sysfs and "
                "raw configs unknown)")
    return f"read {where} through one API session and one SSH session per node"


def resolve_state(opts: ConnectionOptions, vmid: int,
                  guest: GuestAccess | None = None) -> HostState:
    """Read VM `vmid` and its node: from `--bundle` if given, else live (API + SSH, or
    local), and its guest too when `guest` is given. This is what plan, apply and check
    call."""
    if opts.bundle is not None:
        if guest is not None:
            from pvefix.errors import PvefixError

            raise PvefixError("a bundle (--bundle) is read offline: guest access "
                              "(--guest-agent, --guest-ssh-host) needs a live target")
        from pvefix.sources.bundle import read_bundle

        return read_bundle(opts.bundle, vmid)
    from pvefix.sources.live import read_live

    return read_live(resolve_connection_options(opts), vmid, guest=guest)
