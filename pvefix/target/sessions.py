"""The sessions of one command, opened once and passed down.

`pvefix apply` reads the target, re-reads it after writing, takes its lock, writes and checks;
`pvefix rollback` reads, locks and restores. Each of those steps used to open its own API
session and SSH connection (an apply logged in over SSH three times to one node). A `Sessions`
holds one API session, one SSH session per node and one guest channel per VM, each opened on
first use through pvefix.target.open and closed together at the end of the command.

Whoever borrows a session from here does not close it: the command that made the `Sessions`
does (`with Sessions(conn) as sessions: ...`). An SSH session whose transport dropped (sshd
restarted, the node rebooted) is opened afresh on the next use; `forget()` drops every session
after a host reboot, so the next use logs in again.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from pvefix.errors import PvefixError
from pvefix.target.nodes import ClusterView, NodeAddress, address_of
from pvefix.target.open import open_api, open_guest, open_local, open_node
from pvefix.target.settings import Connection

if TYPE_CHECKING:
    from pvefix.target.api import ApiClient
    from pvefix.target.guest.access import GuestAccess
    from pvefix.target.guest.channel import GuestChannel
    from pvefix.target.local import LocalApi, LocalShell
    from pvefix.target.node import Node, ReopeningNode
    from pvefix.target.ssh import SshShell

LOCAL_WHERE = "this host (--local)"
# How a reader opens a node by name (the cluster's view says where it is), for a `with` block.
NodeOpen = Callable[[str, ClusterView], "AbstractContextManager[Node]"]


class Closable(Protocol):
    def close(self) -> None: ...


class Sessions:
    """One API session, one SSH session per node, one guest channel per VM: opened on first
    use, closed by `close()` (or the `with` block).

    Safe to share between threads (`check --rehearse` rehearses each node in a thread of its
    own): each session is opened once, under a lock of its own (one per node, one per VM), and
    the API session's keep-alive pool holds `workers` connections. A node's SSH session is
    meant to be used by one thread at a time (paramiko opens a channel per command, so two
    would work, but pvefix does not rely on it)."""

    def __init__(self, conn: Connection, workers: int | None = None) -> None:
        self.conn = conn
        #: How many threads share the API session (its keep-alive pool is sized for them).
        self.workers = workers
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._api: ApiClient | LocalApi | None = None
        self._shells: dict[str, SshShell] = {}
        self._locals: dict[str, LocalShell] = {}
        self._guests: dict[int, GuestChannel] = {}
        #: What was opened, by kind ("api", "ssh", "local", "guest"): tests count it.
        self.opened: Counter[str] = Counter()
        self._cluster: ClusterView | None = None
        self._identities: dict[str, str] = {}

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def api(self) -> ApiClient | LocalApi:
        """The command's API session (pvesh with --local)."""
        with self._lock:
            if self._api is None:
                self._api = open_api(self.conn, workers=self.workers)
                self.opened["api"] += 1
            return self._api

    def node(self, node: str, address: Callable[[], NodeAddress],
             vmid: int | None = None) -> SshShell:
        """The SSH session to `node` (its hostname checked when opened); `address` says where
        it is, asked only when a session must be opened."""
        with self._node_lock(node):
            shell = self._shells.get(node)
            if shell is not None and not _alive(shell):
                with contextlib.suppress(Exception):
                    shell.close()
                shell = None
            if shell is None:
                shell = open_node(self.conn, address(), vmid)
                self._shells[node] = shell
                self.opened["ssh"] += 1
            return shell

    def host(self, node: str, address: Callable[[], NodeAddress],
             vmid: int | None = None) -> Node:
        """`node`'s files and commands (pvefix.target.node): this host with --local, else
        its SSH session; `address` says where it is (asked when needed)."""
        from pvefix.target.node import LocalNode, SshNode

        if self.conn.backend == "local":
            return LocalNode(self.local(node, vmid), self._where(node, address))
        if not self.conn.ssh:
            raise PvefixError("this needs SSH to the node (it is off: --no-ssh)")
        return SshNode(self.node(node, address, vmid), self._where(node, address))

    def at(self, node: str) -> ReopeningNode:
        """`node`'s files and commands as the executor holds them: asked afresh on each use,
        so a session that dropped is opened again (pvefix.target.node.ReopeningNode)."""
        from pvefix.target.node import ReopeningNode

        return ReopeningNode(node, lambda: self.host(node, lambda: self.address(node)),
                             self.conn.timeout)

    def cluster(self) -> ClusterView:
        """GET /cluster/status, once a command (node addresses, the cluster's name)."""
        if self._cluster is None:
            from pvefix.target.api import ApiError

            try:
                self._cluster = ClusterView.parse(self.api().get("/cluster/status"))
            except ApiError:
                self._cluster = ClusterView(None, {})
        return self._cluster

    def address(self, node: str) -> NodeAddress:
        """Where `node`'s SSH is (its `ssh_nodes` address, else the cluster's view of it;
        pvefix.target.nodes); with --local, this host."""
        return address_of(self.conn.for_node(node), node, self.cluster)

    def identity(self, node: str) -> str:
        """The cluster's identity (or `node`'s, standalone), with its CA's key: the key of
        pvefix's state (pvefix.target.identity). Asked once a command."""
        if node not in self._identities:
            from pvefix.target.nodes import identity_key

            self._identities[node] = self.cluster().identity(
                node, identity_key(self.conn.for_node(node)))
        return self._identities[node]

    def claim(self, node: str) -> None:
        """With --local, check now that this host is `node` (over SSH the session's own
        `hostname` check does it when it opens)."""
        if self.conn.backend == "local":
            self.local(node)

    def cluster_identity(self) -> str | None:
        """The identity pvefix keeps its state under (pvefix.target.nodes), asked through
        this command's API session (with --local, pvesh is asked directly)."""
        from pvefix.target.nodes import cluster_identity

        api = self.api() if self.conn.backend == "api" and self.conn.host else None
        return cluster_identity(self.conn, api)

    def _where(self, node: str, address: Callable[[], NodeAddress]) -> str:
        return f"{self.conn.ssh_user}@{node} ({address()})"

    def local(self, node: str | None = None, vmid: int | None = None) -> LocalShell:
        """This host's files and commands (--local), its hostname checked against `node`."""
        key = node or ""
        with self._node_lock(f"local:{key}"):
            shell = self._locals.get(key)
            if shell is None:
                shell = open_local(self.conn, node, vmid)
                self._locals[key] = shell
                self.opened["local"] += 1
            return shell

    def guest(self, guest: GuestAccess, vmid: int, node: str | None = None) -> GuestChannel:
        """VM `vmid`'s guest channel (the agent is found through `node` when given)."""
        with self._node_lock(f"guest:{vmid}"):  # two threads open one channel, not two
            with self._lock:
                channel = self._guests.get(vmid)
            if channel is None:
                conn = self.conn.model_copy(update={"node": node}) if node else self.conn
                api: ApiClient | None = None
                if guest.method == "agent" and conn.backend == "api":
                    from pvefix.target.api import ApiClient

                    shared = self.api()
                    api = shared if isinstance(shared, ApiClient) else None
                channel = open_guest(conn, guest, vmid, api=api)
                with self._lock:
                    self._guests[vmid] = channel
                    self.opened["guest"] += 1
            return channel

    def forget(self) -> None:
        """Close the node sessions and the API session (a host reboot dropped them); the next
        use opens new ones. Guest channels stay: their guest is not the node."""
        self._close(guests=False)

    def close(self) -> None:
        """Close every session this command opened."""
        self._close(guests=True)

    def _close(self, *, guests: bool) -> None:
        with self._lock:
            closing: list[Closable] = [*self._shells.values(), *self._locals.values()]
            if self._api is not None:
                closing.append(self._api)
            if guests:
                closing.extend(self._guests.values())
                self._guests.clear()
            self._shells.clear()
            self._locals.clear()
            self._api = None
        for session in closing:
            with contextlib.suppress(Exception):
                session.close()

    def _node_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._node_locks.setdefault(key, threading.Lock())


