"""The Proxmox API over HTTPS through proxmoxer, with TLS that is really checked.

TLS is verified against a CA file (or the system store), or against a pinned SHA-256
certificate fingerprint (an HTTPAdapter whose pools use urllib3's `assert_fingerprint`).
`insecure=True` turns checking off and says so loudly on stderr. The password login (ticket)
goes through the same checked session: proxmoxer's own login would post the password with
plain `requests.post`, outside any pinning.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests
import requests.auth
from proxmoxer.backends.https import (
    JsonSerializer,
    ProxmoxHTTPApiTokenAuth,
    ProxmoxHTTPAuth,
    ProxmoxHttpSession,
)
from proxmoxer.core import (
    AuthenticationError,
    ProxmoxResource,
    ResourceException,
)
from requests.adapters import HTTPAdapter

from pvefix.errors import (
    PvefixError,
    RefusedError,
    exception_chain,
    os_error_in,
    unreachable_hint,
)
from pvefix.target import deadline
from pvefix.target.privileges import permission_hint
from pvefix.target.settings import Connection

POOL_SIZE = 16  # enough keep-alive connections for one wave of parallel reads


class ApiError(PvefixError):
    """The API answered with an error (status and Proxmox's message)."""

    def __init__(self, message: str, *, status: int | None = None, source: str | None = None):
        self.status = status
        super().__init__(message, source=source)


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request as the session saw it (for wave counting in benchmarks)."""

    method: str
    path: str
    start: float
    end: float
    status: int | None


class PinnedAdapter(HTTPAdapter):
    """An adapter whose connection pools accept only a certificate with this SHA-256."""

    def __init__(self, fingerprint: str, **kwargs: Any) -> None:
        self._fingerprint = fingerprint
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                         **pool_kwargs: Any) -> None:
        pool_kwargs["assert_fingerprint"] = self._fingerprint
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)


class _RecordingSession(ProxmoxHttpSession):  # type: ignore[misc]
    """proxmoxer's session, plus an optional record of each request's start and end."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[RequestRecord] | None = None
        self._records_lock = threading.Lock()

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        status = None
        auth = kwargs.get("auth") or self.auth
        seconds = deadline.budget(kwargs.get("timeout") or getattr(auth, "timeout", None))
        try:
            if seconds is not None:  # the whole request, to the last byte (deadline.py)
                deadline.WATCHDOG.arm(seconds)
            try:
                response = super().request(method, url, *args, **kwargs)
            except requests.exceptions.RequestException:
                if seconds is not None and deadline.WATCHDOG.disarm():
                    raise requests.exceptions.Timeout("deadline passed") from None
                raise
            status = response.status_code
            return response
        finally:
            if seconds is not None:
                deadline.WATCHDOG.disarm()
            if self.records is not None:
                path = url.split("/api2/json", 1)[-1]
                with self._records_lock:
                    self.records.append(
                        RequestRecord(method, path, start, time.perf_counter(), status))


class _NoAuth(requests.auth.AuthBase):
    """The login request itself carries no ticket (and must not trigger a renewal)."""

    def __call__(self, request: Any) -> Any:
        return request

    def get_cookies(self) -> None:
        return None


class _SessionTicketAuth(ProxmoxHTTPAuth):  # type: ignore[misc]
    """proxmoxer's ticket auth, but logging in through our TLS-checked session."""

    def __init__(self, session: requests.Session, username: str, password: str,
                 **kwargs: Any) -> None:
        self._session = session
        super().__init__(username, password, **kwargs)

    def _get_new_tokens(self, password: str | None = None, otp: str | None = None,
                        otptype: str | None = None) -> None:
        ticket: str = getattr(self, "pve_auth_ticket", "")
        data = {"username": self.username, "password": password or ticket}
        response = self._session.request(
            "POST", self.base_url + "/access/ticket", data=data, auth=_NoAuth(),
            verify=self.verify_ssl, timeout=self.timeout)
        if response.status_code != 200:
            raise AuthenticationError(
                f"authentication failed for {self.username} (HTTP {response.status_code})"
            )
        body = response.json()["data"]
        if body.get("NeedTFA") is not None:
            raise AuthenticationError(f"{self.username} needs a second factor (TFA): use a token")
        self.birth_time = time.monotonic()
        self.pve_auth_ticket = body["ticket"]
        self.csrf_prevention_token = body["CSRFPreventionToken"]


def presented_fingerprint(host: str, port: int, timeout: float) -> str | None:
    """SHA-256 of the certificate the server presents (unverified: for error messages)."""
    from pvefix.target.identity import presented_certificate

    der = presented_certificate(host, port, timeout)
    if not der:
        return None
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def warn_insecure(where: str, stream: Any = None) -> None:
    """The loud warning --insecure deserves."""
    out = stream or sys.stderr
    print(
        f"WARNING: TLS certificate checking is OFF for {where} (--insecure). Anyone on the "
        "path can read the credentials and change what pvefix reads. Use --ca-cert or "
        "--fingerprint instead.",
        file=out, flush=True)


class ApiClient:
    """A logged-in Proxmox API client; `get()` is safe to call from many threads at once."""

    def __init__(self, conn: Connection, *, record: bool = False) -> None:
        """Log in (a ticket login is one request); `record` keeps a RequestRecord per request
        in `self.session.records` (benchmarks count waves from it)."""
        conn.check_ready()
        assert conn.host is not None
        self.conn = conn
        self.base_url = f"https://{_host_for_url(conn.host)}:{conn.port}/api2/json"
        session = _RecordingSession()
        if record:
            session.records = []
        session.headers["Connection"] = "keep-alive"
        session.headers["accept"] = "application/json"
        verify: bool | str
        if conn.fingerprint:
            adapter: HTTPAdapter = PinnedAdapter(
                conn.fingerprint, pool_connections=4, pool_maxsize=POOL_SIZE
            )
            verify = False  # the pool checks the pinned fingerprint instead of a CA chain
        else:
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=POOL_SIZE)
            if conn.insecure:
                warn_insecure(self.base_url)
                verify = False
            elif conn.ca_cert is not None:
                verify = str(conn.expanded(conn.ca_cert))
                if not conn.expanded(conn.ca_cert).is_file():
                    raise PvefixError(f"CA file (--ca-cert, PVEFIX_CA_CERT, ca_cert) not found: "
                                      f"{verify}; copy the node's /etc/pve/pve-root-ca.pem")
            else:
                verify = True
        session.mount("https://", deadline.watch_pools(adapter))
        self.session = session
        common: dict[str, Any] = {"verify_ssl": verify, "timeout": conn.timeout}
        try:
            if conn.auth_method == "token":
                assert conn.token_secret is not None
                session.auth = ProxmoxHTTPApiTokenAuth(
                    conn.token_user, conn.token_name, conn.token_secret.get_secret_value(),
                    **common)
            else:
                assert conn.password is not None and conn.user is not None
                session.auth = _SessionTicketAuth(
                    session, conn.user, conn.password.get_secret_value(),
                    base_url=self.base_url, **common)
        except AuthenticationError as exc:
            raise ApiError(f"password refused: {exc}", status=401, source=self.base_url) from None
        except requests.exceptions.RequestException as exc:
            raise self._transport_error(exc) from None
        except Exception as exc:  # never a traceback: its text could quote a header
            raise PvefixError(f"cannot log in: {type(exc).__name__}",
                              source=self.base_url) from None
        self.root = ProxmoxResource(
            base_url=self.base_url, session=session, serializer=JsonSerializer())

    @property
    def api_user(self) -> str | None:
        """Who the API sees: the token's id, or the user of a ticket."""
        return self.conn.api_user

    @property
    def records(self) -> list[RequestRecord]:
        """The requests recorded so far (empty unless created with record=True)."""
        return list(self.session.records or [])

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """GET an API path ("/nodes/kpro6/status"); ApiError names the path on failure."""
        return self.request("GET", path, params)

    def write(self, method: str, path: str, data: Mapping[str, str],
              timeout: float | None = None) -> Any:
        """POST or PUT (LocalApi's face: `timeout` is a task's time, which pvesh needs and
        the HTTPS API does not: it answers with the task's UPID at once)."""
        return self.request(method, path, data)

    def request(self, method: str, path: str, data: Mapping[str, Any] | None = None, *,
                what: str | None = None) -> Any:
        """GET, POST or PUT an API path: the one place a proxmoxer or requests failure
        becomes a pvefix error. ApiError carries the status and Proxmox's own message (never
        the request's values); `what` names the call in it (default "METHOD PATH"). A write
        whose connection broke says so ("connection lost": it may or may not have happened);
        a read says why the API could not be reached."""
        label = what or f"{method} {path}"
        resource = self.root(path.strip("/"))
        try:
            if method == "GET":
                return self._get(resource, dict(data or {}))
            if method == "PUT":
                return resource.put(**dict(data or {}))
            return resource.post(**dict(data or {}))
        except ResourceException as exc:
            raise self._api_error(exc, label) from None
        except requests.exceptions.RequestException as exc:
            if method == "GET":
                raise self._transport_error(exc) from None
            raise PvefixError(f"{label}: connection lost ({type(exc).__name__})",
                              source=self.base_url) from None
        except (ValueError, TypeError, OSError) as exc:  # http.client quotes a bad header
            raise PvefixError(f"{label}: {type(exc).__name__}", source=self.base_url
                              ) from None

    @staticmethod
    def _get(resource: Any, params: dict[str, Any]) -> Any:
        """A GET, asked once more on a fresh connection when the first one was reset or
        refused: pveproxy ends a worker after its share of requests and closes the kept-alive
        connections it held (a read is safe to repeat; a write is never repeated)."""
        try:
            return resource.get(**params)
        except requests.exceptions.RequestException as exc:
            if not _node_away(exc):
                raise
        return resource.get(**params)

    def _api_error(self, exc: ResourceException, label: str) -> ApiError:
        if exc.status_code == 401:
            who = ("token refused: check the token id and its secret (and that the token is "
                   "not expired)" if self.conn.auth_method == "token" else
                   "password refused (the login ticket is no longer accepted)")
            return ApiError(f"{who} ({label}: HTTP 401)", status=401, source=self.base_url)
        content = str(getattr(exc, "content", "") or "").strip()
        text = content or str(getattr(exc, "status_message", "") or "").strip() or str(exc)
        errors = getattr(exc, "errors", None)
        if errors:
            text += " " + "; ".join(f"{k}: {v}" for k, v in dict(errors).items())
        if exc.status_code == 403:
            text += permission_hint(text, self.conn.api_user)
        return ApiError(f"{label}: {exc.status_code} {text}", status=exc.status_code,
                        source=self.base_url)

    def _transport_error(self, exc: requests.exceptions.RequestException) -> PvefixError:
        assert self.conn.host is not None
        if _node_away(exc):
            reason = unreachable_hint(os_error_in(exc), f"{self.conn.host} port {self.conn.port}")
            return PvefixError(
                f"the node is away: {reason} (is it rebooting or down? try again when it is "
                "back)", source=self.base_url)
        if isinstance(exc, requests.exceptions.SSLError):
            seen = presented_fingerprint(self.conn.host, self.conn.port, self.conn.timeout)
            hint = (
                f"The server presents a certificate with SHA-256 fingerprint {seen}. "
                "If that is your node's certificate (check with `pvenode cert info` on it), "
                "pin it with --fingerprint, or pass its CA with --ca-cert "
                "(/etc/pve/pve-root-ca.pem on the node)."
                if seen
                else "Pass the node's CA with --ca-cert or pin its certificate with --fingerprint."
            )
            kind = "pinned fingerprint mismatch" if self.conn.fingerprint else "not trusted"
            # A trust refusal, like an unknown SSH host key: the same exit code (3).
            return RefusedError(f"TLS certificate {kind}. {hint}", source=self.base_url)
        if isinstance(exc, requests.exceptions.Timeout):
            return PvefixError(
                f"no complete answer within {self.conn.timeout:g} s (--timeout; raise it if "
                "the node is only slow)",
                source=self.base_url)
        cause = os_error_in(exc)
        reason = unreachable_hint(cause, f"{self.conn.host} port {self.conn.port}")
        return PvefixError(f"cannot reach the API: {reason}", source=self.base_url)

    def close(self) -> None:
        self.session.close()


def _node_away(exc: BaseException) -> bool:
    """A refused or reset connection (a node rebooting), not a certificate problem: requests
    wraps a reset during the TLS handshake in SSLError, so look at the causes."""
    for cur in exception_chain(exc):
        if isinstance(cur, ConnectionRefusedError | ConnectionResetError | BrokenPipeError):
            return True
        text = str(cur)
        if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
            return False
        if any(w in text for w in ("Connection refused", "Connection reset", "Errno 111",
                                   "Errno 104", "EOF occurred in violation of protocol",
                                   "UNEXPECTED_EOF")):
            return True
    return False


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def count_waves(records: list[RequestRecord]) -> int:
    """Sequential round-trip waves in a request log: a request opens a new wave when it
    started after an answer of the current wave came back (it may have waited for it)."""
    waves = 0
    first_end = float("-inf")
    for record in sorted(records, key=lambda r: r.start):
        if waves == 0 or record.start >= first_end:
            waves += 1
            first_end = record.end
        else:
            first_end = min(first_end, record.end)
    return waves
