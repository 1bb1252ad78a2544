"""Start and stop the simulated node: HTTPS API + SSH, the ready file, clean shutdown.

- `Simulator(...).start()` runs both servers in threads of this process and returns ReadyInfo;
- `running_simulator(...)` is the same as a context manager (tests, benchmarks);
- `serve_until_signal(...)` is what `pvefix sim serve` runs: stops on SIGTERM/SIGINT, exit 0;
- `spawn_simulator(...)` starts `pvefix sim serve` as a subprocess and waits for its ready file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pvefix.errors import PvefixError
from pvefix.hosttree.nodes import node_tree
from pvefix.hosttree.tree import HostTree
from pvefix.sim.api import Api
from pvefix.sim.auth import Authenticator
from pvefix.sim.boot import BootLoader
from pvefix.sim.faults import Faults, FaultSettings, parse_inject
from pvefix.sim.guest import stop_guests
from pvefix.sim.http import SimHTTPServer, make_server
from pvefix.sim.perms import (
    PRIVSEP_TOKEN_ACL,
    PRIVSEP_TOKEN_ID,
    AccessControl,
)
from pvefix.sim.ssh import SshServer
from pvefix.sim.state import STATUS_LAG_S, NodeState, env_task_seconds
from pvefix.sim.tls import TOKEN_ID, load_or_create_keys, write_private

HOST = "127.0.0.1"
USER_CFG = "/etc/pve/user.cfg"


class ReadyInfo(BaseModel):
    """How to reach a running simulator (the ready file's content). Holds secrets: 0600."""

    model_config = ConfigDict(frozen=True)

    api_url: str
    node: str
    user: str
    password: str
    token_id: str
    token_secret: str
    ca_cert: str
    ssh_host: str
    ssh_port: int
    ssh_user: str
    ssh_key: str
    known_hosts: str
    root: str
    pid: int
    ssh_nodes: dict[str, str] = {}  # every node's SSH endpoint (host:port), this one included
    privsep_token_id: str | None = None  # PVEVMAdmin on /vms, PVEMappingUser on /mapping/pci
    privsep_token_secret: str | None = None

    @property
    def api_port(self) -> int:
        return int(self.api_url.rsplit(":", 1)[1])

    def __repr__(self) -> str:  # never show secrets in test failures or logs
        return f"ReadyInfo(api_url={self.api_url!r}, node={self.node!r}, root={self.root!r})"

    __str__ = __repr__


class Simulator:
    """One simulated node serving a host tree (materialized from `scenario` into `root`)."""

    def __init__(
        self,
        scenario: str | Path,
        root: str | Path,
        *,
        port: int = 0,
        ssh_port: int = 0,
        latency_ms: int = 0,
        inject: Sequence[str] = (),
        task_seconds: float | None = None,
        status_lag: float = STATUS_LAG_S,
        auth_fail_delay: float = 0.0,
    ) -> None:
        from pvefix.hosttree import materialize_scenario

        self.root = Path(root).resolve()
        self.tree = materialize_scenario(scenario, self.root)
        for home in ("root", "tmp"):  # a real host has them; SFTP clients stage files there
            (self.root / home).mkdir(exist_ok=True)
        meta = self.tree.meta
        token_ids = [t.id for t in meta.tokens] or [TOKEN_ID]
        for needed in (TOKEN_ID, PRIVSEP_TOKEN_ID):
            if needed not in token_ids:
                token_ids.append(needed)
        self.keys = load_or_create_keys(self.root, meta.node, token_ids)
        settings = {"latency_ms": latency_ms, **parse_inject(list(inject))}
        self.faults = Faults(FaultSettings.model_validate(settings))
        seconds = env_task_seconds() if task_seconds is None else task_seconds
        self.state = NodeState(self.tree, self.keys, self.faults, seconds, status_lag)
        # Every node of the cluster: its own host files, facts, boot loader, tasks and SSH
        # endpoint; configs, run states and the config lock are the cluster's.
        self.nodes: dict[str, NodeState] = {meta.node: self.state}
        for name in meta.cluster_nodes:
            if name != meta.node:
                other = NodeState(node_tree(self.tree, name), self.keys, self.faults, seconds,
                                  status_lag)
                other.lock = self.state.lock
                other.boot = BootLoader(self.keys.dir / f"boot-{name}.json")
                self.nodes[name] = other
        access = access_control(self.tree)
        for state in self.nodes.values():
            state.access = access
        self.auth = Authenticator(self.keys.ticket_key, self.keys.password,
                                  self.keys.token_secrets, auth_fail_delay)
        self.auth.access = access
        self._port, self._ssh_port = port, ssh_port
        self.http: SimHTTPServer | None = None
        self.ssh: SshServer | None = None
        self.node_ssh: dict[str, SshServer] = {}
        self._http_thread: threading.Thread | None = None
        self.info: ReadyInfo | None = None

    def start(self) -> ReadyInfo:
        """Bind both servers, start serving, and say how to reach them."""
        from pvefix.sim.stats import share_stats

        self.state.apply_injected_locks()
        share_stats(self.nodes.values())  # /_sim/stats counts the whole cluster's work
        api = Api(self.state, self.auth, self.nodes)
        self.http = make_server(api, HOST, self._port, str(self.keys.server_cert),
                                str(self.keys.server_key))
        self.ssh = SshServer(self.state, self.keys, HOST, self._ssh_port)
        self.node_ssh = {self.state.node: self.ssh}
        for name, state in self.nodes.items():
            if name != self.state.node:
                self.node_ssh[name] = SshServer(state, self.keys, HOST, 0)
        self._http_thread = threading.Thread(
            target=self.http.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
            name="sim-https",
        )
        self._http_thread.start()
        for server in self.node_ssh.values():
            server.start()
        self.keys.write_known_hosts(HOST, [s.port for s in self.node_ssh.values()])
        api_port = self.http.server_address[1]
        self.info = ReadyInfo(
            api_url=f"https://{HOST}:{api_port}",
            node=self.tree.meta.node,
            user="root@pam",
            password=self.keys.password,
            token_id=TOKEN_ID,
            token_secret=self.keys.token_secrets[TOKEN_ID],
            ca_cert=str(self.keys.ca_cert),
            ssh_host=HOST,
            ssh_port=self.ssh.port,
            ssh_user="root",
            ssh_key=str(self.keys.root_key),
            known_hosts=str(self.keys.known_hosts),
            root=str(self.root),
            pid=os.getpid(),
            ssh_nodes={name: f"{HOST}:{server.port}" for name, server in self.node_ssh.items()},
            privsep_token_id=PRIVSEP_TOKEN_ID,
            privsep_token_secret=self.keys.token_secrets[PRIVSEP_TOKEN_ID],
        )
        return self.info

    def stop(self) -> None:
        """Stop serving and close every socket (listening and connected)."""
        for state in self.nodes.values():
            state.stop()
        stop_guests(self.state)
        if self.http is not None:
            self.http.shutdown()
            self.http.server_close()
            self.http.close_connections()
        for server in self.node_ssh.values() or ([self.ssh] if self.ssh else []):
            server.stop()
        if self._http_thread is not None:
            self._http_thread.join(timeout=5)


def access_control(tree: HostTree) -> AccessControl:
    """The tree's tokens with privilege separation, its user.cfg ACLs, and the simulator's own
    privilege-separated token with PVEVMAdmin on /vms and PVEMappingUser on /mapping/pci."""
    privsep = {t.id for t in tree.meta.tokens if t.privsep} | {PRIVSEP_TOKEN_ID}
    return AccessControl(list(PRIVSEP_TOKEN_ACL), privsep, tree.host_path(USER_CFG))


@contextlib.contextmanager
def running_simulator(
    scenario: str | Path,
    root: str | Path,
    latency_ms: int = 0,
    *,
    port: int = 0,
    ssh_port: int = 0,
    inject: Sequence[str] = (),
    task_seconds: float | None = None,
) -> Iterator[ReadyInfo]:
    """Run a simulator in this process for the duration of a `with` block."""
    sim = Simulator(scenario, root, port=port, ssh_port=ssh_port, latency_ms=latency_ms,
                    inject=inject, task_seconds=task_seconds)
    info = sim.start()
    try:
        yield info
    finally:
        sim.stop()


def write_ready_file(info: ReadyInfo, path: str | Path) -> None:
    """Write the ready file (JSON, 0600) atomically: readers never see half of it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_private(target, (json.dumps(info.model_dump(), indent=2) + "\n").encode())


def read_ready_file(path: str | Path) -> ReadyInfo:
    return ReadyInfo.model_validate_json(Path(path).read_text())


def serve_until_signal(sim: Simulator, ready_file: str | Path | None,
                       announce: bool = True) -> int:
    """Start, write the ready file, serve until SIGTERM or SIGINT, stop cleanly; exit 0."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        info = sim.start()
        if ready_file is not None:
            write_ready_file(info, ready_file)
        if announce:
            print(f"pvefix sim: node {info.node} serving {info.api_url} and "
                  f"ssh://{info.ssh_user}@{info.ssh_host}:{info.ssh_port}", flush=True)
            for name, where in info.ssh_nodes.items():
                if name != info.node:
                    print(f"pvefix sim: node {name}: ssh://{info.ssh_user}@{where}", flush=True)
            if ready_file is not None:
                print(f"pvefix sim: connection details in {ready_file}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        sim.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def spawn_simulator(
    scenario: str | Path,
    root: str | Path,
    ready_file: str | Path,
    extra_args: Sequence[str] = (),
    timeout_s: float = 60.0,
) -> tuple[subprocess.Popen[bytes], ReadyInfo]:
    """Start `pvefix sim serve` in a subprocess and wait until its ready file appears."""
    ready = Path(ready_file)
    ready.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pvefix", "sim", "serve", "--scenario", str(scenario),
           "--root", str(root), "--ready-file", str(ready), *extra_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready.exists():
            return proc, read_ready_file(ready)
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise PvefixError(f"simulator exited with {proc.returncode}: {err.strip()}")
        time.sleep(0.05)
    proc.terminate()
    raise PvefixError(f"simulator did not become ready within {timeout_s:.0f}s")
