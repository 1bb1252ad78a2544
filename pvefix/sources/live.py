"""Read a live node (API + SSH, or the local backend) into a HostState.

Round trips are the budget (a node 20 ms away): every independent API read goes out in one
wave, and the SSH session is opened and used for the host files while that wave is in flight.

    wave 0: GET /cluster/resources?type=vm (the VM's own node, whatever node the connection
      names) and /cluster/status (node addresses); a node the connection names gets its
      wave 1 sent along, used only when the VM really lives there
    wave 1: config?current=1, pending, status/current, node status, hardware/pci, mappings
    the VM's node as a Node (SSH to its address, `hostname` checked; or this host with
    --local), each round one batch (`Node.run_many`):
      A (during wave 1): cat the host files, pci.cfg and the VM config, proxmox-boot-tool
        status, uname -r, lspci -D -vv (ACS)
      B: readlink -m of every PCI function (its physical path: root port, bridges)
      C: grep -H '' of the sysfs files of the VM's functions and the bridges above them,
         readlink -m of their iommu_group and driver links
    guest (only with guest access; in flight with wave 1, on its own channel): cat
      /proc/cmdline and /etc/default/grub, dmesg (see pvefix.sources.guest_read)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pvefix.errors import PvefixError
from pvefix.facts.api import CLUSTER_STATUS
from pvefix.sources import assemble as asm
from pvefix.sources.assemble import same_mappings
from pvefix.sources.node_read import LiveTrace, Reader, read_node_vms, wave_one
from pvefix.state import AccessFacts, GuestFacts, HostState
from pvefix.target.api import ApiClient, ApiError
from pvefix.target.guest.access import GuestAccess
from pvefix.target.nodes import RESOURCES, RESOURCES_PARAMS
from pvefix.target.open import open_api
from pvefix.target.reading import ApiReader
from pvefix.target.sessions import NodeOpen, Sessions, node_opener, reader_access
from pvefix.target.settings import Connection

T = TypeVar("T")
__all__ = ["LiveTrace", "read_live", "read_live_many", "same_mappings"]


def read_target(api: ApiReader, opener: NodeOpen | None, vmid: int, *, node: str | None,
                access: AccessFacts, trace: LiveTrace | None = None,
                guest_read: Callable[[str], GuestFacts] | None = None) -> HostState:
    """Read VM `vmid` and its node through `api` and (if given) the node; see the module
    doc. `guest_read(node)` reads the guest's facts; it runs alongside wave 1."""
    trace = trace or LiveTrace()
    trace.started = time.perf_counter()
    notes: list[str] = []
    reader = Reader(api, opener, trace, notes)
    try:
        # Wave 0: where the VM lives and what the cluster is, whatever node the connection
        # names; a named node's wave 1 goes out at the same time (used when it is right).
        resources = reader.submit(api.get, RESOURCES, RESOURCES_PARAMS)
        status = reader.submit(api.get, *CLUSTER_STATUS.at())
        guessed = wave_one(reader, node, vmid) if node is not None else None
        known_node = reader.find_node(vmid, resources)
        cluster = reader.cluster_view(status)
        notes.extend(asm.elsewhere(vmid, known_node, node))
        guest_future = reader.submit(guest_read, known_node) if guest_read else None
        wave = guessed if guessed is not None and node == known_node else None
        state = read_node_vms(reader, known_node, [vmid], cluster, access, wave, notes)[vmid]
        if guest_future is not None:
            state = state.model_copy(update={"guest": guest_future.result()})
        return state
    finally:
        reader.close()
        trace.finished = time.perf_counter()


