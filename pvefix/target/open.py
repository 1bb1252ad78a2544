"""The only place that opens a session to a node or a guest.

Everything that reaches a Proxmox host or a VM's guest gets its session from here and passes it
down; readers and writers take sessions, not settings. An architecture test
(tests/architecture/test_sessions.py) keeps it so: the session classes are constructed nowhere
else in pvefix.

- `open_api(conn)`: the Proxmox API (proxmoxer over checked TLS), or `pvesh` with `--local`.
- `open_node(conn, address, vmid)`: SSH to one node, refused unless the far side's `hostname`
  is that node (pvefix.target.nodes.check_hostname).
- `open_cluster_ssh(conn)`: SSH to the connection's own SSH host, for reads that any node of
  the cluster answers alike (pmxcfs under /etc/pve); `cluster_node_opener(conn)` and
  `ssh_node_opener(conn, address)` hand such sessions to a reader as a Node, closed after.
- `open_local(conn, node, vmid)`: this host's files and commands (`--local`), its hostname
  checked against `node` on a real node.
- `open_guest(conn, guest, vmid)`: the guest over SSH, or its QEMU guest agent (pinged first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pvefix.errors import PvefixError, RefusedError
from pvefix.target.nodes import (
    RESOURCES,
    RESOURCES_PARAMS,
    NodeAddress,
    check_hostname,
    listed_vms,
    node_connection,
)
from pvefix.target.privileges import agent_exec_refusal, unseen_vm_hint
from pvefix.target.settings import Connection

# How a reader opens a node for a while (closed when the `with` ends).
NodeOpener = Callable[[], "AbstractContextManager[Node]"]

if TYPE_CHECKING:
    from pvefix.target.api import ApiClient
    from pvefix.target.guest.access import GuestAccess
    from pvefix.target.guest.channel import GuestChannel
    from pvefix.target.local import LocalApi, LocalShell
    from pvefix.target.node import Node
    from pvefix.target.ssh import SshShell


def open_api(conn: Connection, *, record: bool = False,
             workers: int | None = None) -> ApiClient | LocalApi:
    """The API session of `conn`: pvesh on this node with `--local`, else proxmoxer over HTTPS.
    `workers` sizes its keep-alive pool for that many threads; `record` keeps every request
    (benchmarks and the read trace count them)."""
    if conn.backend == "local":
        from pvefix.target.local import LocalApi

        return LocalApi(conn.timeout)
    from pvefix.target.api import ApiClient

    client = ApiClient(conn, record=record)
    if workers is not None:
        from requests.adapters import HTTPAdapter

        from pvefix.target.api import PinnedAdapter
        from pvefix.target.deadline import watch_pools

        adapter: HTTPAdapter
        if conn.fingerprint:
            adapter = PinnedAdapter(conn.fingerprint, pool_connections=4, pool_maxsize=workers)
        else:
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=workers)
        client.session.mount("https://", watch_pools(adapter))
    return client


def open_node(conn: Connection, address: NodeAddress, vmid: int | None = None) -> SshShell:
    """SSH to `address`, after its `hostname` was checked against the node it stands for."""
    from pvefix.target.ssh import SshShell

    shell = SshShell(node_connection(conn, address))
    try:
        result = shell.run(["hostname"])
        check_hostname(address.node, address, result.stdout, result.exit_code, vmid)
    except BaseException:
        shell.close()
        raise
    return shell


def open_cluster_ssh(conn: Connection) -> SshShell:
    """SSH to the connection's own SSH host (for cluster-wide reads any node answers alike)."""
    from pvefix.target.ssh import SshShell

    return SshShell(conn)


def cluster_node_opener(conn: Connection) -> NodeOpener | None:
    """How to reach the node for cluster-wide reads (this host's files with --local, else
    `cluster_ssh(conn)`'s SSH host), or None when SSH is off."""
    if conn.backend == "local":
        return lambda: _held_local(conn)
    if not conn.ssh:
        return None
    cluster = cluster_ssh(conn)
    return lambda: _held_ssh(lambda: open_cluster_ssh(cluster))


def ssh_node_opener(conn: Connection, address: NodeAddress) -> NodeOpener:
    """How to reach one node at `address` for a read, as the connection's SSH host would be
    reached (the far side's hostname is the reader's to compare)."""
    node_conn = node_connection(conn, address)
    return lambda: _held_ssh(lambda: open_cluster_ssh(node_conn))


