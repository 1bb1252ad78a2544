"""Read a live node (API + SSH, or the local backend) into a HostState.

Round trips are the budget (a node 20 ms away): every independent API read goes out in one
wave, and the SSH session is opened and used for the host files while that wave is in flight.

    wave 0: GET /cluster/resources?type=vm (the VM's own node, whatever node the connection
      names) and /cluster/status (node addresses); a node the connection names gets its
      wave 1 sent along, used only when the VM really lives there
    wave 1: config?current=1, pending, status/current, node status, hardware/pci, mappings
    SSH to the VM's node (pvefix.target.nodes: its address, then `hostname` checked), on
    one connection, concurrent channels:
      A (during wave 1): cat the host files, pci.cfg and the VM config, proxmox-boot-tool
        status, uname -r, lspci -D -vv (ACS)
      B: readlink -m of every PCI function (its physical path: root port, bridges)
      C: grep -H '' of the sysfs files of the VM's functions and the bridges above them,
         readlink -m of their iommu_group and driver links
    guest (only with guest access; in flight with wave 1, on its own channel): cat
      /proc/cmdline and /etc/default/grub, dmesg (see pvefix.sources.guest_read)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pvefix.errors import PvefixError
from pvefix.facts import node as nf
from pvefix.facts.api import (
    CLUSTER_STATUS,
    MAPPINGS,
    NODE_PCI,
    NODE_STATUS,
    VM_CURRENT,
    VM_PENDING,
    VM_STATUS,
)
from pvefix.facts.node import round_zero
from pvefix.facts.project import known_from, node_fields
from pvefix.facts.sysfs import (
    GREP_FILES,
    READLINK,
    SYSFS_FILES,
    SYSFS_LINKS,
    chunks,
    grep_files,
    readlink_lines,
)
from pvefix.hostfacts import GRUB_D_LIST, dropin_paths, file_fact
from pvefix.hosttree.mapping import PciMapping, PciMappingFile
from pvefix.hosttree.sysfs import PciDevice
from pvefix.paths import (
    CPU_MODELS,
    GRUB_DEFAULT,
    KERNEL_CMDLINE,
    MAPPING_FILE,
    PROC_CMDLINE,
    SYSFS_PCI,
    vm_config,
)
from pvefix.sources import remote_facts as rf
from pvefix.sources.common import (
    bridges_above,
    pending_from_api,
    pending_items,
    vm_device_addresses,
)
from pvefix.state import (
    AccessFacts,
    FileFact,
    GuestFacts,
    HostState,
    NodeFacts,
    VmFacts,
)
from pvefix.target.api import ApiClient, ApiError
from pvefix.target.guest.access import GuestAccess
from pvefix.target.nodes import RESOURCES, RESOURCES_PARAMS, ClusterView
from pvefix.target.open import open_api, vm_node
from pvefix.target.reading import ApiReader
from pvefix.target.sessions import Sessions, node_shells, reader_access
from pvefix.target.settings import Connection
from pvefix.target.ssh import CommandResult
from pvefix.vmconfig.config import VMConfig

T = TypeVar("T")


ShellFactory = Callable[[str, ClusterView], "Shell"]


class Shell(Protocol):
    @property
    def exec_count(self) -> int: ...

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]: ...

    def close(self) -> None: ...


@dataclass
class LiveTrace:
    """What a live read did, for benchmarks: SSH rounds (start, end, commands), timings."""

    ssh_rounds: list[tuple[float, float, int]] = field(default_factory=list)
    ssh_connect: tuple[float, float] | None = None
    record_api: bool = False  # keep a record of every API request (ApiClient.records)
    api: ApiClient | None = None
    started: float = 0.0
    finished: float = 0.0


class _Reader:
    def __init__(
        self, api: ApiReader, shell_factory: ShellFactory | None, trace: LiveTrace,
        notes: list[str],
    ) -> None:
        self.api = api
        self.shell_factory = shell_factory
        self.trace = trace
        self.notes = notes
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pvefix-read")

    def rounds(self, shell: Shell, commands: list[list[str]]) -> list[CommandResult]:
        start = time.perf_counter()
        results = shell.run_many(commands)
        self.trace.ssh_rounds.append((start, time.perf_counter(), len(commands)))
        return results

    def connect(self, node: str, cluster: ClusterView) -> Shell:
        """The SSH session to `node` (its hostname checked by the factory)."""
        assert self.shell_factory is not None
        start = time.perf_counter()
        shell = self.shell_factory(node, cluster)
        self.trace.ssh_connect = (start, time.perf_counter())
        return shell

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


def read_target(
    api: ApiReader,
    shell_factory: ShellFactory | None,
    vmid: int,
    *,
    node: str | None,
    access: AccessFacts,
    trace: LiveTrace | None = None,
    guest_read: Callable[[str], GuestFacts] | None = None,
) -> HostState:
    """Read VM `vmid` and its node through `api` and (if given) a shell; see the module doc.

    `guest_read(node)` reads the guest's facts; it runs alongside wave 1."""
    trace = trace or LiveTrace()
    trace.started = time.perf_counter()
    notes: list[str] = []
    reader = _Reader(api, shell_factory, trace, notes)
    shell: Shell | None = None
    ssh_future: Future[tuple[Shell, list[CommandResult]]] | None = None
    try:
        # Wave 0: where the VM lives and what the cluster is, whatever node the connection
        # names; a named node's wave 1 goes out at the same time (used when it is right).
        resources = reader.submit(api.get, RESOURCES, RESOURCES_PARAMS)
        status = reader.submit(api.get, *CLUSTER_STATUS.at())
        guessed = _wave_one(reader, api, node, vmid) if node is not None else None
        known_node = reader.find_node(vmid, resources)
        cluster = reader.cluster_view(status)
        notes.extend(_elsewhere(vmid, known_node, node))
        round_a = [*host_commands(), ["cat", vm_config(known_node, vmid)]]

        def ssh_first() -> tuple[Shell, list[CommandResult]]:
            opened = reader.connect(known_node, cluster)
            return opened, reader.rounds(opened, round_a)

        ssh_future = reader.submit(ssh_first) if shell_factory is not None else None
        guest_future = reader.submit(guest_read, known_node) if guest_read else None
        wave = guessed if guessed is not None and node == known_node else _wave_one(
            reader, api, known_node, vmid)
        answers = {name: future.result() for name, future in wave.items()}
        results: dict[tuple[str, ...], CommandResult] = {}
        if ssh_future is not None:
            shell, first = ssh_future.result()
            results.update({r.argv: r for r in first})
        state = _assemble(reader, shell, vmid, known_node, answers, results, access, notes)
        if guest_future is not None:
            state = state.model_copy(update={"guest": guest_future.result()})
        return state
    finally:
        reader.pool.shutdown(wait=True)
        if shell is None and ssh_future is not None and ssh_future.exception() is None:
            shell = ssh_future.result()[0]  # the API failed first: still close the session
        if shell is not None:
            shell.close()
        trace.finished = time.perf_counter()


