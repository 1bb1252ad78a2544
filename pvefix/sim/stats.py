"""What a simulated node served, counted for benchmarks and tests: `GET /_sim/stats`.

Requests by method and path, ticket logins, SSH connections (in all and by node) and channels
(exec commands by their first word, SFTP sessions), and `waves`: how many times the node went
from idle to busy. While a client's requests overlap, they are one wave; a client that waits
for one answer before it sends the next request makes one wave per round trip. So `waves`
counts the sequential round trips a command cost, independent of the latency the node was
given.

One counter per simulator: its nodes share it (`share_stats`), so a read that talks to every
node of a cluster at once (one SSH session each) is counted as the cluster saw it, waves
included. Kept beside the node states, not in them; `POST /_sim/stats` answers the same and
then resets the counters.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

_NUMBER = re.compile(r"/\d+(?=/|$)")


def path_template(path: str) -> str:
    """`/nodes/node1/qemu/100/pending` -> `/nodes/{node}/qemu/{vmid}/pending` (few keys)."""
    path = _NUMBER.sub("/{vmid}", path)
    return re.sub(r"^/nodes/[^/]+", "/nodes/{node}", path)


class SimStats:
    """Thread-safe counters of one node."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.requests: Counter[str] = Counter()
            self.paths: Counter[str] = Counter()
            self.logins = 0
            self.ssh_connections = 0
            self.ssh_by_node: Counter[str] = Counter()
            self.ssh_channels: Counter[str] = Counter()
            self.waves = 0
            self.peak_in_flight = 0
            self._in_flight = 0

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Brackets the serving of one request or command (for `waves`)."""
        with self._lock:
            if self._in_flight == 0:
                self.waves += 1
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def request(self, method: str, path: str) -> None:
        with self._lock:
            self.requests[f"{method} {path_template(path)}"] += 1
            self.paths[f"{method} {path}"] += 1

    def login(self) -> None:
        with self._lock:
            self.logins += 1

    def ssh_connection(self, node: str) -> None:
        with self._lock:
            self.ssh_connections += 1
            self.ssh_by_node[node] += 1

    def ssh_channel(self, kind: str) -> None:
        with self._lock:
            self.ssh_channels[kind] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(sorted(self.requests.items())),
                "requests_total": sum(self.requests.values()),
                "paths": dict(sorted(self.paths.items())),
                "ticket_logins": self.logins,
                "ssh_connections": self.ssh_connections,
                "ssh_by_node": dict(sorted(self.ssh_by_node.items())),
                "ssh_channels": dict(sorted(self.ssh_channels.items())),
                "ssh_channels_total": sum(self.ssh_channels.values()),
                "waves": self.waves,
                "peak_in_flight": self.peak_in_flight,
            }


_BY_STATE: weakref.WeakKeyDictionary[object, SimStats] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def stats_for(state: object) -> SimStats:
    """The counters of one node state (made on first use)."""
    with _REGISTRY_LOCK:
        found = _BY_STATE.get(state)
        if found is None:
            found = _BY_STATE[state] = SimStats()
        return found


def share_stats(states: Iterable[object]) -> SimStats:
    """One set of counters for all of `states` (a simulator's nodes)."""
    shared = SimStats()
    with _REGISTRY_LOCK:
        for state in states:
            _BY_STATE[state] = shared
    return shared


def fetch_stats(api_url: str, ca_cert: str, user: str, password: str, *,
                reset: bool = False) -> dict[str, Any]:
    """GET (or with `reset`, POST) a simulator's /_sim/stats with a root ticket.

    The ticket login itself is counted; a reset leaves it out of the next reading.
    """
    import requests

    with requests.Session() as session:
        login = session.post(f"{api_url}/api2/json/access/ticket", verify=ca_cert,
                             data={"username": user, "password": password}, timeout=30)
        login.raise_for_status()
        ticket = login.json()["data"]
        session.headers["CSRFPreventionToken"] = ticket["CSRFPreventionToken"]
        session.cookies.set("PVEAuthCookie", ticket["ticket"])
        answer = session.request("POST" if reset else "GET", f"{api_url}/_sim/stats",
                                 verify=ca_cert, timeout=30)
        answer.raise_for_status()
        data: dict[str, Any] = answer.json()["data"]
        return data
