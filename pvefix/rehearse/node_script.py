"""The part of `pvefix rehearse` that runs ON THE NODE, with the node's own python3.

Sent as the text of `python3 -c` (standard library only, no pvefix import), with one argument:
a JSON job, base64-encoded. Two modes:

- `facts`: what the rehearsal needs to know about the node before it builds the QEMU command:
  the QEMU binary (and whether it is Proxmox's), whether /dev/kvm is usable, free memory, the
  firmware files, the machine types QEMU knows.
- `run`: boot the firmware only, with the stand-in devices, in a private temporary folder
  (mkdtemp, 0700) that holds the QMP socket, the serial and debug-console logs, the copy of the
  OVMF variables and the sparse RAM file; wait until the firmware reaches its boot manager (or
  the time is up), read `query-pci` (again, up to SETTLE_S, until the stand-ins' decoding is
  on), the vCPU's properties and the RAM layout over QMP, kill
  QEMU and remove the folder. QEMU runs in its own process group with PR_SET_PDEATHSIG (it dies
  with this script), under RLIMIT_DATA, at the lowest CPU priority (nice 19) and in the idle
  I/O class; SIGTERM, SIGHUP, SIGINT and the end of stdin (a lost SSH connection closes it) end
  the run and clean up the same way. `timeout` around this script (the caller's wrapper) ends
  it even when it hangs. One run at a time per node: an exclusive flock on
  `pvefix-rehearse.lock` (in /run/lock, else the temp dir; in $PVEFIX_REHEARSE_LOCK_DIR when
  set: pvefix's simulator sets it, its nodes all run on one machine), waited for `lock_wait`
  seconds at most; then the run is `busy`. Each run folder holds its script's pid (`owner`);
  a folder whose owner is gone (a run killed with SIGKILL) is removed at the next run's start.

Prints one JSON object on stdout. This file is pvefix's own; it never writes outside its folder.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

Job = dict[str, Any]

BOOT_ORDER = "BootOrder".encode("utf-16-le")
PREFIX = "pvefix-rehearse-"
LOCK_NAME = "pvefix-rehearse.lock"
LOCK_DIR_ENV = "PVEFIX_REHEARSE_LOCK_DIR"
ORPHAN_AGE = 6 * 3600  # s: a run folder without owner file older than this is stale
IOPRIO_IDLE = 3 << 13  # IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)
IOPRIO_SET = {"x86_64": 251, "aarch64": 30}  # the ioprio_set system call's number
FW_DONE = ("BdsDxe", "Shell>", "No bootable device", "Boot failed", "Booting from")
SETTLE_S = 10.0  # s after the boot-manager signal to wait for the BARs' decoding at most


class Stop(Exception):
    """A signal or a lost connection: stop, clean up, say why."""


def _stop(signum: int, frame: object) -> None:
    raise Stop(f"interrupted by signal {signum}")


def find_qemu(candidates: list[str]) -> str | None:
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    return None


def _out(argv: list[str], timeout: float = 20) -> str:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        return done.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired):
        return ""


def mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def facts(job: Job) -> Job:
    qemu = find_qemu(job.get("qemu") or ["/usr/bin/kvm", "qemu-system-x86_64"])
    out: Job = {"qemu": qemu, "kvm": os.access("/dev/kvm", os.R_OK | os.W_OK),
           "mem_available": mem_available(), "python": sys.version.split()[0],
           "tmpdir": tempfile.gettempdir()}
    fwdir = job.get("firmware_dir") or ""
    out["firmware_dir"] = fwdir
    try:
        out["firmware_files"] = sorted(os.listdir(fwdir)) if fwdir else []
    except OSError:
        out["firmware_files"] = None
    if qemu:
        version = _out([qemu, "--version"]).splitlines()
        out["qemu_version"] = version[0].strip() if version else ""
        machines = _out([qemu, "-machine", "help"])
        out["machines"] = sorted({ln.split()[0] for ln in machines.splitlines()[1:] if ln.strip()})
    return out


class Qmp:
    def __init__(self, path: str, timeout: float) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.file = self.sock.makefile("rw")
        self.file.readline()
        self.cmd("qmp_capabilities")

    def cmd(self, name: str, **args: Any) -> Any:
        msg: Job = {"execute": name}
        if args:
            msg["arguments"] = args
        self.file.write(json.dumps(msg) + "\n")
        self.file.flush()
        while True:
            line = self.file.readline()
            if not line:
                raise OSError("QMP closed")
            reply = json.loads(line)
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                raise RuntimeError(reply["error"].get("desc", "QMP error"))

    def close(self) -> None:
        self.sock.close()


def _read(path: str, binary: bool = False) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return b"" if binary else ""
    return data if binary else data.decode("utf-8", "replace")


def read_machine(qmp: Qmp) -> Job:
    """The vCPU as QEMU realised it and the RAM ranges (ram-below-4g, ram-above-4g)."""
    out: Job = {}
    try:
        path = qmp.cmd("query-cpus-fast")[0]["qom-path"]
        for prop in ("phys-bits", "vendor", "pdpe1gb"):
            out[prop] = qmp.cmd("qom-get", path=path, property=prop)
    except (RuntimeError, OSError, IndexError, KeyError):
        pass
    ram: list[list[int]] = []
    try:
        mtree = qmp.cmd("human-monitor-command", **{"command-line": "info mtree"})
        # with a NUMA node's memory device the aliases show as i/o (their target, pc.ram,
        # is a container of the node's RAM), without one as ram
        for m in re.finditer(r"^\s*([0-9a-f]+)-([0-9a-f]+) \(prio -?\d+, (?:ram|i/o)\): "
                             r"alias ram-(?:below|above)-4g", mtree, re.M):
            ram.append([int(m.group(1), 16), int(m.group(2), 16) + 1])
    except (RuntimeError, OSError):
        pass
    out["ram"] = sorted({tuple(r) for r in ram})
    return out


def _limit_and_orphan(data_limit: int | None) -> Callable[[], None]:
    def pre() -> None:
        os.setsid()
        with contextlib.suppress(OSError):
            os.nice(19)
        _idle_io()
        if data_limit:
            resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
        try:  # PR_SET_PDEATHSIG: QEMU dies with this script, however it ends
            import ctypes
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    return pre


def _idle_io() -> None:
    """ionice -c 3 for this process (QEMU inherits it): I/O only when the disk is idle."""
    number = IOPRIO_SET.get(os.uname().machine)
    if number is None:
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).syscall(number, 1, 0, IOPRIO_IDLE)
    except (OSError, AttributeError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(base: str) -> list[str]:
    """Remove run folders whose owner (the pid in `owner`) is gone, or that have no owner
    file and are older than ORPHAN_AGE (a run killed between mkdtemp and writing it, or one
    of an older pvefix, which wrote none: its run is long over by then)."""
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(base) if n.startswith(PREFIX) and n != LOCK_NAME]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
            if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid():
                continue
            owner = _read(os.path.join(path, "owner")).strip()
            if owner.isdigit() and _alive(int(owner)):
                continue
            if not owner and time.time() - st.st_mtime < ORPHAN_AGE:
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(name)
    return removed


def take_lock(wait: float) -> tuple[int | None, str]:
    """The node's rehearsal lock (a file descriptor held until exit), or None and why."""
    folder = os.environ.get(LOCK_DIR_ENV) or (
        "/run/lock" if os.access("/run/lock", os.W_OK) else tempfile.gettempdir())
    path = os.path.join(folder, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            return fd, path
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                return None, (f"another rehearsal runs on this node (pid {holder or '?'}, "
                              f"lock {path}); waited {wait:g} s: try again when it is done")
            time.sleep(0.5)


def _console_done(tmp: str) -> bool:
    text = _read(os.path.join(tmp, "serial.log")) + _read(os.path.join(tmp, "debugcon.log"))
    return any(m in text for m in FW_DONE)


def _done(job: Job, tmp: str) -> bool:
    if _console_done(tmp):
        return True
    return bool(job.get("vars_signal")) and BOOT_ORDER in _read(os.path.join(tmp, "vars.fd"), True)


def _stdin_closed() -> bool:
    try:
        ready, _, _ = select.select([sys.stdin], [], [], 0)
        return bool(ready) and not os.read(sys.stdin.fileno(), 4096)
    except (OSError, ValueError):
        return False


STAND_IN_MODELS = ("pci-testdev,", "ivshmem-plain,")  # build.py STAND_IN and NO_IO


def stand_in_ids(argv: list[str]) -> list[str]:
    """The stand-ins' ids, from their `-device` words: pci-testdev (a function with an I/O BAR)
    and ivshmem-plain (one without); the BAR each stands for is its BAR2."""
    return [part[3:] for word in argv if word.startswith(STAND_IN_MODELS)
            for part in word.split(",") if part.startswith("id=")]


def stand_in_bars(pci: list[Any], ids: list[str]) -> list[int]:
    """The stand-ins' BAR2 addresses as query-pci shows them, in the order of `ids`: 0 or
    2^64-1 while the firmware has not programmed the BAR or not turned its decoding on (0 for
    a stand-in query-pci does not show)."""
    found: dict[str, int] = {}

    def walk(devices: list[Any]) -> None:
        for d in devices:
            if d.get("qdev_id") in ids:
                found[d["qdev_id"]] = next((r["address"] % (1 << 64) for r in
                                            d.get("regions", []) if r.get("bar") == 2), 0)
            walk(d.get("pci_bridge", {}).get("devices", []))

    for bus in pci:
        walk(bus.get("devices", []))
    return [found.get(i, 0) for i in ids]


def all_decoded(pci: list[Any], ids: list[str]) -> bool:
    """Every stand-in of `ids` is seen with its BAR2 at an address."""
    return all(0 < a < (1 << 64) - 1 for a in stand_in_bars(pci, ids))


def settled_pci(qmp: Qmp, job: Job, tmp: str, deadline: float) -> Any:
    """query-pci once the firmware's boot-manager pass has turned the BARs' decoding on. OVMF
    writes BootOrder before it connects the devices and enables their decoding (a loaded node
    may take seconds between the two): read again until every stand-in shows its address, the
    console says the boot manager ran (FW_DONE), or SETTLE_S passed (a BAR the firmware did
    not place never shows one)."""
    ids = stand_in_ids(job["argv"])
    until = min(deadline, time.monotonic() + SETTLE_S)
    while True:
        console = _console_done(tmp)
        pci = qmp.cmd("query-pci")
        if console or all_decoded(pci, ids) or time.monotonic() >= until:
            return pci
        if job.get("watch_stdin") and _stdin_closed():
            raise Stop("the connection to pvefix was lost")
        time.sleep(0.5)


def boot(job: Job, tmp: str, qemu: str) -> Job:
    """Start QEMU in `tmp`, wait for the boot manager, read QMP. Returns the result dict."""
    if job.get("vars_template"):
        shutil.copyfile(job["vars_template"], os.path.join(tmp, "vars.fd"))
        os.chmod(os.path.join(tmp, "vars.fd"), 0o600)
        # the BootOrder signal only where the template has none yet (else: the console's)
        job["vars_signal"] = job.get("vars_signal") and BOOT_ORDER not in _read(
            job["vars_template"], True)
    if job.get("ram_mb"):
        with open(os.path.join(tmp, "ram"), "wb") as f:
            f.truncate(int(job["ram_mb"]) << 20)  # sparse: never allocated
    t0 = time.monotonic()
    proc = subprocess.Popen([qemu] + job["argv"], cwd=tmp, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=_limit_and_orphan(job.get("data_limit")))
    result: Job = {"pid_group": proc.pid}
    try:
        while time.monotonic() - t0 < job["timeout"] and proc.poll() is None:
            time.sleep(0.25)
            if job.get("watch_stdin") and _stdin_closed():
                raise Stop("the connection to pvefix was lost")
            if _done(job, tmp):
                time.sleep(1)  # let the firmware finish its boot-manager pass
                qmp = Qmp(os.path.join(tmp, "qmp.sock"), 20)
                result["query_pci"] = settled_pci(qmp, job, tmp, t0 + job["timeout"])
                result.update(read_machine(qmp))
                qmp.close()
                break
        result["boot_s"] = round(time.monotonic() - t0, 2)
        result["rc"] = proc.poll()
    finally:
        result["qemu_output"] = _kill(proc)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        result["peak_rss_kb"] = usage.ru_maxrss
    result["outcome"] = ("booted" if "query_pci" in result else
                         "refused" if result.get("rc") is not None else "timeout")
    return result


def _kill(proc: subprocess.Popen[bytes]) -> str:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        return ""
    lines = out.decode("utf-8", "replace").strip().splitlines()
    return "\n".join(lines[-8:])


def run(job: Job) -> Job:
    qemu = job["qemu_path"]
    lock, why = take_lock(float(job.get("lock_wait") or 0))
    if lock is None:
        return {"outcome": "busy", "why": why}
    swept = sweep(tempfile.gettempdir())
    tmp = tempfile.mkdtemp(prefix=f"{PREFIX}{job.get('vmid', 'vm')}-")
    os.chmod(tmp, 0o700)
    try:
        with open(os.path.join(tmp, "owner"), "w") as f:
            f.write(str(os.getpid()))
        result = boot(job, tmp, qemu)
    except Stop as exc:
        result = {"outcome": "stopped", "why": str(exc)}
    except (OSError, RuntimeError, ValueError) as exc:
        result = {"outcome": "error", "why": f"{type(exc).__name__}: {exc}"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(lock)
    result["tmp_removed"] = not os.path.exists(tmp)
    result["swept"] = swept
    return result


def main() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _stop)
    job = json.loads(base64.b64decode(sys.argv[2]).decode("utf-8"))
    try:
        out = facts(job) if sys.argv[1] == "facts" else run(job)
    except Stop as exc:
        out = {"outcome": "stopped", "why": str(exc)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
