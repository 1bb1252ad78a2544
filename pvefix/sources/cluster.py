"""Read many VMs of a cluster at once, for `pvefix check --all`.

Two paths give the same observed state (tests/check/test_bulk_read.py holds them to it):

- bulk (SSH reachable): one SSH session runs the host-fact commands and one `tar` of pmxcfs's
  /etc/pve/nodes/*/qemu-server/*.conf (every VM's raw config, sources/pmxcfs.py) at once, while
  the API lists the VMs (GET /cluster/resources) and then asks each node holding them for
  their live run states and running machines (GET /nodes/{node}/qemu?full=1, all nodes at
  once). A few round trips whatever the VM count.
- per-VM (no SSH, or the bulk read failed): a bounded thread pool sends each VM's
  GET .../pending (current and pending value of every key) over one keep-alive session.

The host facts (cmdline files, boot loader, /proc/cmdline) come from the SSH session's node;
`hostname` says which node that is. `ClusterRead.path` says which path was taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from pvefix.errors import PvefixError
from pvefix.facts import node as nf
from pvefix.facts.api import CLUSTER_STATUS, NODE_VMS, VM_PENDING, VM_STATUS
from pvefix.facts.node import round_zero
from pvefix.hostfacts import file_fact
from pvefix.observed import (
    ObservedNode,
    ObservedVm,
    node_from_files,
    vm_from_api,
    vm_from_config,
)
from pvefix.sources.gather import gather
from pvefix.sources.pmxcfs import BULK_COMMAND, RawConfig, parse_bulk
from pvefix.target.nodes import RESOURCES, RESOURCES_PARAMS, listed_vms
from pvefix.target.open import NodeOpener
from pvefix.target.privileges import unseen_vm_hint
from pvefix.target.reading import ApiReader
from pvefix.target.result import CommandResult
from pvefix.target.settings import Connection

DEFAULT_WORKERS = 32
# The node facts check reads (pvefix.facts.node): hostname first, then the cmdline files.
HOST_COMMANDS: tuple[tuple[str, ...], ...] = tuple(round_zero("check"))
Results = Mapping[tuple[str, ...], CommandResult]
# The cluster-wide session's answers: the check facts' results, and the bulk command's.
HostRead = tuple[Results, CommandResult | None]


Progress = Callable[[int, int], None]
# The other nodes' own SSH sessions, found when the read starts (it may ask the API where the
# nodes are): node name -> how to open it (pvefix.target.open.NodeOpener).
NodeOpeners = Callable[[], Mapping[str, NodeOpener]]


@dataclass
class ClusterRead:
    """What the reader found: each VM (or why it could not be read), the SSH node's facts."""

    vms: dict[int, ObservedVm | str] = field(default_factory=dict)
    nodes: dict[str, ObservedNode] = field(default_factory=dict)
    listed: dict[int, str] = field(default_factory=dict)  # every VM of the cluster: its node
    ssh_node: str | None = None
    ssh_error: str | None = None  # why the cluster-wide SSH session read nothing, if it failed
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    path: str = "per-vm"  # "bulk": configs over SSH from pmxcfs; "per-vm": one API read each
    api_vm_reads: int = 0  # VMs read one by one through the API
    node_sessions: int = 0  # other nodes read through their own SSH sessions, in parallel

    def path_note(self) -> str:
        nodes = (f"; host cmdlines of {self.node_sessions} more node(s) through their own SSH "
                 "sessions, in parallel" if self.node_sessions else "")
        if self.path == "bulk":
            extra = (f"; {self.api_vm_reads} VM(s) read through the API"
                     if self.api_vm_reads else "")
            return ("read path: bulk (every VM config in one SSH command from "
                    f"/etc/pve/nodes on node {self.ssh_node}, run states in one API wave{extra}"
                    f"{nodes})")
        return (f"read path: per-VM API reads ({self.api_vm_reads} VM(s), bounded concurrency"
                f"{'' if self.ssh_node else '; no SSH'}{nodes})")


