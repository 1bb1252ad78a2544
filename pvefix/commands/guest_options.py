"""Options for reaching a VM's guest (SSH to the guest, or the QEMU guest agent).

They compose with `@connection_options` (the node's settings, which the guest agent path needs):

    @connection_options
    @guest_options
    def verify(vmid: int, *, opts: ConnectionOptions, guest: GuestOptions) -> int: ...

The decorator adds the options below to the command's signature and hands them over as one
frozen GuestOptions value; `resolve_guest_options` merges them with `PVEFIX_GUEST_*`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pvefix.commands.optgroup import GUEST, given_argv, option_group, unset

if TYPE_CHECKING:
    from pvefix.target.guest.access import GuestAccess

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class GuestOptions:
    """The guest flags as given on the command line (None: not given)."""

    agent: bool | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    ssh_user: str | None = None
    ssh_key: Path | None = None
    known_hosts: Path | None = None
    accept_new_host_key: bool | None = None
    python: str | None = None

    def flags(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "agent": ("guest_agent", bool | None, unset(
        "--guest-agent", "By the QEMU guest agent (the VM needs `agent: 1`).")),
    "ssh_host": ("guest_ssh_host", str | None, unset(
        "--guest-ssh-host", "Reach the guest by SSH at this host.")),
    "ssh_port": ("guest_ssh_port", int | None, unset(
        "--guest-ssh-port", "Guest SSH port (default 22).")),
    "ssh_user": ("guest_ssh_user", str | None, unset(
        "--guest-ssh-user", "Guest SSH user (default root; a password:"
        " PVEFIX_GUEST_SSH_PASSWORD).")),
    "ssh_key": ("guest_ssh_key", Path | None, unset(
        "--guest-ssh-key", "Guest SSH private key (default: agent).")),
    "known_hosts": ("guest_known_hosts", Path | None, unset(
        "--guest-known-hosts", "Guest known_hosts (default ~/.ssh/known_hosts).")),
    "accept_new_host_key": ("guest_accept_new_host_key", bool | None, unset(
        "--guest-accept-new-host-key", "Save an unknown host key (never a changed one).")),
    "python": ("guest_python", str | None, unset(
        "--guest-python", "Python 3.10+ in the guest (default python3).")),
}


# Each option is also read from the environment by this rule (pvefix/target/guest/access.py;
# tests/commands/test_output_length.py holds them together).
ENV_NOTE = "Also from the environment: --guest-ssh-port is PVEFIX_GUEST_SSH_PORT, ..."


def guest_options(func: F) -> F:
    """Add the guest options to a typer command that takes `guest: GuestOptions`."""
    return option_group("guest", GuestOptions, _OPTIONS, GUEST, ENV_NOTE)(func)


def guest_argv(guest: GuestOptions) -> list[str]:
    """The guest options as given, as the words a printed command carries (pvefix/hints.py)."""
    return given_argv(asdict(guest), _OPTIONS)


def optional_guest(guest: GuestOptions, *, env: Mapping[str, str] | None = None,
                   connect_timeout: float | None = None) -> GuestAccess | None:
    """GuestAccess when a way into the guest was given (flags or PVEFIX_GUEST_AGENT /
    PVEFIX_GUEST_SSH_HOST), else None: for commands where the guest is optional (plan,
    apply, rollback)."""
    import os

    environ = os.environ if env is None else env
    if not (guest.agent is True or guest.ssh_host or environ.get("PVEFIX_GUEST_AGENT")
            or environ.get("PVEFIX_GUEST_SSH_HOST")):
        return None  # no way into the guest: the guest modules are not even imported
    from pvefix.target.guest.access import resolve_guest_access
    from pvefix.target.settings import parse_bool

    flag_agent = guest.agent is True
    env_agent = bool(environ.get("PVEFIX_GUEST_AGENT")) and parse_bool(
        "PVEFIX_GUEST_AGENT", environ["PVEFIX_GUEST_AGENT"], "environment")
    if not (flag_agent or guest.ssh_host or env_agent or environ.get("PVEFIX_GUEST_SSH_HOST")):
        return None
    return resolve_guest_access(guest.flags(), environ, connect_timeout=connect_timeout)


def resolve_guest_options(guest: GuestOptions, *,
                          connect_timeout: float | None = None) -> GuestAccess:
    """The GuestAccess these flags and the environment describe."""
    from pvefix.target.guest.access import resolve_guest_access

    return resolve_guest_access(guest.flags(), connect_timeout=connect_timeout)