def _elsewhere(vmid: int, known_node: str, named: str | None) -> list[str]:
    """The note for a VM that does not live on the node the connection names."""
    if named is None or named == known_node:
        return []
    return [f"VM {vmid} lives on node {known_node}, not on {named} (named by the connection):"
            f" every read and write goes to {known_node}"]


def host_commands() -> list[list[str]]:
    """SSH round A's commands about the node itself (the VM configs are added to them): the
    registry's first round for a plan (pvefix.facts.node)."""
    return [list(argv) for argv in round_zero("plan")]


def read_targets(
    api: ApiReader,
    shell_factory: ShellFactory | None,
    vmids: Sequence[int],
    *,
    node: str | None,
    access: AccessFacts,
    trace: LiveTrace | None = None,
) -> list[HostState]:
    """Read several VMs and their nodes at once (`pvefix plan A B C`, `pvefix desired A B`).

    Wave 0 goes out once; then every node the VMs live on is read in parallel, each as
    `read_target` reads one VM's node, with what the VMs share read once: one SSH session per
    node whose round A holds the node's files and every one of its VMs' configs, the node's
    API reads (status, hardware/pci, mappings) once, each VM's own three (config, pending,
    status) in the same wave, and round B (the physical paths of the node's PCI functions)
    once. Round C (sysfs of a VM's functions) follows per VM on the same session."""
    trace = trace or LiveTrace()
    trace.started = time.perf_counter()
    cluster_notes: list[str] = []
    reader = _Reader(api, shell_factory, trace, cluster_notes)
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
            futures = [nodes.submit(_read_node_vms, reader, node, vms, cluster, access)
                       for node, vms in by_node.items()]
            for future in futures:
                states.update(future.result())
        return [
            _with_notes(states[vmid], [*cluster_notes, *_elsewhere(vmid, where[vmid], node)])
            for vmid in vmids
        ]
    finally:
        reader.pool.shutdown(wait=True)
        trace.finished = time.perf_counter()


