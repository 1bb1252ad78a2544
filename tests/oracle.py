"""Proxmox VE's own code as a test oracle (../shared/pve-oracle), one place to call it.

`Oracle.cmd(config_text, ...)` asks qemu-server's `config_to_command` (what `qm showcmd` builds)
whether Proxmox would start a VM config, and which `WARN:` lines it prints. One `batch` process
is kept per (PCI mapping, PCI device inventory) pair, so thousands of questions cost one Perl
start-up each. Tests get it through the `oracle` fixture (tests/conftest.py), which skips with a
reason starting "needs ../shared" where the oracle does not answer here: `oracle_missing()` asks
it once per test process about a trivial config (../shared/pve-oracle/install-deps.sh's own
readiness question), so a clone of the judges without their Debian Perl packages skips, saying
so, instead of dying on a broken pipe.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.shared import ORACLE

SCRIPT = ORACLE / "pve_oracle.pl"


INSTALL = ORACLE / "install-deps.sh"


def oracle_missing(script: Path = SCRIPT, path: str | None = None) -> str | None:
    """Why the oracle cannot answer here (None when it can): absent, no perl on `path` (the
    PATH by default), or perl there but Proxmox's modules' Debian packages not installed. The
    oracle is asked once per (script, PATH) in a test process."""
    return _why_not(str(script), os.environ.get("PATH", "") if path is None else path)


@functools.cache
def _why_not(script: str, path: str) -> str | None:
    if not Path(script).is_file():
        return f"pve-oracle absent at {script}"
    perl = shutil.which("perl", path=path)
    if perl is None:
        return f"perl is not installed (run {INSTALL}, root, apt)"
    try:
        done = subprocess.run([perl, script, "cmd", "-"], input="cores: 1\n", text=True,
                              capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"pve-oracle did not answer: {exc}"
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and answer.get("ok") and answer.get("cmdline"):
        return None
    said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
    return f"pve-oracle does not answer here ({said[:160]}); run {INSTALL} (root, apt)"


@dataclass(frozen=True)
class OracleResult:
    """One answer: did Proxmox build a command line (ok), its error, and its WARN: lines."""

    ok: bool
    error: str | None
    warnings: tuple[str, ...]
    cmdline: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def device_args(self) -> list[str]:
        """The `-device` values of the QEMU command line (vfio-pci ones for passthrough)."""
        if not self.cmdline:
            return []
        import shlex

        words = shlex.split(self.cmdline)
        return [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-device"]


class _Batch:
    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            ["perl", str(SCRIPT), *args, "batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
        )
        self.lock = threading.Lock()

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        with self.lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("pve-oracle batch process ended without an answer")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


class Oracle:
    """Batch processes of pve_oracle.pl, keyed by the mapping file and device inventory."""

    def __init__(self) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix="pve-oracle-"))
        self._batches: dict[tuple[str, str], _Batch] = {}
        self._lock = threading.Lock()

    def _batch(self, mapping: str | None, devices: dict[str, Any] | None) -> _Batch:
        dev_json = json.dumps(devices, sort_keys=True) if devices is not None else ""
        key = (mapping or "", dev_json)
        with self._lock:
            batch = self._batches.get(key)
            if batch is None:
                args: list[str] = []
                n = len(self._batches)
                if mapping is not None:
                    path = self._tmp / f"pci-{n}.cfg"
                    path.write_text(mapping, encoding="utf-8")
                    args += ["--pci-mapping", str(path)]
                if devices is not None:
                    path = self._tmp / f"devices-{n}.json"
                    path.write_text(dev_json, encoding="utf-8")
                    args += ["--pci-devices", str(path)]
                batch = self._batches[key] = _Batch(args)
            return batch

    def ask(
        self,
        op: str,
        arg: str,
        *,
        mapping: str | None = None,
        devices: dict[str, Any] | None = None,
        **opts: str | int,
    ) -> dict[str, Any]:
        """Any op of pve_oracle.pl; opts: vmid, qemu-version, nodename, cpu-vendor."""
        request: dict[str, Any] = {"op": op, "arg": arg}
        if opts:
            request["opts"] = {k.replace("_", "-"): v for k, v in opts.items()}
        return self._batch(mapping, devices).ask(request)

    def cmd(
        self,
        config_text: str,
        *,
        mapping: str | None = None,
        devices: dict[str, Any] | None = None,
        cpu_vendor: str | None = None,
        qemu_version: str | None = None,
        vmid: int | None = None,
        nodename: str | None = None,
    ) -> OracleResult:
        """Would Proxmox start this config? (qemu-server config_to_command)"""
        opts: dict[str, str | int] = {}
        if cpu_vendor:
            opts["cpu_vendor"] = cpu_vendor
        if qemu_version:
            opts["qemu_version"] = qemu_version
        if vmid is not None:
            opts["vmid"] = vmid
        if nodename:
            opts["nodename"] = nodename
        raw = self.ask("cmd", config_text, mapping=mapping, devices=devices, **opts)
        stderr = str(raw.get("stderr") or "")
        warnings = tuple(ln for ln in stderr.splitlines() if ln.startswith("WARN:"))
        error = raw.get("error_core") or raw.get("error")
        return OracleResult(
            ok=bool(raw.get("ok")),
            error=str(error).strip() if error else None,
            warnings=warnings,
            cmdline=raw.get("cmdline"),
            raw=raw,
        )

    def close(self) -> None:
        for batch in self._batches.values():
            batch.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


def devices_json_of(pci_devices: list[Any]) -> dict[str, Any]:
    """The oracle's --pci-devices inventory from pvefix PciDevice values (address -> ids)."""
    out: dict[str, Any] = {}
    for d in pci_devices:
        info: dict[str, Any] = {
            "vendor": (d.vendor or "").removeprefix("0x"),
            "device": (d.device or "").removeprefix("0x"),
            "subsystem_vendor": (d.subsystem_vendor or "").removeprefix("0x"),
            "subsystem_device": (d.subsystem_device or "").removeprefix("0x"),
            "mdev": 0,
        }
        # A device in no IOMMU group has no iommu_group link, so SysFSTools::pci_device_info
        # leaves the key out (Proxmox's own daemons then say "unexpected property
        # 'iommugroup'"); a number there would be a group that does not exist.
        if d.iommu_group is not None:
            info["iommugroup"] = d.iommu_group
        out[d.address] = info
    return out

