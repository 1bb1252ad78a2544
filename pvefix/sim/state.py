"""The simulated node's state over a host tree: configs, digests, run states, tasks, reboot.

One re-entrant lock guards every change, as pmxcfs's config lock does on a real node: API
handlers, SSH commands and SFTP writes all go through this object. Reads of unchanged configs are
served from a cache keyed by the file's stat, so a tight GET loop does not re-parse the file.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pvefix.digest import sha1_text
from pvefix.errors import PvefixError
from pvefix.facts.model import Fact
from pvefix.facts.node import NODE_FACTS
from pvefix.hosttree.meta import HostMeta, VmState
from pvefix.hosttree.tree import HostTree, atomic_write
from pvefix.sim.boot import BootLoader
from pvefix.sim.errors import ApiError, die
from pvefix.sim.faults import Faults
from pvefix.sim.perms import AccessControl
from pvefix.sim.tasks import TaskRegistry
from pvefix.sim.tls import SimKeys
from pvefix.sim.vmview import set_description
from pvefix.vmconfig.config import VMConfig

if TYPE_CHECKING:
    from pvefix.sim.commands import Result

STATUS_LAG_S = 10.0  # pvestatd's update interval


@dataclass(frozen=True)
class LoadedConfig:
    """One VM config as read: the parsed model (a private copy), its text and digest."""

    vmid: int
    node: str
    path: Path
    text: str
    digest: str

    def parse(self) -> VMConfig:
        return VMConfig.parse(self.text, str(self.path))




class NodeState:
    """Everything one simulated node knows and does, safe to use from many threads."""

    def __init__(
        self, tree: HostTree, keys: SimKeys, faults: Faults, task_seconds: float = 0.2,
        status_lag: float = STATUS_LAG_S,
    ) -> None:
        self.tree = tree
        self.keys = keys
        self.faults = faults
        self.lock = threading.RLock()
        self.node = tree.meta.node
        # What `hostname` answers over SSH (None: the node's name); a test sets another name
        # for a host that comes back from a reboot under it (`answered_meta`).
        self.hostname: str | None = None
        # The node facts its shell answers from the tree by their declarations (a test hands
        # in a registry of its own: a new fact is answered without a line of the simulator).
        self.facts: Sequence[Fact[Any]] = NODE_FACTS
        self.tasks = TaskRegistry(self.node, task_seconds)
        self.boot = BootLoader(keys.dir / "boot.json")
        self.started = time.monotonic()
        self.down_until = 0.0
        self._boot_timer: threading.Timer | None = None
        self._paths: dict[int, tuple[str, Path]] = {}
        self._cache: dict[int, tuple[tuple[int, int, int], LoadedConfig]] = {}
        self._started_at: dict[int, float] = {}
        self._view_cache: dict[tuple[int, str, str], dict[str, object]] = {}
        # The last `tar` stream of each operand list, with the stamps of the files it holds
        # (pvefix.sim.commands_archive): a cluster's 10,000 configs are read again only when
        # one of them changed.
        self.archives: dict[Hashable, tuple[Hashable, Result]] = {}
        self.status_lag = status_lag
        self.access = AccessControl()  # the Simulator sets the cluster's
        self._status_log: dict[int, list[tuple[float, str]]] = {}  # vmid -> (when, status)

    def answered_meta(self) -> HostMeta:
        """The tree's metadata as the node's commands answer it (under `hostname`, if set)."""
        meta = self.tree.meta
        return meta if self.hostname is None else meta.model_copy(update={"node": self.hostname})

    # -- availability -----------------------------------------------------------------------

    def is_down(self) -> bool:
        """True while the node reboots (servers drop connections)."""
        return time.monotonic() < self.down_until

    # -- VMs and configs --------------------------------------------------------------------

    def vms(self) -> dict[int, str]:
        """vmid -> node for every VM of the cluster (cached; refreshed on a miss)."""
        if not self._paths:
            self._rescan()
        return {vmid: node for vmid, (node, _) in sorted(self._paths.items())}

    def _rescan(self) -> None:
        found: dict[int, tuple[str, Path]] = {}
        for vmid, node in self.tree.vms().items():
            found[vmid] = (node, self.tree.vm_config_path(vmid))
        self._paths = found

    def locate(self, vmid: int, node: str | None = None) -> tuple[str, Path]:
        """Where a VM lives; Proxmox's error when it is not on `node`."""
        where = self._paths.get(vmid)
        if where is None:
            self._rescan()
            where = self._paths.get(vmid)
        if where is None or (node is not None and where[0] != node):
            shown = node or self.node
            raise die(f"Configuration file 'nodes/{shown}/qemu-server/{vmid}.conf' does not exist")
        return where

    def load(self, vmid: int, node: str | None = None) -> LoadedConfig:
        """The VM's config as it is on disk now (cached while the file is unchanged)."""
        vm_node, path = self.locate(vmid, node)
        try:
            st = path.stat()
        except FileNotFoundError:
            self._paths.pop(vmid, None)
            vm_node, path = self.locate(vmid, node)
            st = path.stat()
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cache.get(vmid)
        if cached is not None and cached[0] == key and cached[1].path == path:
            return cached[1]
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        loaded = LoadedConfig(vmid, vm_node, path, text, sha1_text(text))
        self._cache[vmid] = (key, loaded)
        return loaded

    def cached_view(
        self, loaded: LoadedConfig, kind: str, build: Callable[[], dict[str, object]]
    ) -> dict[str, object]:
        """Memoise a derived view (e.g. the GET config dict) per config digest."""
        key = (loaded.vmid, loaded.digest, kind)
        view = self._view_cache.get(key)
        if view is None:
            if len(self._view_cache) > 65536:  # a 10,000-VM cluster, a few views each
                self._view_cache.clear()
            view = self._view_cache[key] = build()
        return view

    def store(self, loaded: LoadedConfig, cfg: VMConfig) -> LoadedConfig:
        """Write a config as Proxmox's writer would (atomically); returns the new state."""
        text = cfg.render_proxmox()
        if text != loaded.text:
            atomic_write(loaded.path, text.encode("utf-8", "surrogateescape"), 0o640)
        return self.load(loaded.vmid)

    def other_user_edit(self, vmid: int) -> None:
        """Injected: another admin edits the description, moving the digest."""
        with self.lock:
            loaded = self.load(vmid)
            cfg = loaded.parse()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            text = (cfg.description + "\n" if cfg.description else "") + (
                f"edited by another user at {stamp} (pvefix simulator)"
            )
            set_description(cfg.main, text)
            self.store(loaded, cfg)

    def apply_injected_locks(self) -> None:
        """Write armed `lock=VMID:NAME` faults into the configs (as a backup job would)."""
        locks = self.faults.take_locks()
        if not locks:
            return
        with self.lock:
            for vmid, name in locks.items():
                loaded = self.load(vmid)
                cfg = loaded.parse()
                cfg.main.set("lock", name)
                self.store(loaded, cfg)

    # -- run states -------------------------------------------------------------------------

    def run_state(self, vmid: int) -> VmState:
        return self.tree.meta.vm_state(vmid)

    def lagged_status(self, vmid: int, now: float | None = None) -> str:
        """A VM's status as pvestatd last sampled it (what /cluster/resources shows): it
        samples every `status_lag` seconds from the node's start, `unknown` before the first
        sample; a lag of 0 is live."""
        live: str = self.run_state(vmid).status
        if self.status_lag <= 0:
            return live
        ticks = int(((time.monotonic() if now is None else now) - self.started)
                    // self.status_lag)
        if ticks < 1:
            return "unknown"
        sampled = self.started + ticks * self.status_lag
        status = live
        for when, seen in reversed(self._status_log.get(vmid, [])):
            status = seen
            if when <= sampled:
                break
        return status

    def _log_status(self, vmid: int, status: str) -> None:
        """Remember a run-state change (the status before it, first, from the node's start)."""
        log = self._status_log.setdefault(vmid, [])
        if not log:
            log.append((self.started, self.run_state(vmid).status))
        log.append((time.monotonic(), status))
        del log[:-16]

    def uptime(self, vmid: int) -> int:
        state = self.run_state(vmid)
        if state.status != "running":
            return 0
        since = self._started_at.get(vmid)
        if since is None:
            return state.uptime + int(time.monotonic() - self.started)
        return int(time.monotonic() - since)

    def set_running(self, vmid: int, machine: str) -> None:
        self._log_status(vmid, "running")
        self.tree.meta.vms[str(vmid)] = VmState(
            status="running", running_machine=machine, qmpstatus="running", uptime=0,
            ha_state=self.run_state(vmid).ha_state,
        )
        self._started_at[vmid] = time.monotonic()
        self.tree.save_meta()

    def set_ha_state(self, vmid: int, ha_state: str) -> None:
        """The HA resource's requested state (`ha-manager set vm:N --state ...`)."""
        current = self.run_state(vmid)
        self.tree.meta.vms[str(vmid)] = current.model_copy(update={"ha_state": ha_state})
        self.tree.save_meta()

    def ha_routed(self, vmid: int) -> bool:
        """PVE::HA::Config::vm_is_ha_managed: an HA resource whose state is not `ignored`
        (ignored resources behave as if HA did not manage them)."""
        ha = self.run_state(vmid).ha_state
        return ha is not None and ha != "ignored"

    def set_stopped(self, vmid: int) -> None:
        self._log_status(vmid, "stopped")
        self.tree.meta.vms[str(vmid)] = VmState(
            status="stopped", qmpstatus="stopped", ha_state=self.run_state(vmid).ha_state
        )
        self._started_at.pop(vmid, None)
        self.tree.save_meta()

    # -- host files -------------------------------------------------------------------------

    def host_file(self, host_path: str) -> Path:
        """The tree path for a host path; refuses the simulator's own directory."""
        try:
            path = self.tree.host_path(host_path)
        except PvefixError as exc:
            raise ApiError(400, exc.message) from None
        return path

    def read_host(self, host_path: str) -> str | None:
        return self.tree.read_text(host_path)

    def write_host(self, host_path: str, text: str) -> None:
        self.tree.write_text(host_path, text)

    # -- reboot -----------------------------------------------------------------------------

    def reboot(self, on_boot: Callable[[], None]) -> None:
        """Take the node down for `reboot_seconds`; `on_boot()` runs when it is back."""
        with self.lock:
            delay = float(self.tree.meta.reboot_seconds)
            self.down_until = time.monotonic() + delay
            timer = threading.Timer(delay, self._finish_boot, args=(on_boot,))
            timer.daemon = True
            self._boot_timer = timer
            timer.start()

    def _finish_boot(self, on_boot: Callable[[], None]) -> None:
        with self.lock:
            proc = self.read_host("/proc/cmdline") or ""
            self.write_host("/proc/cmdline", self.boot.next_proc_cmdline(proc.strip()) + "\n")
            self.started = time.monotonic()
            self._started_at.clear()
            self._status_log.clear()
            on_boot()
            self.down_until = 0.0

    def stop(self) -> None:
        """Cancel a reboot in flight (simulator shutdown)."""
        timer = self._boot_timer
        if timer is not None:
            timer.cancel()


def env_task_seconds(default: float = 0.2) -> float:
    """Task duration override for slow or fast machines (PVEFIX_SIM_TASK_SECONDS)."""
    raw = os.environ.get("PVEFIX_SIM_TASK_SECONDS")
    try:
        return float(raw) if raw else default
    except ValueError:
        return default
