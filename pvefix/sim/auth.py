"""Authentication as Proxmox does it: tickets + CSRF tokens, and API tokens.

A ticket is `PVE:<user>:<hex time>::<signature>`; the CSRF token is `<hex time>:<signature>`;
both are HMAC-signed with a key generated per simulator root. An API token authenticates as
`user@realm!name`: with privilege separation off it gets its user's privileges, yet it is never
`root@pam` itself, so the root-only rules (raw `host=`, `args`, ...) refuse it, as on Proxmox.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from urllib.parse import unquote

from pvefix.sim.errors import ApiError

TICKET_LIFETIME = 7200


@dataclass(frozen=True)
class Identity:
    """Who is calling: a user with a ticket, an API token, or root over SSH (`qm`)."""

    user: str
    token: str | None = None  # the token name, for `user!token`
    via: str = "ticket"  # ticket | token | ssh

    @property
    def authuser(self) -> str:
        """What Proxmox's `$rpcenv->get_user()` returns (tokens keep their `!name`)."""
        return f"{self.user}!{self.token}" if self.token else self.user

    @property
    def is_root_pam(self) -> bool:
        """The root-only rules: exactly `root@pam`, never a token."""
        return self.authuser == "root@pam"


class Authenticator:
    """Issues and checks tickets, CSRF tokens and API token headers."""

    def __init__(self, key: bytes, password: str, token_secrets: dict[str, str]) -> None:
        self._key = key
        self._password = password
        self._tokens = dict(token_secrets)

    def _sign(self, text: str) -> str:
        digest = hmac.new(self._key, text.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest).decode().rstrip("=")

    def login(self, username: str, password: str, realm: str | None = None) -> dict[str, str]:
        """POST /access/ticket. Only root@pam has a password in the simulator."""
        user = username if "@" in username else f"{username}@{realm or 'pam'}"
        ok = user == "root@pam" and hmac.compare_digest(
            password.encode("utf-8", "surrogateescape"), self._password.encode()
        )
        if not ok:
            raise ApiError(401, "authentication failure")
        stamp = f"{int(time.time()):08X}"
        plain = f"PVE:{user}:{stamp}"
        return {
            "username": user,
            "ticket": f"{plain}::{self._sign(plain)}",
            "CSRFPreventionToken": f"{stamp}:{self._sign('csrf:' + user + ':' + stamp)}",
        }

    def check_ticket(self, ticket: str) -> str:
        """The user of a valid ticket; 401 otherwise."""
        ticket = unquote(ticket)
        plain, sep, sig = ticket.partition("::")
        parts = plain.split(":")
        if not sep or len(parts) != 3 or parts[0] != "PVE":
            raise ApiError(401, "invalid ticket")
        if not hmac.compare_digest(sig, self._sign(plain)):
            raise ApiError(401, "invalid ticket")
        try:
            age = time.time() - int(parts[2], 16)
        except ValueError:
            raise ApiError(401, "invalid ticket") from None
        if age > TICKET_LIFETIME or age < -300:
            raise ApiError(401, "ticket expired")
        return parts[1]

    def check_csrf(self, user: str, token: str | None) -> None:
        if not token:
            raise ApiError(401, "Permission denied - invalid csrf token")
        stamp, _, sig = token.partition(":")
        if not hmac.compare_digest(sig, self._sign("csrf:" + user + ":" + stamp)):
            raise ApiError(401, "Permission denied - invalid csrf token")

    def check_token_header(self, header: str) -> Identity:
        """`PVEAPIToken=user@realm!name=secret` -> the token's identity; 401 otherwise."""
        value = header[len("PVEAPIToken="):] if header.startswith("PVEAPIToken=") else ""
        tokenid, sep, secret = value.partition("=")
        expected = self._tokens.get(tokenid)
        if not sep or expected is None or not hmac.compare_digest(
            secret.strip().encode("utf-8", "surrogateescape"), expected.encode()
        ):
            raise ApiError(401, "authentication failure")
        user, _, name = tokenid.partition("!")
        return Identity(user=user, token=name, via="token")

    def identify(
        self, method: str, cookie_ticket: str | None, csrf: str | None, authz: str | None
    ) -> Identity:
        """Who sent this request; Proxmox's 401s when nobody did."""
        if authz:
            return self.check_token_header(authz.strip())
        if cookie_ticket:
            user = self.check_ticket(cookie_ticket)
            if method != "GET":
                self.check_csrf(user, csrf)
            return Identity(user=user, via="ticket")
        raise ApiError(401, "No ticket")
