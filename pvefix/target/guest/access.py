"""How to reach a VM's guest: SSH to the guest, or the QEMU guest agent through the API.

Settings come from environment variables (`PVEFIX_GUEST_*`), then command-line flags. SSH to
the guest follows the same strict host key rules as SSH to the node: keys are checked against
a known_hosts file and never added silently, unless `accept_new_host_key` is asked for (trust on
first use); a changed key is always refused. The guest's SSH password is read from the
environment only (`PVEFIX_GUEST_SSH_PASSWORD`), never from a flag.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from pvefix.errors import ParseError, PvefixError, plain_words
from pvefix.target.settings import parse_bool

#: Environment variable -> GuestAccess field.
GUEST_ENV_VARS: dict[str, str] = {
    "PVEFIX_GUEST_AGENT": "agent",
    "PVEFIX_GUEST_SSH_HOST": "ssh_host",
    "PVEFIX_GUEST_SSH_PORT": "ssh_port",
    "PVEFIX_GUEST_SSH_USER": "ssh_user",
    "PVEFIX_GUEST_SSH_KEY": "ssh_key",
    "PVEFIX_GUEST_SSH_PASSWORD": "ssh_password",
    "PVEFIX_GUEST_KNOWN_HOSTS": "known_hosts",
    "PVEFIX_GUEST_ACCEPT_NEW_HOST_KEY": "accept_new_host_key",
    "PVEFIX_GUEST_PYTHON": "python",
}
_BOOLS = {"agent", "accept_new_host_key"}


class GuestAccess(BaseModel):
    """The way into one VM's guest. `method` is "agent" or "ssh"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["agent", "ssh"]
    ssh_host: str | None = None
    ssh_port: int = Field(default=22, ge=1, le=65535)
    ssh_user: str = "root"
    ssh_key: Path | None = None
    ssh_password: SecretStr | None = None
    known_hosts: Path = Path("~/.ssh/known_hosts")
    accept_new_host_key: bool = False
    python: str = Field(default="python3", min_length=1)
    connect_timeout: float = Field(default=30.0, gt=0)

    @property
    def where(self) -> str:
        if self.method == "agent":
            return "QEMU guest agent"
        return f"SSH {self.ssh_user}@{self.ssh_host}:{self.ssh_port}"


def resolve_guest_access(flags: Mapping[str, Any] | None = None,
                         env: Mapping[str, str] | None = None, *,
                         connect_timeout: float | None = None) -> GuestAccess:
    """Merge the environment and the flags (flags win; None = not given) into GuestAccess.

    `agent` true selects the guest agent; otherwise a guest SSH host is required.
    """
    environ = os.environ if env is None else env
    values: dict[str, Any] = {
        field: environ[var] for var, field in GUEST_ENV_VARS.items() if environ.get(var)}
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    for name in _BOOLS & set(values):
        values[name] = parse_bool(name, values[name], "guest settings")
    agent = values.pop("agent", False)
    if agent and values.get("ssh_host"):
        raise PvefixError("choose one way into the guest: --guest-agent or --guest-ssh-host, "
                          "not both")
    if not agent and not values.get("ssh_host"):
        raise PvefixError("how should pvefix reach the guest? Give --guest-ssh-host HOST (SSH "
                          "to the guest) or --guest-agent (QEMU guest agent through the API; "
                          "the VM needs `agent: 1`)")
    values["method"] = "agent" if agent else "ssh"
    if connect_timeout is not None:
        values["connect_timeout"] = connect_timeout
    try:
        return GuestAccess.model_validate(values)
    except pydantic.ValidationError as exc:
        # Field and reason only: the input could be a secret.
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {plain_words(e)}"
                    for e in exc.errors()]
        raise ParseError("invalid guest settings: " + "; ".join(problems)) from None
