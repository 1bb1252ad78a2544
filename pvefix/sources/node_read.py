"""One node's share of a live read (sources/live.py): its session's rounds over a Node, its
API reads, and the state put together (sources/assemble.py).

The node's rounds are the one batching of sources/gather.py `gather` (as check --all's are):
round A (with the API's wave 1 in flight): the registry's first round for a plan and, added by
this reader, the VM configs; round B: what round A's answers call for (the GRUB drop-ins
listed), the registry's later rounds and, added here, the physical path of every PCI function
(which needs the API's list); round C: the sysfs files and links of the VMs' functions and the
bridges above them (`facts.sysfs.function_reads`). Each round is one `Node.run_many`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pvefix.errors import PvefixError
from pvefix.facts import node as nf
from pvefix.facts import sysfs
from pvefix.facts.api import MAPPINGS, NODE_PCI, NODE_STATUS
from pvefix.facts.api import VM_CURRENT as CONFIG
from pvefix.facts.api import VM_PENDING as PENDING
from pvefix.facts.api import VM_STATUS as STATUS
from pvefix.facts.project import known_from
from pvefix.hosttree.sysfs import PciDevice
from pvefix.paths import SYSFS_PCI, vm_config
from pvefix.sources import assemble as asm
from pvefix.sources import remote_facts as rf
from pvefix.sources.assemble import Results
from pvefix.sources.common import bridges_above, vm_device_addresses
from pvefix.sources.gather import Extra, gather
from pvefix.state import AccessFacts, HostState
from pvefix.target.api import ApiClient, ApiError
from pvefix.target.node import Node
from pvefix.target.nodes import ClusterView
from pvefix.target.open import vm_node
from pvefix.target.reading import ApiReader
from pvefix.target.result import CommandResult
from pvefix.target.sessions import NodeOpen

T = TypeVar("T")


@dataclass
class LiveTrace:
    """What a live read did, for benchmarks: SSH rounds (start, end, commands), timings."""

    ssh_rounds: list[tuple[float, float, int]] = field(default_factory=list)
    ssh_connect: tuple[float, float] | None = None
    record_api: bool = False  # keep a record of every API request (ApiClient.records)
    api: ApiClient | None = None
    started: float = 0.0
    finished: float = 0.0


class Reader:
    """One read's API session, node opener, thread pool and the nodes it holds open."""

    def __init__(self, api: ApiReader, opener: NodeOpen | None, trace: LiveTrace,
                 notes: list[str]) -> None:
        self.api = api
        self.opener = opener
        self.trace = trace
        self.notes = notes
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pvefix-read")
        self.held = ExitStack()  # every node opened, closed when the read ends
        self.lock = threading.Lock()

    def rounds(self, node: Node, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        start = time.perf_counter()
        results = node.run_many(commands)
        self.trace.ssh_rounds.append((start, time.perf_counter(), len(commands)))
        return results

    def first_round(self, node: str, cluster: ClusterView, extra: Extra) -> tuple[Node, Results]:
        """Open `node` (its hostname checked by the opener) and gather a plan's node facts
        over it (sources/gather.py), `extra` adding this reader's own reads to its rounds."""
        assert self.opener is not None
        start = time.perf_counter()
        opening = self.opener(node, cluster)
        with self.lock:
            opened = self.held.enter_context(opening)
        self.trace.ssh_connect = (start, time.perf_counter())
        return opened, gather(_Traced(self, opened), "plan", extra)[1]

    def find_node(self, vmid: int, resources: Future[Any]) -> str:
        try:
            items = resources.result()
        except ApiError as exc:
            if exc.status in (401, 403):
                raise  # "token refused" says it all
            raise PvefixError(f"cannot find the node of VM {vmid}: {exc}") from None
        return vm_node(items, vmid, self.api.api_user)

    def cluster_view(self, status: Future[Any]) -> ClusterView:
        """/cluster/status (a reader without the right to it gets a standalone view)."""
        try:
            return ClusterView.parse(status.result())
        except ApiError as exc:
            self.notes.append(f"GET /cluster/status failed ({exc.status}): node addresses "
                              "from the profile's ssh.nodes or the SSH host only")
            return ClusterView(None, {})

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        return self.pool.submit(fn, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.held.close()


def read_node_vms(reader: Reader, node: str, vmids: list[int], cluster: ClusterView,
                   access: AccessFacts, wave: dict[str, Future[Any]] | None = None,
                   notes: list[str] | None = None) -> dict[int, HostState]:
    """Node `node`'s VMs: one session for all of them (round A with every VM config), the
    node's API reads once (`wave`: one VM's and the node's, sent already) and each VM's own,
    then round B and C, each asked once for the node. `notes`: one VM's notes so far."""
    configs = [nf.cat(vm_config(node, vmid)) for vmid in vmids]
    # The node's API reads go first: round B waits on its PCI list inside the pool.
    shared = wave if wave is not None else _node_wave(reader, node)
    extra = _extra(configs, shared["pci"])
    ssh = reader.submit(reader.first_round, node, cluster, extra) if reader.opener else None
    own = {vmid: wave if wave is not None else _vm_wave(reader, node, vmid) for vmid in vmids}
    node_answers = {name: future.result() for name, future in shared.items()}
    held, first = ssh.result() if ssh is not None else (None, {})
    results = dict(first)  # shared: a VM's round B asks only what another did not
    return {vmid: _assemble(reader, held, vmid, node,
                            {**node_answers, **{k: f.result() for k, f in own[vmid].items()}},
                            results, access, [] if notes is None else notes)
            for vmid in vmids}


class _Traced:
    """A Node's batch call, each batch's time kept in the read's trace."""

    def __init__(self, reader: Reader, node: Node) -> None:
        self.reader = reader
        self.node = node

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        return self.reader.rounds(self.node, commands)


def _extra(configs: list[tuple[str, ...]], pci: Future[Any]) -> Extra:
    """A plan's own reads in the node's rounds: the VM configs with the first, the physical
    path of every PCI function (readlink -m of each in the API's list) with the second."""

    def extra(step: int, results: Results) -> list[tuple[str, ...]]:
        if step == 0:
            return configs
        if step == 1:
            return _readlinks(_addresses(pci))
        return []

    return extra


def _addresses(pci: Future[Any]) -> list[str]:
    """The PCI functions the API lists (none when it failed: the read says so later)."""
    try:
        items = pci.result() or []
    except PvefixError:
        return []
    return [str(item["id"]) for item in items if "id" in item]


def _readlinks(addresses: list[str]) -> list[tuple[str, ...]]:
    return [tuple(c) for c in sysfs.chunks(sysfs.READLINK, [f"{SYSFS_PCI}/{a}" for a in addresses])]


def wave_one(reader: Reader, node: str, vmid: int) -> dict[str, Future[Any]]:
    """The VM's and its node's API reads, all at once (errors stay in the futures)."""
    return {**_vm_wave(reader, node, vmid), **_node_wave(reader, node)}


def _vm_wave(reader: Reader, node: str, vmid: int) -> dict[str, Future[Any]]:
    api = reader.api
    return {"config": reader.submit(api.get, *CONFIG.at(node, vmid)),
            "pending": reader.submit(api.get, *PENDING.at(node, vmid)),
            "status": reader.submit(api.get, *STATUS.at(node, vmid))}


def _node_wave(reader: Reader, node: str) -> dict[str, Future[Any]]:
    """The node's API reads (and the cluster's mappings), shared by its VMs."""
    api = reader.api
    return {"node": reader.submit(api.get, *NODE_STATUS.at(node)),
            "pci": reader.submit(api.get, *NODE_PCI.at(node)),
            "mapping": reader.submit(api.get, *MAPPINGS.at())}


def _assemble(reader: Reader, held: Node | None, vmid: int, node: str,
              answers: dict[str, Any], results: dict[tuple[str, ...], CommandResult],
              access: AccessFacts, notes: list[str]) -> HostState:
    """Round B and C over `held`, then the state (sources/assemble.py)."""
    pci_items: list[dict[str, Any]] = list(answers["pci"] or [])
    addresses = [str(item["id"]) for item in pci_items if "id" in item]
    config = nf.cat(vm_config(node, vmid))
    known = known_from(nf.facts_for("plan"), lambda f: results.get(f.argv()))
    paths = _parents(addresses, results)
    cfg, vm = asm.vm_facts(vmid, node, answers, results.get(config), notes)
    mappings = asm.mappings(answers, results, held is not None, notes)
    devices = _pci_devices(reader, held, pci_items, paths,
                           vm_device_addresses(cfg, node, mappings, addresses), notes)
    acs = nf.ACS.parse(results.get(nf.ACS.argv()))
    if acs is None and held is not None:
        notes.append("ACS settings unknown: `lspci -D -vv` failed on the node")
    if held is None:
        notes.append(asm.NO_SSH)
    return HostState(node=asm.node_facts(node, answers, results, known),
                     boot_tool=nf.BOOT_TOOL.parse(results.get(nf.BOOT_TOOL.argv())),
                     files=asm.files(results), pci_devices=devices, acs=acs or {},
                     mappings=mappings, vm=vm, access=access, notes=notes)


def _parents(addresses: list[str], results: Results) -> dict[str, list[str]]:
    """Each PCI function's parent path (root port, bridges), from round B's readlinks
    (none read: no SSH)."""
    links: dict[str, str] = {}
    for command in _readlinks(addresses):
        if command in results:
            links.update(sysfs.readlink_lines(results[command], command[len(sysfs.READLINK):]))
    return {a: rf.parent_path(links[p]) for a in addresses
            if (p := f"{SYSFS_PCI}/{a}") in links}


def _pci_devices(reader: Reader, held: Node | None, pci_items: list[dict[str, Any]],
                 paths: dict[str, list[str]], vm_devices: list[str], notes: list[str],
                 ) -> list[PciDevice]:
    """API facts for every function; full sysfs facts (round C) for the VM's functions and
    the bridges above them."""
    devices = asm.api_devices(pci_items, paths)
    missing = [a for a in vm_devices if a not in devices]
    if missing:
        notes.append("passed-through devices not on the node: " + ", ".join(missing))
    wanted = [a for a in vm_devices if a in devices]
    wanted = sorted({*wanted, *(b for b in bridges_above(devices[a] for a in wanted)
                                if b in devices)})
    if held is not None and wanted:
        reads = sysfs.function_reads(wanted)
        texts, targets = sysfs.function_answers(reads, reader.rounds(held, reads))
        devices.update(asm.sysfs_devices(wanted, texts, targets, paths))
    return sorted(devices.values(), key=lambda d: d.address)