def _read_node_vms(
    reader: _Reader, node: str, vmids: list[int], cluster: ClusterView, access: AccessFacts
) -> dict[int, HostState]:
    """One node's share of `read_targets`: its VMs' states, one SSH session for all of them."""
    shell: Shell | None = None
    ssh_future: Future[tuple[Shell, list[CommandResult]]] | None = None
    round_a = [*host_commands(), *(["cat", vm_config(node, vmid)] for vmid in vmids)]

    def ssh_first() -> tuple[Shell, list[CommandResult]]:
        opened = reader.connect(node, cluster)
        return opened, reader.rounds(opened, round_a)

    try:
        if reader.shell_factory is not None:
            ssh_future = reader.submit(ssh_first)
        shared = _node_wave(reader, reader.api, node)
        own = {vmid: _vm_wave(reader, reader.api, node, vmid) for vmid in vmids}
        node_answers = {name: future.result() for name, future in shared.items()}
        results: dict[tuple[str, ...], CommandResult] = {}
        if ssh_future is not None:
            shell, first = ssh_future.result()
            results.update({r.argv: r for r in first})
        states: dict[int, HostState] = {}
        for vmid in vmids:
            answers = {**node_answers, **{k: f.result() for k, f in own[vmid].items()}}
            states[vmid] = _assemble(reader, shell, vmid, node, answers, results, access, [])
        return states
    finally:
        if shell is None and ssh_future is not None and ssh_future.exception() is None:
            shell = ssh_future.result()[0]
        if shell is not None:
            shell.close()


def _wave_one(reader: _Reader, api: ApiReader, node: str, vmid: int) -> dict[str, Future[Any]]:
    """The VM's and its node's API reads, all at once (errors stay in the futures)."""
    return {**_vm_wave(reader, api, node, vmid), **_node_wave(reader, api, node)}


def _vm_wave(reader: _Reader, api: ApiReader, node: str, vmid: int) -> dict[str, Future[Any]]:
    """The VM's own API reads."""
    return {
        "config": reader.submit(api.get, *VM_CURRENT.at(node, vmid)),
        "pending": reader.submit(api.get, *VM_PENDING.at(node, vmid)),
        "status": reader.submit(api.get, *VM_STATUS.at(node, vmid)),
    }


def _node_wave(reader: _Reader, api: ApiReader, node: str) -> dict[str, Future[Any]]:
    """The node's API reads (and the cluster's mappings), shared by its VMs."""
    return {
        "node": reader.submit(api.get, *NODE_STATUS.at(node)),
        "pci": reader.submit(api.get, *NODE_PCI.at(node)),
        "mapping": reader.submit(api.get, *MAPPINGS.at()),
    }