def node_from_commands(results: Results) -> tuple[str, ObservedNode]:
    """The node a session reaches, from the check facts' results (by argument list, as
    `gather` gives them, with the drop-ins it listed)."""
    host = nf.HOSTNAME.parse(results.get(nf.HOSTNAME.argv()))
    if host is None:
        raise PvefixError("`hostname` failed over SSH: cannot tell which node SSH reaches")
    name = host.split(".")[0]
    files = {f.tree: f.parse(results.get(f.argv()))
             for f in (nf.KERNEL_CMDLINE_FILE, nf.GRUB_DEFAULT_FILE, nf.PROC_CMDLINE_FILE)}
    for path in nf.GRUB_DROPINS.parse(results.get(nf.GRUB_DROPINS.argv())):
        files[path] = file_fact(path, results.get(nf.dropin_read(path))).text
    boot = nf.BOOT_TOOL.parse(results.get(nf.BOOT_TOOL.argv()))
    return name, node_from_files(name, boot, files)


def read_cluster(
    api: ApiReader,
    open_node: NodeOpener | None,
    vmids: Sequence[int] | None,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
    bulk: bool = True,
    node_openers: NodeOpeners | None = None,
) -> ClusterRead:
    """Read `vmids` (every VM of the cluster when None) and the SSH node's host facts.

    With `bulk` and a node, the configs come over SSH in one command (see the module doc);
    VMs it does not hold (or all, when it fails) are read through the API, one by one.
    `node_openers` names other nodes to read the host facts of, each through its own SSH
    session, all at once and alongside everything else.
    """
    start = time.perf_counter()
    out = ClusterRead()
    # Three tasks below (host facts, other nodes, run states) wait on API reads queued on this
    # pool: they get threads of their own, so `workers` bounds the reads, and --workers 1 does
    # not leave the reads waiting behind the task that waits on them.
    with ThreadPoolExecutor(max_workers=workers + 3, thread_name_prefix="pvefix-check") as pool:
        host_future: Future[HostRead] | None = None
        if open_node is not None:
            host_future = pool.submit(_host_facts, open_node, bulk)
        nodes_future: Future[dict[str, ObservedNode]] | None = None
        if node_openers is not None:
            # Its own threads: the node sessions must not queue behind per-VM API reads.
            nodes_future = pool.submit(_other_nodes, node_openers)
        where = {vmid: (vm.node, vm.running)
                 for vmid, vm in listed_vms(api.get(RESOURCES, RESOURCES_PARAMS)).items()}
        out.listed = {vmid: node for vmid, (node, _) in sorted(where.items())}
        wanted = sorted(where) if vmids is None else list(dict.fromkeys(vmids))
        for vmid in (v for v in wanted if v not in where):
            out.vms[vmid] = ("not a QEMU VM of this cluster (GET /cluster/resources)"
                             + unseen_vm_hint(vmid, api.api_user))
        todo = [v for v in wanted if v in where]
        status_future = pool.submit(_running_machines, api, pool, todo, where)
        host = _host_result(out, host_future)
        raw = _bulk_configs(out, host) if bulk else {}
        by_api = [v for v in todo if v not in raw or raw[v].node != where[v][0]]
        out.api_vm_reads = len(by_api)
        rows = _pending_rows(api, pool, out, by_api, where, len(todo), progress)
        _fill_vms(out, todo, where, rows, {v: r for v, r in raw.items() if v not in by_api},
                  status_future.result())
        if progress is not None and not by_api and todo:
            progress(len(todo), len(todo))
        _add_nodes(out, host[0] if host else None, nodes_future)
    out.elapsed_s = time.perf_counter() - start
    return out


def _host_result(out: ClusterRead, future: Future[HostRead] | None) -> HostRead | None:
    """The cluster-wide session's read; its failure noted."""
    if future is None:
        return None
    try:
        return future.result()
    except PvefixError as exc:
        out.notes.append(f"host facts not read over SSH: {exc}")
        out.ssh_error = str(exc)
        return None


