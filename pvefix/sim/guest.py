"""The simulated guests' side of the QEMU guest agent, and `python3 FILE.pyz` for SSH.

A simulated VM has no operating system; its "guest" is a private directory on this machine
(`<root>/.pvefix-sim/guests/<vmid>/tmp`, 0700) that stands for the guest's `/tmp`. Files the
agent writes or reads must lie there. Commands run for real, so `pvefix verify` really runs
its probe (on a machine without GPUs it honestly reports none), but only these are allowed,
to keep the simulator safe to run anywhere:

- `python3 /tmp/NAME.pyz [ARGS]`: a zipapp inside the directory, run with this machine's
  interpreter in isolated mode without site-packages (`-I -S`), as on a guest that has python3
  but neither pvefix nor pydantic;
- `rm [-f] /tmp/NAME ...`: files inside the directory;
- `cat`, `dmesg`, `cp`, `mv` and `update-grub` on the guest's few system files
  (pvefix.sim.guest_tree), run in-process.

Anything else is refused with a message that says so. Processes run in their own session and
are killed after `EXEC_LIMIT_S`, or when the simulator stops.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import signal
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from pvefix.sim import guest_gpus, guest_tree
from pvefix.sim.state import NodeState
from pvefix.vmconfig.config import VMConfig

EXEC_LIMIT_S = 900.0
GUEST_TMP = "/tmp"  # noqa: S108 - the guest's /tmp, mapped to a private directory


class GuestRefused(Exception):
    """A command or path the simulated guest does not allow."""


@dataclass
class GuestProcess:
    """One command started through the agent: its output once it has exited."""

    proc: subprocess.Popen[bytes] | None  # None: an in-process command (guest_tree)
    done: threading.Event = field(default_factory=threading.Event)
    stdout: bytes = b""
    stderr: bytes = b""
    killed: bool = False
    code: int | None = None  # an in-process command's exit status

    @property
    def exit_code(self) -> int | None:
        """The exit status (negative: killed by that signal), None while running."""
        return self.code if self.proc is None else self.proc.returncode


def pyz_argv(pyz: Path, args: list[str]) -> list[str]:
    """How a `python3 FILE.pyz ARGS` runs here: this interpreter, isolated, no site-packages."""
    return [sys.executable, "-I", "-S", str(pyz), *args]


def child_env(home: Path, tmp: Path) -> dict[str, str]:
    """A small environment: PATH to find tools (the guest's own stand-ins first: its
    nvidia-smi, sim/guest_gpus.py), a private HOME and TMPDIR."""
    return {
        "PATH": f"{home / 'bin'}:" + os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
    }


def resolve_in(base: Path, guest_base: str, path: str) -> Path:
    """The real path of guest path `path`, which must lie inside `guest_base` (e.g. /tmp)."""
    norm = posixpath.normpath(path)
    if not path.startswith("/") or not norm.startswith(guest_base.rstrip("/") + "/"):
        raise GuestRefused(f"{path}: outside {guest_base} (the pvefix simulator's guests "
                           f"keep files in {guest_base} only)")
    real = (base / norm[len(guest_base) + 1:]).resolve()
    if real.parent != base.resolve():
        raise GuestRefused(f"{path}: only files directly in {guest_base} are allowed")
    return real


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class GuestSandbox:
    """One VM's guest: its private /tmp and the processes the agent started there."""

    def __init__(self, root: Path, cfg: VMConfig | None = None) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
        os.chmod(self.tmp, 0o700)
        guest_tree.seed(root, cfg or VMConfig.parse("", "empty"))
        self.lock = threading.Lock()
        self.procs: dict[int, GuestProcess] = {}
        self._next_pid = 1 << 22  # in-process commands: above any real pid_max default

    def path(self, guest_path: str, *, write: bool = True) -> Path:
        """The real file of a guest path: /tmp, or one of the guest tree's system files."""
        if posixpath.normpath(guest_path).startswith(GUEST_TMP + "/"):
            return resolve_in(self.tmp, GUEST_TMP, guest_path)
        try:
            real = guest_tree.real_path(self.root, guest_path, write=write)
        except guest_tree.GuestFault as exc:
            raise GuestRefused(str(exc)) from None
        if real.resolve().parent != real.parent.resolve():
            raise GuestRefused(f"{guest_path}: a link out of the guest's files")
        return real

    def write(self, guest_path: str, data: bytes) -> None:
        """guest-file-open mode "wb" + write + close: the file is replaced, not appended."""
        target = self.path(guest_path)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    def read(self, guest_path: str, limit: int) -> tuple[bytes, bool]:
        """Up to `limit` bytes, and whether the file was longer."""
        with open(self.path(guest_path, write=False), "rb") as handle:
            data = handle.read(limit + 1)
        return data[:limit], len(data) > limit

    def argv_for(self, command: list[str]) -> list[str]:
        """The real argv of an allowed guest command; GuestRefused for anything else."""
        if not command:
            raise GuestRefused("empty command")
        name = command[0]
        if name == "python3" and len(command) >= 2 and command[1].endswith(".pyz"):
            pyz = resolve_in(self.tmp, GUEST_TMP, command[1])  # zipapps run from /tmp only
            if not pyz.is_file():
                raise GuestRefused(f"{command[1]}: No such file")
            return pyz_argv(pyz, command[2:])
        if name == "rm":
            paths = [a for a in command[1:] if a not in ("-f", "--")]
            if not paths:
                raise GuestRefused("rm: missing operand")
            return ["rm", *[a if a in ("-f", "--") else str(self.path(a)) for a in command[1:]]]
        raise GuestRefused(f"the pvefix simulator's guest runs only `python3 {GUEST_TMP}/NAME.pyz`"
                           f", `rm`, `cat`, `dmesg`, `cp`, `mv` and `update-grub` on its own "
                           f"files (refused: {name})")

    def start(self, command: list[str]) -> int:
        """Start an allowed command; its pid (the agent's handle for exec-status)."""
        if command and command[0] in IN_PROCESS:
            return self._run_in_process(command)
        argv = self.argv_for(command)
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=self.tmp, env=child_env(self.root, self.tmp), start_new_session=True,
        )
        entry = GuestProcess(proc)
        with self.lock:
            self.procs[proc.pid] = entry
        threading.Thread(target=self._collect, args=(entry,), daemon=True,
                         name=f"sim-guest-{proc.pid}").start()
        return proc.pid

    def _run_in_process(self, command: list[str]) -> int:
        for arg in command[1:]:  # refuse paths outside the guest's files before running
            if arg.startswith("/"):
                self.path(arg, write=False)
        try:
            code, out, err = guest_tree.run(self.root, command)
        except guest_tree.GuestFault as exc:
            raise GuestRefused(str(exc)) from None
        except OSError as exc:
            code, out, err = 1, b"", f"{command[0]}: {exc.strerror}\n".encode()
        entry = GuestProcess(None, stdout=out, stderr=err, code=code)
        entry.done.set()
        with self.lock:
            self._next_pid += 1
            self.procs[self._next_pid] = entry
            return self._next_pid

    def _collect(self, entry: GuestProcess) -> None:
        assert entry.proc is not None
        try:
            entry.stdout, entry.stderr = entry.proc.communicate(timeout=EXEC_LIMIT_S)
        except subprocess.TimeoutExpired:
            entry.killed = True
            kill_group(entry.proc)
            entry.stdout, entry.stderr = entry.proc.communicate()
        entry.done.set()

    def status(self, pid: int) -> GuestProcess | None:
        """The process, removed from the table once it has exited (qemu-ga reports it once)."""
        with self.lock:
            entry = self.procs.get(pid)
            if entry is not None and entry.done.is_set():
                del self.procs[pid]
            return entry

    def stop(self) -> None:
        with self.lock:
            entries = list(self.procs.values())
            self.procs.clear()
        for entry in entries:
            if not entry.done.is_set() and entry.proc is not None:
                kill_group(entry.proc)