@contextmanager
def _held_ssh(opener: Callable[[], SshShell]) -> Iterator[Node]:
    from pvefix.target.node import SshNode

    shell = opener()
    try:
        yield SshNode(shell, shell.where)
    finally:
        shell.close()


@contextmanager
def _held_local(conn: Connection) -> Iterator[Node]:
    from pvefix.target.node import LocalNode

    shell = open_local(conn)
    try:
        yield LocalNode(shell, "this host (--local)")
    finally:
        shell.close()


def cluster_ssh(conn: Connection) -> Connection:
    """The settings of the cluster-wide SSH session: the SSH host given (--ssh-host, or the
    profile's); else, where the profile's ssh.nodes names nodes, the connection's node's
    address there (or the first node's): every node holds every VM config (pmxcfs), and the
    API host's port 22 may be no SSH at all (a VIP, a proxy). Else the API host."""
    if conn.ssh_host or not conn.ssh_nodes:
        return conn
    node = conn.node if conn.node in conn.ssh_nodes else sorted(conn.ssh_nodes)[0]
    return conn.for_node(node)


def open_local(conn: Connection, node: str | None = None, vmid: int | None = None) -> LocalShell:
    """This host's files and commands under `conn.local_root`. On a real node (root "/") with
    `node` given, this host's hostname must be that node."""
    from pvefix.target.local import LocalShell

    root = conn.expanded(conn.local_root)
    shell = LocalShell(root, conn.timeout)
    if node is not None and root == Path("/"):
        name = shell.run(["hostname"])
        check_hostname(node, NodeAddress(node, "this host", 0, "--local"), name.stdout,
                       name.exit_code, vmid)
    return shell


def vm_node(items: Sequence[Mapping[str, Any]] | None, vmid: int,
            who: str | None = None) -> str:
    """The node QEMU VM `vmid` lives on, from GET /cluster/resources?type=vm. `who` (the API
    user or token) lets a miss say what a privilege-separated token needs to see the VM."""
    listed = listed_vms(items)
    if vmid in listed:
        return listed[vmid].node
    nodes = sorted({str(item["node"]) for item in items or [] if item.get("node")})
    raise PvefixError(f"no QEMU VM {vmid} in this cluster; nodes looked at: "
                      f"{', '.join(nodes) or 'none with VMs'} (GET /cluster/resources)"
                      f"{unseen_vm_hint(vmid, who)}")


def open_guest(conn: Connection | None, guest: GuestAccess, vmid: int, *,
               api: ApiClient | None = None) -> GuestChannel:
    """SSH to the guest, or the guest agent of VM `vmid` (checked with a ping first). The
    agent speaks through `api` when given (a command's own API session, left open when the
    channel closes), else through a session of its own."""
    if guest.method == "ssh":
        return _guest_ssh(guest)
    if conn is None:
        raise PvefixError("the guest agent is reached through the Proxmox API: give the "
                          "node's connection settings (--host, --connection, a profile)")
    if conn.backend == "local":
        raise PvefixError("the guest agent is reached through the Proxmox API over HTTPS, which"
                          " --local does not use: reach the guest over SSH (--guest-ssh-host),"
                          " or run pvefix with the API backend (--host)")
    from pvefix.target.api import ApiClient
    from pvefix.target.guest.agent import AgentChannel

    owns = api is None
    client = ApiClient(conn) if api is None else api
    try:
        node = conn.node or vm_node(client.get(RESOURCES, RESOURCES_PARAMS), vmid,
                                    conn.api_user)
        channel = AgentChannel(client, node, vmid, python=guest.python, owns_api=owns)
        channel.ping()
        refusal = agent_exec_refusal(client.get, vmid, conn.api_user)
        if refusal:
            raise RefusedError(refusal, source=f"VM {vmid}")
    except BaseException:
        if owns:
            client.close()
        raise
    return channel


def _guest_ssh(guest: GuestAccess) -> GuestChannel:
    from pvefix.target.guest.ssh import SshChannel, guest_connection
    from pvefix.target.ssh import HostKeyChanged, HostKeyUnknown, SshShell

    try:
        shell = SshShell(guest_connection(guest))
    except (HostKeyUnknown, HostKeyChanged) as exc:
        # Same rules as for the node; the hint names the guest's flag.
        message = exc.message.replace("--accept-new-host-key", "--guest-accept-new-host-key")
        message = message.replace("on the node", "in the guest")
        raise type(exc)(message, source=exc.source) from None
    return SshChannel(shell)