def _alive(shell: SshShell) -> bool:
    return bool(shell.transport.is_active())


def node_opener(conn: Connection, vmid_on: Callable[[str], int | None],
                sessions: Sessions | None) -> NodeOpen | None:
    """How a reader opens node `node` for a while, as a Node (its hostname checked;
    `vmid_on` names the VM a refusal is about): this host with --local, else SSH to the
    node's address; None when SSH is off. Through `sessions` when given (borrowed: the
    reader's `with` leaves it open), else opened for the read and closed after it."""
    from pvefix.target.node import LocalNode, SshNode
    from pvefix.target.nodes import node_address

    if conn.backend == "local":
        def local(node: str, cluster: ClusterView) -> AbstractContextManager[Node]:
            if sessions is not None:
                return contextlib.nullcontext(LocalNode(sessions.local(node, vmid_on(node)),
                                                        LOCAL_WHERE))
            return _closing(open_local(conn, node, vmid_on(node)))

        return local
    if not conn.ssh:
        return None

    def remote(node: str, cluster: ClusterView) -> AbstractContextManager[Node]:
        def address() -> NodeAddress:
            return node_address(conn, node, cluster)

        if sessions is not None:
            shell = sessions.node(node, address, vmid_on(node))
            return contextlib.nullcontext(SshNode(shell, shell.where))
        return _closing(open_node(conn, address(), vmid_on(node)))

    return remote


@contextlib.contextmanager
def _closing(shell: SshShell | LocalShell) -> Iterator[Node]:
    """The shell as a Node, closed when the reader is done."""
    from pvefix.target.local import LocalShell
    from pvefix.target.node import LocalNode, SshNode

    try:
        yield LocalNode(shell, LOCAL_WHERE) if isinstance(shell, LocalShell) else SshNode(
            shell, shell.where)
    finally:
        shell.close()


def reader_access(conn: Connection) -> dict[str, Any]:
    """How a reader reaches the target, as pvefix.state.AccessFacts' fields (pvesh and qm
    run as root@pam on the node: the same rights as a root@pam ticket)."""
    if conn.backend == "local":
        return {"method": "local", "user": "root@pam", "auth": "ticket", "ssh": True}
    return {"method": "api", "user": conn.api_user,
            "auth": "token" if conn.auth_method == "token" else "ticket", "ssh": conn.ssh}