def _assemble(
    reader: _Reader,
    shell: Shell | None,
    vmid: int,
    node: str,
    answers: dict[str, Any],
    results: dict[tuple[str, ...], CommandResult],
    access: AccessFacts,
    notes: list[str],
) -> HostState:
    pci_items: list[dict[str, Any]] = list(answers["pci"] or [])
    api_mappings = rf.mappings_from_api(answers["mapping"] or [])
    addresses = [str(item["id"]) for item in pci_items if "id" in item]

    conf_path = vm_config(node, vmid)
    dropins = dropin_paths(results.get(GRUB_D_LIST))
    known = known_from(nf.facts_for("plan"), lambda f: results.get(f.argv()))
    paths = _round_b(reader, shell, conf_path, addresses, dropins, known, results)
    cfg, vm_facts = _vm_facts(vmid, node, answers, results.get(("cat", conf_path)), notes)

    mappings = api_mappings
    if shell is not None:
        mapping_text = nf.MAPPING.parse(results.get(nf.MAPPING.argv()))
        if mapping_text is not None:
            mappings = list(PciMappingFile.parse(mapping_text, MAPPING_FILE).mappings.values())
        elif api_mappings:
            notes.append(f"{MAPPING_FILE} not readable over SSH; mappings from the API")

    vm_devices = vm_device_addresses(cfg, node, mappings, addresses)
    devices = _pci_devices(reader, shell, pci_items, paths, vm_devices, notes)

    files: dict[str, FileFact] = {}
    for path in (KERNEL_CMDLINE, GRUB_DEFAULT, PROC_CMDLINE, CPU_MODELS, *dropins):
        files[path] = file_fact(path, results.get(("cat", path)))
    acs = nf.ACS.parse(results.get(nf.ACS.argv()))
    if acs is None and shell is not None:
        notes.append("ACS settings unknown: `lspci -D -vv` failed on the node")
    if shell is None:
        notes.append(
            "no SSH: host kernel cmdline files, boot loader, sysfs (root ports, BAR sizes) "
            "and ACS are unknown; pass SSH settings to read them"
        )
    node_facts = _node_facts(node, answers, results, known)
    return HostState(
        node=node_facts,
        boot_tool=nf.BOOT_TOOL.parse(results.get(nf.BOOT_TOOL.argv())),
        files=files,
        pci_devices=devices,
        acs=acs or {},
        mappings=mappings,
        vm=vm_facts,
        access=access,
        notes=notes,
    )


def _round_b(
    reader: _Reader, shell: Shell | None, conf_path: str, addresses: list[str],
    dropins: list[str], known: dict[str, str], results: dict[tuple[str, ...], CommandResult],
) -> dict[str, list[str]]:
    """SSH round B, its results added to `results`: the VM's raw config (if round A could not
    name its path), the GRUB drop-ins round A listed, the registry's later facts, and the
    physical path of every PCI function (readlink -m, which needs hardware/pci's list).
    Returns each function's parent path (root port, bridges)."""
    if shell is None:
        return {}
    dev_paths = [f"{SYSFS_PCI}/{a}" for a in addresses]
    readlink_cmds = chunks(READLINK, dev_paths)
    round_b = [] if ("cat", conf_path) in results else [["cat", conf_path]]
    round_b += [["cat", d] for d in dropins]
    round_b += [list(f.argv(known)) for batch in nf.later_rounds("plan") for f in batch
                if all(n in known for n in f.needs)]
    # Another VM of the same node may have asked already (read_targets): asked once.
    to_run = [c for c in [*round_b, *readlink_cmds] if tuple(c) not in results]
    if to_run:
        for result in reader.rounds(shell, to_run):
            results[result.argv] = result
    links: dict[str, str] = {}
    for command in readlink_cmds:
        links.update(readlink_lines(results[tuple(command)], command[2:]))
    return {a: rf.parent_path(links[p]) for a, p in zip(addresses, dev_paths, strict=True)
            if p in links}


def _node_facts(node: str, answers: dict[str, Any],
                results: dict[tuple[str, ...], CommandResult], known: dict[str, str]
                ) -> NodeFacts:
    """The node's facts: its API status, and the registry's facts from the SSH rounds."""
    uname = nf.KERNEL_VERSION.parse(results.get(nf.KERNEL_VERSION.argv()))
    running_qemu = (answers["status"] or {}).get("running-qemu")
    packages = nf.PACKAGES.parse(results.get(nf.PACKAGES.argv()))
    installed_qemu = re.sub(r"-[0-9][0-9a-z.~+]*$", "", packages.get("pve-qemu-kvm", "")) or None
    return rf.node_facts(
        node, answers["node"] or {}, uname, str(running_qemu) if running_qemu else installed_qemu,
    ).model_copy(update={
        "cpu_phys_bits": nf.CPU_PHYS_BITS.parse(results.get(nf.CPU_PHYS_BITS.argv())),
        "edk2_version": packages.get("pve-edk2-firmware-ovmf") or packages.get(
            "pve-edk2-firmware"),
        **node_fields(nf.facts_for("plan"), lambda f, k: results.get(f.argv(k)), known),
    })


