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

from pvefix.sim.errors import ApiError, unauthorized
from pvefix.sim.perms import AccessControl, capabilities

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

    def __init__(self, key: bytes, password: str, token_secrets: dict[str, str],
                 fail_delay_s: float = 0.0) -> None:
        self._key = key
        self._password = password
        self._tokens = dict(token_secrets)
        self.fail_delay_s = fail_delay_s  # Proxmox waits 3 s before each 401
        self.access = AccessControl()  # the Simulator sets the cluster's

    def _sign(self, text: str) -> str:
        digest = hmac.new(self._key, text.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest).decode().rstrip("=")

    def login(self, username: str, password: str, realm: str | None = None) -> dict[str, object]:
        """POST /access/ticket. Only root@pam has a password in the simulator; a valid ticket
        of the same user as password renews it (PVE::AccessControl::authenticate_user)."""
        user = username if "@" in username else f"{username}@{realm or 'pam'}"
        ok = user == "root@pam" and hmac.compare_digest(
            password.encode("utf-8", "surrogateescape"), self._password.encode()
        )
        if not ok and password.startswith("PVE:"):
            try:
                ok = self.check_ticket(password) == user
            except ApiError:
                ok = False
        if not ok:
            raise ApiError(401, "authentication failure")
        stamp = f"{int(time.time()):08X}"
        plain = f"PVE:{user}:{stamp}"
        return {
            "username": user,
            "ticket": f"{plain}::{self._sign(plain)}",
            "CSRFPreventionToken": f"{stamp}:{self._sign('csrf:' + user + ':' + stamp)}",
            "cap": capabilities(self.access, user),
        }

    def check_ticket(self, ticket: str) -> str:
        """The user of a valid ticket; 401 otherwise."""
        ticket = unquote(ticket)
        plain, sep, sig = ticket.partition("::")
        parts = plain.split(":")
        if not sep or len(parts) != 3 or parts[0] != "PVE":
            raise unauthorized()
        if not hmac.compare_digest(sig, self._sign(plain)):
            raise unauthorized()
        try:
            age = time.time() - int(parts[2], 16)
        except ValueError:
            raise unauthorized() from None
        if age > TICKET_LIFETIME or age < -300:
            raise unauthorized()
        return parts[1]

    def check_csrf(self, user: str, token: str | None) -> None:
        if not token:
            raise unauthorized("Permission denied - invalid csrf token")
        stamp, _, sig = token.partition(":")
        if not hmac.compare_digest(sig, self._sign("csrf:" + user + ":" + stamp)):
            raise unauthorized("Permission denied - invalid csrf token")

    def check_token_header(self, header: str) -> Identity:
        """`PVEAPIToken=user@realm!name=secret` (or `PVEAPIToken user@realm!name=secret`) ->
        the token's identity; 401 otherwise."""
        value = header[len("PVEAPIToken") + 1:] if header[:12] in (
            "PVEAPIToken=", "PVEAPIToken "
        ) else ""
        tokenid, sep, secret = value.partition("=")
        expected = self._tokens.get(tokenid)
        if not sep or expected is None or not hmac.compare_digest(
            secret.strip().encode("utf-8", "surrogateescape"), expected.encode()
        ):
            raise unauthorized()
        user, _, name = tokenid.partition("!")
        return Identity(user=user, token=name, via="token")

    def identify(
        self, method: str, cookie_ticket: str | None, csrf: str | None, authz: str | None
    ) -> Identity:
        """Who sent this request; Proxmox's 401s when nobody did. A ticket may come in the
        `PVEAuthCookie` cookie or as `Authorization: PVEAuthCookie=TICKET`."""
        if authz and authz.strip().startswith("PVEAuthCookie="):
            cookie_ticket = authz.strip()[len("PVEAuthCookie="):]
        elif authz:
            return self.check_token_header(authz.strip())
        if cookie_ticket:
            user = self.check_ticket(cookie_ticket)
            if method != "GET":
                self.check_csrf(user, csrf)
            return Identity(user=user, via="ticket")
        raise unauthorized("No ticket")
