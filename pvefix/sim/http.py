"""HTTPS for the simulated API: a threading server, TLS per connection, HTTP/1.1 keep-alive.

Each response is written in one piece (headers and body together) with TCP_NODELAY, so a client
reusing its connection (proxmoxer's requests Session) is not held up by Nagle's algorithm.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pvefix.sim.api import Api, _cookie
from pvefix.sim.errors import ApiError
from pvefix.sim.stats import SimStats, stats_for

API_PREFIX = "/api2/json"
STATS_PATH = "/_sim/stats"
MAX_BODY = 16 * 1024 * 1024
IDLE_TIMEOUT_S = 60


class SimHTTPServer(ThreadingHTTPServer):
    """Threading server that wraps each accepted socket in TLS inside its own thread."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], api: Api, context: ssl.SSLContext) -> None:
        self.api = api
        self.context = context
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def track(self, sock: socket.socket, add: bool) -> None:
        with self._conns_lock:
            if add:
                self._conns.add(sock)
            else:
                self._conns.discard(sock)

    def close_connections(self) -> None:
        """Drop every open connection (shutdown, or the node going down for a reboot)."""
        with self._conns_lock:
            conns = list(self._conns)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Client disconnects and TLS failures are normal for a test server: stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pve-api-daemon/3.0"
    sys_version = ""
    server: SimHTTPServer

    def setup(self) -> None:
        raw: socket.socket = self.request
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(IDLE_TIMEOUT_S)
        if self.server.api.state.is_down():
            raw.close()
            raise ConnectionAbortedError("node is rebooting")
        self.request = self.server.context.wrap_socket(raw, server_side=True)
        self.server.track(self.request, True)
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.request, False)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: it would cost throughput and could echo secrets in query strings."""

    def _respond(self, status: int, reason: str, body: bytes,
                 content_type: str = "application/json;charset=UTF-8") -> None:
        head = (
            f"HTTP/1.1 {status} {reason}\r\n"
            f"Server: {self.server_version}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Cache-Control: max-age=0\r\n"
            "Pragma: no-cache\r\n"
            f"Connection: {'close' if self.close_connection else 'Keep-Alive'}\r\n"
            "\r\n"
        )
        data = head.encode("latin-1", "replace") + body
        drip = self.server.api.state.faults.drip_s
        if drip and not self.path.startswith("/api2/json/_sim/"):  # a hostile slow node: one
            # byte at a time, until the client hangs up (the simulator's own controls answer)
            self.close_connection = True
            for at in range(len(data)):
                self.wfile.write(data[at:at + 1])
                self.wfile.flush()
                time.sleep(drip)
            return
        self.wfile.write(data)

    def _serve(self) -> None:
        api = self.server.api
        if api.state.is_down():
            self.close_connection = True
            return  # the node is rebooting: the client sees the connection drop
        split = urlsplit(self.path)
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        lists: dict[str, list[str]] = {}
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._respond(413, "Request Entity Too Large", b"")
            return
        if length:
            body = self.rfile.read(length)
            ctype = self.headers.get("Content-Type", "")
            if "json" in ctype:
                import json

                try:
                    loaded = json.loads(body or b"{}")
                except ValueError:
                    loaded = {}
                if isinstance(loaded, dict):
                    params.update({k: _form_value(v) for k, v in loaded.items()})
            else:
                pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
                params.update(pairs)
                for key, value in pairs:  # a repeated key is an array (agent/exec's command)
                    lists.setdefault(key, []).append(value)
        path = split.path
        if path == STATS_PATH:
            self._stats(stats_for(api.state))
            return
        if not path.startswith(API_PREFIX + "/") and path != API_PREFIX:
            self._respond(501, "Not Implemented", b"")
            return
        stats = stats_for(api.state)
        api_path = path[len(API_PREFIX):] or "/"
        if api_path.startswith("/_sim/"):  # the simulator's own controls are not counted
            status, reason, payload = api.handle(
                self.command, api_path, params, _headers(self.headers), lists
            )
            self._respond(status, reason, payload)
            return
        stats.request(self.command, api_path)
        with stats.busy():
            status, reason, payload = api.handle(
                self.command, api_path, params, _headers(self.headers), lists
            )
        if api_path == "/access/ticket" and self.command == "POST" and status == 200:
            stats.login()
        self._respond(status, reason, payload)

    def _stats(self, stats: SimStats) -> None:
        """GET /_sim/stats (root only): what this node served; POST also resets the counters."""
        import json

        headers = _headers(self.headers)
        try:
            ident = self.server.api.auth.identify(
                self.command, _cookie(headers.get("cookie"), "PVEAuthCookie"),
                headers.get("csrfpreventiontoken"), headers.get("authorization"),
            )
        except ApiError as exc:
            self._respond(exc.status, "Unauthorized", b"")
            return
        if ident.user != "root@pam":
            self._respond(403, "Forbidden", b"")
            return
        if self.command not in ("GET", "POST"):
            self._respond(501, "Not Implemented", b"")
            return
        seen = stats.snapshot()
        if self.command == "POST":
            stats.reset()
        self._respond(200, "OK", json.dumps({"data": seen}).encode())

    do_GET = _serve
    do_POST = _serve
    do_PUT = _serve
    do_DELETE = _serve


def _headers(message: Any) -> dict[str, str]:
    """The few request headers the API reads, by lower-case name."""
    wanted = ("cookie", "csrfpreventiontoken", "authorization")
    return {name: str(message.get(name)) for name in wanted if message.get(name) is not None}


def _form_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def make_server(api: Api, host: str, port: int, cert: str, key: str) -> SimHTTPServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return SimHTTPServer((host, port), api, context)