def _vm_facts(
    vmid: int,
    node: str,
    answers: dict[str, Any],
    raw: CommandResult | None,
    notes: list[str],
) -> tuple[VMConfig, VmFacts]:
    config: dict[str, Any] = answers["config"] or {}
    api_digest = str(config.get("digest", ""))
    rows: list[dict[str, Any]] = list(answers["pending"] or [])
    status: dict[str, Any] = answers["status"] or {}
    conf_path = vm_config(node, vmid)
    text: str | None = None
    if raw is not None:
        text = file_fact(conf_path, raw).text
        if text is None:
            raise PvefixError("VM config not found on the node over SSH", source=conf_path)
    if text is not None:
        cfg = VMConfig.parse(text, conf_path)
        source = "file"
        digest = cfg.digest
        pending = pending_items(cfg, digest)
        if api_digest and digest != api_digest:
            notes.append(
                f"the VM config changed between reads (file digest {digest}, API digest "
                f"{api_digest}); re-run the plan"
            )
    else:
        cfg = rf.rebuild_config(config, rows)
        text = cfg.render()
        source = "api"
        digest = api_digest
        pending = pending_from_api(rows)
        if cfg.digest == api_digest:
            notes.append("VM config rebuilt from the API; it matches the API digest exactly")
        else:
            notes.append(
                "VM config rebuilt from the API; it differs from the stored file (its digest "
                f"{cfg.digest} is not the API's {api_digest}: comments, order or snapshots); "
                "the API digest is used for writes"
            )
    run = str(status.get("status", "stopped"))
    return cfg, VmFacts(
        vmid=vmid,
        node=node,
        config_text=text,
        config_source=source,
        digest=digest,
        pending=pending,
        status="running" if run == "running" else "stopped",
        running_machine=status.get("running-machine") if run == "running" else None,
        lock=status.get("lock") or None,
        ha_state=ha_state(status),
    )


def ha_state(status: dict[str, Any]) -> str | None:
    """status/current's `ha` (PVE::HA::Config::get_service_status): its state when managed."""
    ha = status.get("ha")
    if not isinstance(ha, dict) or not ha.get("managed"):
        return None
    return str(ha.get("state") or "started")


def _pci_devices(
    reader: _Reader,
    shell: Shell | None,
    pci_items: list[dict[str, Any]],
    paths: dict[str, list[str]],
    vm_devices: list[str],
    notes: list[str],
) -> list[PciDevice]:
    """API facts for every function; full sysfs facts (round C) for the VM's functions and
    the bridges above them."""
    api_devices = {
        dev.address: dev
        for dev in (rf.api_device(item, paths.get(str(item.get("id")), [])) for item in pci_items)
        if dev is not None
    }
    missing = [a for a in vm_devices if a not in api_devices]
    if missing:
        notes.append("passed-through devices not on the node: " + ", ".join(missing))
    if shell is None:
        return sorted(api_devices.values(), key=lambda d: d.address)
    wanted = [a for a in vm_devices if a in api_devices]
    wanted += [b for b in bridges_above(api_devices[a] for a in wanted) if b in api_devices]
    wanted = sorted(set(wanted))
    if not wanted:
        return sorted(api_devices.values(), key=lambda d: d.address)
    file_paths = [f"{SYSFS_PCI}/{a}/{name}" for a in wanted for name in SYSFS_FILES]
    link_paths = [f"{SYSFS_PCI}/{a}/{name}" for a in wanted for name in SYSFS_LINKS]
    grep_cmds = chunks(GREP_FILES, file_paths)
    link_cmds = chunks(READLINK, link_paths)
    results = reader.rounds(shell, [*grep_cmds, *link_cmds])
    texts: dict[str, str] = {}
    targets: dict[str, str] = {}
    for command, result in zip(grep_cmds, results[: len(grep_cmds)], strict=True):
        texts.update(grep_files(result, command[3:]))
    for command, result in zip(link_cmds, results[len(grep_cmds) :], strict=True):
        targets.update(readlink_lines(result, command[2:]))
    for address in wanted:
        prefix = f"{SYSFS_PCI}/{address}/"
        device = rf.sysfs_device(
            address,
            {name: texts[prefix + name] for name in SYSFS_FILES if prefix + name in texts},
            {name: targets.get(prefix + name, "") for name in SYSFS_LINKS},
            paths.get(address, []),
        )
        if device is not None:
            api_devices[address] = device
    return sorted(api_devices.values(), key=lambda d: d.address)