def _bulk_configs(out: ClusterRead, host: HostRead | None) -> dict[int, RawConfig]:
    """The VM configs of the bulk command's answer ({} when it was not sent or failed)."""
    if host is None or host[1] is None:
        return {}
    try:
        raw = parse_bulk(host[1])
    except PvefixError as exc:
        out.notes.append(f"bulk read failed, reading VM by VM through the API: {exc}")
        return {}
    out.path = "bulk"
    return raw


def _pending_rows(api: ApiReader, pool: ThreadPoolExecutor, out: ClusterRead, by_api: list[int],
                  where: Mapping[int, tuple[str, bool]], total: int,
                  progress: Progress | None) -> dict[int, Any]:
    """GET .../pending of each VM of `by_api`, in parallel; a failure is the VM's entry."""
    pending = {pool.submit(api.get, *VM_PENDING.at(where[v][0], v)): v for v in by_api}
    rows: dict[int, Any] = {}
    for done, future in enumerate(as_completed(pending), start=1):
        vmid = pending[future]
        try:
            rows[vmid] = future.result() or []
        except PvefixError as exc:
            out.vms[vmid] = f"cannot read: {exc}"
        if progress is not None:
            progress(done, total)
    return rows


def _fill_vms(out: ClusterRead, todo: list[int], where: Mapping[int, tuple[str, bool]],
              rows: Mapping[int, Any], raw: Mapping[int, RawConfig],
              statuses: Mapping[int, Mapping[str, Any]]) -> None:
    """Each VM's observed state: from its API rows, or from its raw config (bulk)."""
    for vmid in todo:
        status = statuses.get(vmid, {"status": "stopped"})
        if vmid in rows:
            out.vms[vmid] = vm_from_api(vmid, where[vmid][0], rows[vmid], status)
        elif vmid in raw:
            machine = status.get("running-machine")
            out.vms[vmid] = vm_from_config(
                vmid, raw[vmid].node, raw[vmid].text,
                "running" if status.get("status") == "running" else "stopped",
                str(machine) if machine else None)


def _add_nodes(out: ClusterRead, host_results: Results | None,
               nodes_future: Future[dict[str, ObservedNode]] | None) -> None:
    """The SSH node's facts and the other nodes' (read through their own sessions)."""
    if host_results is not None:
        try:
            name, node = node_from_commands(host_results)
            out.ssh_node = name
            out.nodes[name] = node
        except PvefixError as exc:
            out.notes.append(f"host facts not read over SSH: {exc}")
    if nodes_future is not None:
        others = nodes_future.result()
        out.node_sessions = len(others)
        for name, node in others.items():
            out.nodes.setdefault(name, node)


def _other_nodes(node_openers: NodeOpeners) -> dict[str, ObservedNode]:
    """Each node's host facts through its own SSH session, all sessions at once."""
    openers = dict(node_openers())
    if not openers:
        return {}
    with ThreadPoolExecutor(max_workers=len(openers),
                            thread_name_prefix="pvefix-node") as pool:
        futures = {name: pool.submit(_one_node, name, opener)
                   for name, opener in openers.items()}
        return {name: future.result() for name, future in futures.items()}


def _one_node(name: str, opener: NodeOpener) -> ObservedNode:
    """One node's facts; a session that fails, or lands on another host, is a problem of that
    node (the check then fails for it: pvefix does not call a rule kept when it did not look)."""
    from pvefix.target.ssh import same_node

    try:
        reached, node = node_from_commands(_host_facts(opener, bulk=False)[0])
    except PvefixError as exc:
        return ObservedNode(name=name, problem=f"SSH to node {name} failed: {exc}")
    if not same_node(reached, name):
        return ObservedNode(name=name, problem=(
            f"SSH for node {name} reached host '{reached}'; its cmdline is not node {name}'s "
            "(fix ssh.nodes in the profile)"))
    return node