def read_targets(api: ApiReader, opener: NodeOpen | None, vmids: Sequence[int], *, node: str | None,
                 access: AccessFacts, trace: LiveTrace | None = None) -> list[HostState]:
    """Read several VMs and their nodes at once (`pvefix plan A B C`, `pvefix desired A B`).

    Wave 0 goes out once; then every node the VMs live on is read in parallel, each as
    `read_target` reads one VM's node, with what the VMs share read once: one session per
    node whose round A holds the node's facts and every one of its VMs' configs, the node's
    API reads (status, hardware/pci, mappings) once, each VM's own three (config, pending,
    status) in the same wave, and round B (the physical paths of the node's PCI functions)
    once. Round C (sysfs of a VM's functions) follows per VM on the same session."""
    trace = trace or LiveTrace()
    trace.started = time.perf_counter()
    cluster_notes: list[str] = []
    reader = Reader(api, opener, trace, cluster_notes)
    try:
        resources = reader.submit(api.get, RESOURCES, RESOURCES_PARAMS)
        status = reader.submit(api.get, *CLUSTER_STATUS.at())
        where = {vmid: reader.find_node(vmid, resources) for vmid in vmids}
        cluster = reader.cluster_view(status)
        by_node: dict[str, list[int]] = {}
        for vmid in vmids:
            by_node.setdefault(where[vmid], []).append(vmid)
        states: dict[int, HostState] = {}
        with ThreadPoolExecutor(max_workers=min(8, len(by_node)) or 1,
                                thread_name_prefix="pvefix-node") as nodes:
            futures = [nodes.submit(read_node_vms, reader, name, vms, cluster, access)
                       for name, vms in by_node.items()]
            for future in futures:
                states.update(future.result())
        return [asm.with_notes(states[v], [*cluster_notes, *asm.elsewhere(v, where[v], node)])
                for v in vmids]
    finally:
        reader.close()
        trace.finished = time.perf_counter()


def read_live(connection: Connection, vmid: int, *, trace: LiveTrace | None = None,
              guest: GuestAccess | None = None, sessions: Sessions | None = None) -> HostState:
    """Read VM `vmid` and its node live: the API (token or root@pam ticket) plus the node
    (SSH, or this host with --local); see the module docstring for the waves. With `guest`,
    the guest's cmdline, GRUB defaults and BAR errors are read too. With `sessions` (a
    command that reads more than once, like apply), its sessions are used and left open;
    otherwise the read opens its own and closes them."""
    trace = trace or LiveTrace()
    guest_read = None
    guest_notes: list[str] = []  # filled by the guest read (its own thread)
    if guest is not None:
        from pvefix.sources.guest_read import guest_reader

        guest_read = guest_reader(connection, guest, vmid, guest_notes, sessions)
    api, opener, access = _open(connection, lambda node: vmid, trace, guest, sessions)
    try:
        state = read_target(api, opener, vmid, node=connection.node, access=access,
                            trace=trace, guest_read=guest_read)
    except ApiError as exc:
        raise _not_on_node(connection, vmid, exc) from None
    finally:
        if sessions is None:
            api.close()
    return asm.with_notes(state, guest_notes)


def read_live_many(connection: Connection, vmids: Sequence[int], *,
                   trace: LiveTrace | None = None) -> list[HostState]:
    """Read several VMs and their nodes live, sessions opened once (see `read_targets`)."""
    trace = trace or LiveTrace()
    # A refused hostname names the node (several VMs may live on it), not a VM.
    api, opener, access = _open(connection, lambda node: None, trace, None, None)
    try:
        return read_targets(api, opener, vmids, node=connection.node, access=access,
                            trace=trace)
    finally:
        api.close()


def _open(connection: Connection, vmid_on: Callable[[str], int | None], trace: LiveTrace,
          guest: GuestAccess | None, sessions: Sessions | None,
          ) -> tuple[ApiReader, NodeOpen | None, AccessFacts]:
    """The API session, how to open a node, and what access they give (borrowed from
    `sessions` when given: the reader's close leaves them open)."""
    access = AccessFacts(**reader_access(connection), guest=guest.method if guest else None)
    opener = node_opener(connection, vmid_on, sessions)
    if sessions is not None:
        return sessions.api(), opener, access
    client = open_api(connection, record=trace.record_api)
    if isinstance(client, ApiClient):  # the API backend
        trace.api = client
    return client, opener, access


def _not_on_node(connection: Connection, vmid: int, exc: ApiError) -> Exception:
    if (not connection.on_this_host and connection.node and exc.status == 500
            and "does not exist" in exc.message):
        return PvefixError(
            f"no VM {vmid} on node {connection.node}; nodes looked at: {connection.node} "
            "(the node set by --node, PVEFIX_NODE, the profile or the ready file; leave "
            "it out to search the whole cluster)")
    return exc