def read_live(connection: Connection, vmid: int, *, trace: LiveTrace | None = None,
              guest: GuestAccess | None = None, sessions: Sessions | None = None) -> HostState:
    """Read VM `vmid` and its node live: the API (token or root@pam ticket) plus one SSH
    session, or the local backend on the node itself. See the module docstring for the waves.
    With `guest`, the guest's cmdline, GRUB defaults and BAR errors are read too. With
    `sessions` (a command that reads more than once, like apply), its sessions are used and
    left open; otherwise the read opens its own and closes them.
    """
    trace = trace or LiveTrace()
    guest_read = None
    guest_notes: list[str] = []  # filled by the guest read (its own thread)
    if guest is not None:
        from pvefix.sources.guest_read import guest_reader

        guest_read = guest_reader(connection, guest, vmid, guest_notes, sessions)
    api, shell_factory, access = _open(connection, lambda node: vmid, trace, guest, sessions)
    try:
        state = read_target(
            api, shell_factory, vmid, node=connection.node, access=access, trace=trace,
            guest_read=guest_read,
        )
    except ApiError as exc:
        raise _not_on_node(connection, vmid, exc) from None
    finally:
        if sessions is None:
            api.close()
    return _with_notes(state, guest_notes)


def read_live_many(connection: Connection, vmids: Sequence[int], *,
                   trace: LiveTrace | None = None) -> list[HostState]:
    """Read several VMs and their nodes live, sessions opened once (see `read_targets`)."""
    trace = trace or LiveTrace()
    # A refused hostname names the node (several VMs may live on it), not a VM.
    api, shell_factory, access = _open(connection, lambda node: None, trace, None, None)
    try:
        return read_targets(api, shell_factory, vmids, node=connection.node, access=access,
                            trace=trace)
    finally:
        api.close()


def _open(
    connection: Connection, vmid_on: Callable[[str], int | None], trace: LiveTrace,
    guest: GuestAccess | None, sessions: Sessions | None,
) -> tuple[ApiReader, ShellFactory | None, AccessFacts]:
    """The API session, the way to open a node's SSH session, and what access they give
    (borrowed from `sessions` when given: the reader's close leaves them open)."""
    method = guest.method if guest else None
    access = AccessFacts(**reader_access(connection), guest=method)
    shell_factory: ShellFactory | None = node_shells(connection, vmid_on, sessions)
    if sessions is not None:
        return sessions.api(), shell_factory, access
    client = open_api(connection, record=trace.record_api)
    if isinstance(client, ApiClient):  # the API backend
        trace.api = client
    return client, shell_factory, access


def _not_on_node(connection: Connection, vmid: int, exc: ApiError) -> Exception:
    if (not connection.on_this_host and connection.node and exc.status == 500
            and "does not exist" in exc.message):
        return PvefixError(
            f"no VM {vmid} on node {connection.node}; nodes looked at: {connection.node} "
            "(the node set by --node, PVEFIX_NODE, the profile or the ready file; leave "
            "it out to search the whole cluster)")
    return exc


def _with_notes(state: HostState, notes: list[str]) -> HostState:
    return state.model_copy(update={"notes": [*state.notes, *notes]}) if notes else state


def same_mappings(a: list[PciMapping], b: list[PciMapping]) -> bool:
    """Mappings equal in what matters (ids and map entries), whatever their source."""

    def key(ms: list[PciMapping]) -> list[tuple[str, list[tuple[object, ...]]]]:
        return sorted(
            (m.id, [(e.node, e.id, e.path, e.iommugroup, e.subsystem_id) for e in m.maps])
            for m in ms
        )

    return key(a) == key(b)