def _running_machines(api: ApiReader, pool: ThreadPoolExecutor, todo: list[int],
                      where: Mapping[int, tuple[str, bool]]) -> dict[int, Mapping[str, Any]]:
    """The live status (with `running-machine` for a running VM) of every VM in `todo`.

    /cluster/resources is no witness of a run state: Proxmox fills its `status` from pvestatd's
    RRD data (every 10 s), `unknown` after a node start and stale for up to 10 s after a start
    or stop. So every node holding a VM of `todo` is asked GET /nodes/{node}/qemu?full=1, which
    vmstatus answers live (each VM's pid, and QMP for the running machine), all nodes at once:
    the same wave as before. A VM missing from its node's answer, or running without a machine
    in it, is asked with its own GET .../status/current; one that cannot be read is reported
    running with its machine unknown (skipped), never taken as stopped.
    """
    nodes = sorted({where[v][0] for v in todo})
    lists = {node: pool.submit(api.get, *NODE_VMS.at(node)) for node in nodes}
    found: dict[int, Mapping[str, Any]] = {}
    for node, future in lists.items():
        try:
            items = future.result() or []
        except PvefixError:
            continue  # fall back to one status call per VM
        for item in items:
            if "vmid" in item and where.get(int(item["vmid"]), ("",))[0] == node:
                found[int(item["vmid"])] = item
    missing = [
        v for v in todo
        if v not in found
        or (found[v].get("status") == "running" and not found[v].get("running-machine"))]
    asked = {pool.submit(api.get, *VM_STATUS.at(where[v][0], v)): v
             for v in missing}
    for future, vmid in asked.items():
        try:
            found[vmid] = future.result() or {}
        except PvefixError:
            found[vmid] = {"status": "running"}  # run state unknown: machine reported skipped
    return found


def _host_facts(opener: NodeOpener, bulk: bool) -> HostRead:
    """The check facts gathered over the node (one batch, and one more for the GRUB drop-ins
    on the hosts that have them); with `bulk`, BULK_COMMAND on its own channel at the same
    time (its failure, past --timeout or too much output, leaves the host facts)."""
    with opener() as node:
        if not bulk:
            return gather(node, "check")[1], None
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pvefix-bulk") as pool:
            tar = pool.submit(node.run_many, [BULK_COMMAND])
            facts = gather(node, "check")[1]
            try:
                return facts, tar.result()[0]
            except PvefixError as exc:
                return facts, CommandResult(BULK_COMMAND, None, "", exc.message)


def node_openers_for(connection: Connection, api: ApiReader,
                     nodes: Sequence[str]) -> NodeOpeners | None:
    """How to reach each of `nodes` through its own SSH session (the profile's ssh.nodes, else
    the address /cluster/status gives); None when SSH is off or the backend is local. A node
    whose address is the connection's own SSH host is left to that session."""
    if connection.on_this_host or not connection.ssh or not nodes:
        return None

    def openers() -> dict[str, NodeOpener]:
        from pvefix.target.nodes import ClusterView, node_address
        from pvefix.target.open import cluster_ssh, ssh_node_opener

        view: ClusterView | None = None
        if any(node not in connection.ssh_nodes for node in nodes):
            try:
                view = ClusterView.parse(api.get(*CLUSTER_STATUS.at()))
            except PvefixError:
                view = None
        cluster = cluster_ssh(connection)  # the cluster-wide session's node: not twice
        own = (cluster.effective_ssh_host, cluster.ssh_port)
        out: dict[str, NodeOpener] = {}
        for node in nodes:
            try:
                address = node_address(connection, node, view)
            except PvefixError:
                continue  # no address: the node stays unread, and the report says so
            if (address.host, address.port) != own:
                out[node] = ssh_node_opener(connection, address)
        return out

    return openers


def read_live_cluster(
    connection: Connection,
    vmids: Sequence[int] | None,
    *,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
    bulk: bool = True,
    nodes: Sequence[str] = (),
) -> ClusterRead:
    """`read_cluster` over a connection (API + SSH, or the local backend); `nodes`: the nodes
    whose host facts are wanted (each read through its own SSH session, in parallel)."""
    from pvefix.target.open import cluster_node_opener, open_api

    api = open_api(connection, workers=workers)
    try:
        # The local backend's node reads files under its root as text: the per-VM path.
        return read_cluster(api, cluster_node_opener(connection), vmids, workers=workers,
                            progress=progress, bulk=bulk and not connection.on_this_host,
                            node_openers=node_openers_for(connection, api, nodes))
    finally:
        api.close()
