"""The node a VM lives on, and where its SSH session goes (pvefix.target.open opens it).

Every host read and write goes to the VM's own node. Its SSH address comes from the profile
(`[profiles.X.ssh.nodes] node6 = "10.0.0.16"`, or a simulator's ready file, with an optional
`:port`), else from the cluster's own node list (`GET /cluster/status` gives each node's `ip`),
else, on a standalone host, from the connection's SSH host. Before anything is read or written
the far side's `hostname` must be that node: a session that lands elsewhere is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pvefix.errors import PvefixError, RefusedError
from pvefix.target.settings import Connection

if TYPE_CHECKING:
    pass


# Where every VM of the cluster lives: the one read of /cluster/resources (live, check --all,
# the activation's neighbours, the guest agent's node), walked once by `listed_vms`.
RESOURCES = "/cluster/resources"
RESOURCES_PARAMS = {"type": "vm"}


@dataclass(frozen=True)
class ListedVm:
    """One QEMU VM as GET /cluster/resources?type=vm lists it. `running` is pvestatd's view
    (up to 10 s stale): a witness of where the VM lives, not of its run state."""

    node: str
    running: bool
    hastate: str | None


def listed_vms(items: Sequence[Mapping[str, Any]] | None) -> dict[int, ListedVm]:
    """The QEMU VMs of GET /cluster/resources?type=vm by VMID (containers and entries without
    a VMID left out), in VMID order."""
    out: dict[int, ListedVm] = {}
    for item in items or []:
        if item.get("type", "qemu") != "qemu" or "vmid" not in item or not item.get("node"):
            continue
        out[int(item["vmid"])] = ListedVm(
            node=str(item["node"]), running=item.get("status") == "running",
            hastate=str(item["hastate"]) if item.get("hastate") else None)
    return dict(sorted(out.items()))


class NodeMismatch(RefusedError):
    """The SSH session reached a host whose hostname is not the VM's node (exit 3)."""


@dataclass(frozen=True)
class ClusterView:
    """What /cluster/status says: the cluster's name (None: standalone) and each node's IP."""

    name: str | None
    node_ips: dict[str, str]

    @classmethod
    def parse(cls, items: Sequence[Mapping[str, Any]] | None) -> ClusterView:
        name = None
        ips: dict[str, str] = {}
        for item in items or []:
            if item.get("type") == "cluster" and item.get("name"):
                name = str(item["name"])
            elif item.get("type") == "node" and item.get("name") and item.get("ip"):
                ips[str(item["name"])] = str(item["ip"])
        return cls(name, ips)

    def identity(self, node: str, key: str | None = None) -> str:
        """The key pvefix keeps state under: `cluster-NAME`, or `node-NAME` when standalone,
        with the CA's `key` (pvefix.target.identity) so two of the same name stay apart."""
        from pvefix.target.identity import keyed

        return keyed(f"cluster-{self.name}" if self.name else f"node-{node}", key)


@dataclass(frozen=True)
class NodeAddress:
    """Where to reach one node over SSH, and where that address came from."""

    node: str
    host: str
    port: int
    source: str

    def __str__(self) -> str:
        where = f"{self.host}:{self.port}" if self.port else self.host
        return f"{where} ({self.source})"


def split_address(text: str, default_port: int) -> tuple[str, int]:
    """`10.0.0.16`, `10.0.0.16:2222`, `[fd00::16]:22`, `fd00::16` -> (host, port)."""
    value = text.strip()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":")
        return host, int(port) if port.isdigit() else default_port
    if value.count(":") == 1:
        host, _, port = value.partition(":")
        if not port.isdigit():
            raise PvefixError(f"SSH address {text!r}: the port must be a number")
        return host, int(port)
    return value, default_port


def node_address(conn: Connection, node: str, cluster: ClusterView | None) -> NodeAddress:
    """The SSH address of `node`: profile ssh.nodes, else /cluster/status, else (standalone or
    unknown to the cluster list) the connection's own SSH host."""
    if node in conn.ssh_nodes:
        host, port = split_address(conn.ssh_nodes[node], conn.ssh_port)
        return NodeAddress(node, host, port, "ssh.nodes")
    if cluster is not None and cluster.name and node in cluster.node_ips:
        return NodeAddress(node, cluster.node_ips[node], conn.ssh_port, "/cluster/status")
    own = conn.effective_ssh_host
    if not own:
        raise PvefixError(f"no SSH address for node {node}: set ssh.nodes in the profile or "
                          "--ssh-host")
    return NodeAddress(node, own, conn.ssh_port, "the connection's SSH host")


def address_of(conn: Connection, node: str,
               cluster: Callable[[], ClusterView | None]) -> NodeAddress:
    """Where `node`'s files and commands are: this host with --local, else its SSH address
    (`node_address`; `cluster` is asked only then)."""
    if conn.backend == "local":
        return NodeAddress(node, "this host", 0, "--local")
    return node_address(conn, node, cluster())


def node_connection(conn: Connection, address: NodeAddress) -> Connection:
    """The same connection with its SSH host and port set to one node's."""
    return conn.model_copy(update={"ssh_host": address.host, "ssh_port": address.port})


def check_hostname(node: str, address: NodeAddress, answer: str, exit_code: int | None,
                   vmid: int | None = None) -> None:
    """Refuse unless `hostname` on the far side names `node` (its short name); a `hostname`
    that fails is refused too (pvefix cannot tell which host it reached)."""
    from pvefix.target.ssh import node_mismatch, same_node

    if exit_code != 0 or not answer.strip():
        raise NodeMismatch(f"SSH to {address} did not say which host it is (`hostname` exit "
                           f"{exit_code}); nothing was used or written", source=f"node {node}")
    if not same_node(answer, node):
        raise NodeMismatch(node_mismatch(str(address), answer, node, vmid),
                           source=f"node {node}")


def cluster_identity(conn: Connection, api: Any = None, *,
                     refused: Callable[[PvefixError], None] | None = None) -> str | None:
    """The identity of the cluster this connection reaches (pvefix's state is kept under it);
    None when it cannot tell (an offline read, no right to /cluster/status). `refused` is
    told of a 403 on /cluster/status (Proxmox's message, with what to grant) before that."""
    from pvefix.target.api import ApiClient
    from pvefix.target.local import LocalApi
    from pvefix.target.open import open_api

    client: ApiClient | LocalApi
    if conn.backend != "local" and not conn.host:
        return None
    try:
        # A command's own API session when given (left open), else one for this question.
        client = api if api is not None else open_api(conn)  # pvesh with --local
    except PvefixError:
        if conn.backend == "local":
            return None
        raise
    try:
        view = ClusterView.parse(client.get("/cluster/status"))
    except PvefixError as exc:
        if refused is not None and getattr(exc, "status", None) == 403:
            refused(exc)
        return None
    finally:
        if api is None:
            client.close()
    key = identity_key(conn)
    if view.name:
        return view.identity("", key)
    return view.identity(next(iter(view.node_ips)), key) if len(view.node_ips) == 1 else None


def identity_key(conn: Connection) -> str | None:
    """The CA key of the host this connection reaches (pvefix.target.identity): from the API's
    certificate, or with --local from /etc/pve/pve-root-ca.pem. None: no key to be had."""
    from pvefix.target.identity import ca_file_key, certificate_key, presented_certificate

    if conn.backend == "local":
        try:
            pem = (conn.local_root / "etc/pve/pve-root-ca.pem").read_bytes()
        except OSError:
            return None
        return ca_file_key(pem)
    if not conn.host:
        return None
    der = presented_certificate(conn.host, conn.port, conn.timeout)
    return certificate_key(der) if der else None
