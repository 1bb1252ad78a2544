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

import typer

from pvefix.commands.optgroup import CONNECTION, given_argv, option_group

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
    "connection": (Path | None, typer.Option(
        None, "--connection", help="A simulator's ready file (JSON); its settings win.",
        show_default=False)),
    "config": (Path | None, typer.Option(
        None, "--config", help="Config file (default ~/.config/pvefix/config.toml).",
        show_default=False)),
    "profile": (str | None, typer.Option(
        None, "--profile", help="Profile to use (default: the file's "
        "default_profile).", show_default=False)),
    "bundle": (Path | None, typer.Option(
        None, "--bundle", help="Read a host tree (a bundle or scenario), no network.",
        show_default=False)),
    "local": (bool | None, typer.Option(
        None, "--local", help="Run on the node itself, as root (the API by pvesh).",
        show_default=False)),
    "host": (str | None, typer.Option(
        None, "--host", help="API host name or address.",
        show_default=False)),
    "port": (int | None, typer.Option(
        None, "--port", help="API port (default 8006).", show_default=False)),
    "node": (str | None, typer.Option(
        None, "--node", help="The VM's node, saves a round trip.",
        show_default=False)),
    "user": (str | None, typer.Option(
        None, "--user", help="API user, e.g. root@pam (the password: "
        "PROXMOX_PASSWORD or the profile).", show_default=False)),
    "token_id": (str | None, typer.Option(
        None, "--token-id", help="API token, NAME or user@realm!NAME ("
        "the secret: PROXMOX_TOKEN_SECRET or the profile).", show_default=False)),
    "auth": (str | None, typer.Option(
        None, "--auth", help="token, password or auto (default auto).",
        show_default=False)),
    "insecure": (bool | None, typer.Option(
        None, "--insecure", help="Do not check the API's TLS certificate (warns).",
        show_default=False)),
    "ca_cert": (Path | None, typer.Option(
        None, "--ca-cert", help="CA file: the node's /etc/pve/pve-root-ca.pem.",
        show_default=False)),
    "fingerprint": (str | None, typer.Option(
        None, "--fingerprint", metavar="SHA256", help="Pin the API certificate's SHA-256 (hex).",
        show_default=False)),
    "timeout": (float | None, typer.Option(
        None, "--timeout", help="Seconds for the API and SSH (default 30).",
        show_default=False)),
    "ssh": (bool | None, typer.Option(
        None, "--ssh/--no-ssh", help="SSH for host files and sysfs (default "
        "on).", show_default=False)),
    "ssh_host": (str | None, typer.Option(
        None, "--ssh-host", help="SSH host (default the API host).",
        show_default=False)),
    "ssh_port": (int | None, typer.Option(
        None, "--ssh-port", help="SSH port (default 22).",
        show_default=False)),
    "ssh_user": (str | None, typer.Option(
        None, "--ssh-user", help="SSH user (default root).",
        show_default=False)),
    "ssh_key": (Path | None, typer.Option(
        None, "--ssh-key", help="SSH private key (default: agent).",
        show_default=False)),
    "known_hosts": (Path | None, typer.Option(
        None, "--known-hosts", help="known_hosts (default "
        "~/.ssh/known_hosts).", show_default=False)),
    "accept_new_host_key": (bool | None, typer.Option(
        None, "--accept-new-host-key", help="Save an unknown host key; a changed one is "
        "refused.", show_default=False)),
}


# Every option of the table but these two is also read from the environment, by this rule
# (tests/commands/test_output_length.py holds it to pvefix/target/settings.py).
NO_ENV = ("bundle", "local")
PROXMOX_ENV = ("host", "port", "user", "token_id")
ENV_NOTE = ("Also from a profile or the environment (not --bundle, --local): --ssh-port is "
            "PVEFIX_SSH_PORT, --host PROXMOX_HOST (--port, --user, --token-id alike).")


def connection_options(func: F) -> F:
    """Add the connection options to a typer command that takes `opts: ConnectionOptions`."""
    table = {name: (name, annotation, option) for name, (annotation, option) in _OPTIONS.items()}
    return option_group("opts", ConnectionOptions, table, CONNECTION, ENV_NOTE)(func)


def hint_context(opts: ConnectionOptions, state_dir: Path | None,
                 guest: GuestOptions | None = None) -> Context:
    """The options a command printed by this one carries (pvefix/hints.py): the connection
    options as given (never --bundle: apply writes to the live node, which a bundle is not;
    never a secret: none is an option), --state-dir, and the guest options."""
    from pvefix.commands.guest_options import guest_argv
    from pvefix.hints import Context

    table = {name: (name, annotation, option) for name, (annotation, option) in _OPTIONS.items()}
    target = given_argv(asdict(opts), table, skip=("bundle",))
    if state_dir is not None:
        target += ["--state-dir", str(state_dir)]
    return Context(tuple(target), tuple(guest_argv(guest)) if guest is not None else ())


def resolve_connection_options(opts: ConnectionOptions) -> Connection:
    """The Connection these options, the environment and the config file describe."""
    from pvefix.target.settings import resolve_connection

    return resolve_connection(
        flags=opts.flags(), config=opts.config, profile=opts.profile,
        connection_file=opts.connection,
    )


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
