"""An overall deadline for each HTTPS request: `--timeout` seconds from start to the last byte.

requests' own timeout bounds each socket operation, so a node that sends one byte every second
keeps a request alive for ever. Here a watchdog thread cuts the request's socket (shutdown, which
wakes the blocked read at once) when its deadline passes; the request then fails and is reported
as a timeout naming `--timeout`. The connection class records which connection each thread's
request is using; the pools of DeadlineAdapter use it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPSConnection
from urllib3.connectionpool import HTTPSConnectionPool

_ACTIVE: dict[int, _WatchedConnection] = {}  # thread ident -> the connection it now uses


class _WatchedConnection(HTTPSConnection):
    """An HTTPS connection that tells the watchdog it carries this thread's request."""

    _fd: int = -1

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        self._fd = sock.fileno()  # the TLS socket keeps this descriptor (during the handshake too)
        _ACTIVE[threading.get_ident()] = self
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _ACTIVE[threading.get_ident()] = self
        super().request(*args, **kwargs)

    def getresponse(self) -> Any:
        _ACTIVE[threading.get_ident()] = self
        return super().getresponse()

    def cut(self) -> None:
        """Shut the socket down: a read blocked on it returns at once."""
        with contextlib.suppress(OSError, ValueError):
            if self.sock is not None:
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
            elif self._fd >= 0:
                with socket.fromfd(self._fd, socket.AF_INET, socket.SOCK_STREAM) as dup:
                    dup.shutdown(socket.SHUT_RDWR)


class _WatchedPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedConnection


def watch_pools(adapter: HTTPAdapter) -> HTTPAdapter:
    """`adapter`, its HTTPS pools making connections the watchdog can cut."""
    classes = dict(adapter.poolmanager.pool_classes_by_scheme)
    classes["https"] = _WatchedPool
    adapter.poolmanager.pool_classes_by_scheme = classes
    return adapter


class _Watchdog:
    """One thread for every request in flight: cuts each one whose deadline passed. A request
    made inside another on the same thread (a ticket renewal) stacks its deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[int, list[float]] = {}  # thread ident -> deadlines, innermost last
        self._hit: set[int] = set()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> None:
        with self._cond:
            self._due.setdefault(threading.get_ident(), []).append(time.monotonic() + seconds)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pvefix-deadline",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching this thread's innermost request; True when a deadline had passed."""
        ident = threading.get_ident()
        with self._cond:
            stack = self._due.get(ident)
            if stack:
                stack.pop()
            if not stack:
                self._due.pop(ident, None)
                _ACTIVE.pop(ident, None)
            hit = ident in self._hit
            self._hit.discard(ident)
            return hit

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for ident, stack in self._due.items():
                    if stack and min(stack) <= now and ident not in self._hit:
                        self._hit.add(ident)
                        conn = _ACTIVE.get(ident)
                        if conn is not None:
                            conn.cut()
                pending = [min(s) for i, s in self._due.items() if s and i not in self._hit]
                self._cond.wait(max(min(pending, default=now + 60.0) - now, 0.0))


WATCHDOG = _Watchdog()


def budget(timeout: Any) -> float | None:
    """The overall seconds for a request given requests' `timeout` (a number, or a pair:
    connect and read), None when it has none."""
    if isinstance(timeout, int | float):
        return float(timeout)
    if isinstance(timeout, tuple) and all(isinstance(t, int | float) for t in timeout):
        return float(max(timeout))
    return None