#: Commands the guest tree runs in-process.
IN_PROCESS = frozenset({"cat", "dmesg", "cp", "mv", "update-grub"})

_SANDBOXES: weakref.WeakKeyDictionary[NodeState, dict[int, GuestSandbox]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def sandbox(state: NodeState, vmid: int) -> GuestSandbox:
    """VM `vmid`'s guest on this simulated node (created on first use)."""
    with _LOCK:
        per_node = _SANDBOXES.setdefault(state, {})
        box = per_node.get(vmid)
        if box is None:
            with state.lock:
                cfg = state.load(vmid).parse()
            box = per_node[vmid] = GuestSandbox(state.keys.dir / "guests" / str(vmid), cfg)
            guest_gpus.write_view(state, vmid, box.root)
        return box


def guest_boot(state: NodeState, vmid: int) -> None:
    """VM `vmid` started: its guest (if it has files already) boots the grub.cfg line."""
    root = state.keys.dir / "guests" / str(vmid)
    if root.is_dir():
        guest_tree.boot(root)
        guest_gpus.write_view(state, vmid, root)


def stop_guests(state: NodeState) -> None:
    """Kill every guest process of this node (the simulator is stopping)."""
    with _LOCK:
        boxes = list(_SANDBOXES.pop(state, {}).values())
    for box in boxes:
        box.stop()


def run_host_pyz(host_tmp: Path, guest_path: str, args: list[str],
                 timeout: float = EXEC_LIMIT_S) -> tuple[int, bytes, bytes]:
    """`python3 /tmp/NAME.pyz ARGS` over the node's SSH: only zipapps directly in the host
    tree's /tmp (where SFTP uploads land), run isolated; (exit status, stdout, stderr)."""
    pyz = resolve_in(host_tmp, GUEST_TMP, guest_path)
    if not guest_path.endswith(".pyz") or not pyz.is_file():
        raise GuestRefused(f"{guest_path}: not an uploaded .pyz file in {GUEST_TMP}")
    proc = subprocess.Popen(
        pyz_argv(pyz, args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=host_tmp, env=child_env(host_tmp, host_tmp),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return 124, out, err + b"python3: killed after the simulator's time limit\n"
    return proc.returncode, out, err
