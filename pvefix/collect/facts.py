"""Parse the raw outputs the collect script kept in `.pvefix-facts/` into a HostMeta.

Each fact file holds one command's output exactly as the host printed it (`NAME`, with
`NAME.stderr` and `NAME.rc` for commands). A missing or odd fact is a ParseError naming the
file and what was expected, unless docs/collect.md gives it a default (no `mokutil`: Secure
Boot off; no `pvecm`: a single node; no `lspci`: no ACS facts; no `qm status`: stopped).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pvefix.errors import ParseError
from pvefix.facts.parse import acs_from_lspci, ha_states
from pvefix.hosttree.meta import (
    NODE_RE,
    SCHEMA_ID,
    Boot,
    BootToolStatus,
    Cpu,
    HostMeta,
    Versions,
    VmState,
)
from pvefix.paths import HA_RESOURCES

FACTS_DIR = ".pvefix-facts"
_NODE = re.compile(NODE_RE)
_VERSION_LINE = re.compile(r"^([a-z0-9][a-z0-9.+\-]*):\s+(\S+)")
_PVECM_ROW = re.compile(r"^\s*\d+\s+\d+\s+(\S+)")
_QM_LINE = re.compile(r"^([a-z][a-z0-9_\-]*):\s?(.*)$")
_DEB_REVISION = re.compile(r"-[0-9][0-9a-z.~+]*$")


class Facts:
    """The `.pvefix-facts/` folder of a bundle: reads fact files and names them in errors."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def where(self, name: str) -> str:
        return f"{FACTS_DIR}/{name}"

    def has(self, name: str) -> bool:
        return (self.folder / name).is_file()

    def text(self, name: str, expected: str) -> str:
        """The file's text; a ParseError saying what was expected when it is missing."""
        try:
            return (self.folder / name).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ParseError(
                f"missing fact file: expected {expected}", source=self.where(name)
            ) from None
        except OSError as exc:
            raise ParseError(f"cannot read: {exc}", source=self.where(name)) from None

    def first_line(self, name: str, expected: str) -> str:
        lines = self.text(name, expected).strip().splitlines()
        if not lines or not lines[0].strip():
            raise ParseError(f"empty: expected {expected}", source=self.where(name))
        return lines[0].strip()

    def integer(self, name: str, expected: str) -> int:
        value = self.first_line(name, expected)
        try:
            return int(value)
        except ValueError:
            raise ParseError(
                f"expected {expected}, got {value!r}", source=self.where(name)
            ) from None

    def rc(self, name: str) -> int:
        """Exit code of the command behind fact `name` (its `.rc` file)."""
        return self.integer(f"{name}.rc", "the exit code (an integer)")


def node_name(facts: Facts) -> str:
    """`hostname` (a domain part is dropped, as Proxmox's nodename does)."""
    name = facts.first_line("hostname", "the output of `hostname`").split(".")[0]
    if not _NODE.match(name):
        raise ParseError(f"expected a node name, got {name!r}", source=facts.where("hostname"))
    return name


def versions(facts: Facts) -> Versions:
    """`pveversion -v` (or plain `pveversion`) and `uname -r`."""
    text = facts.text("pveversion", "the output of `pveversion -v`")
    pve: str | None = None
    qemu: str | None = None
    edk2: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("pve-manager/"):  # plain `pveversion`: pve-manager/9.1.1/hash (...)
            pve = line.split("/")[1]
        match = _VERSION_LINE.match(line)
        if match is None:
            continue
        if match.group(1) == "pve-manager":
            pve = match.group(2)
        elif match.group(1) == "pve-qemu-kvm":
            qemu = _DEB_REVISION.sub("", match.group(2))  # 10.1.2-1 -> 10.1.2
        elif match.group(1) in ("pve-edk2-firmware", "pve-edk2-firmware-ovmf") and match.group(
                2)[:1].isdigit():  # not "not correctly installed"
            edk2[match.group(1)] = match.group(2)  # 4.2025.02-4: the revision is kept
    if pve is None:
        raise ParseError(
            "expected a 'pve-manager: X.Y.Z' line (pveversion -v)", source=facts.where("pveversion")
        )
    kernel = facts.first_line("uname-r", "the output of `uname -r`")
    ovmf = edk2.get("pve-edk2-firmware-ovmf") or edk2.get("pve-edk2-firmware")
    return Versions(pve=pve, kernel=kernel, qemu=qemu, edk2=ovmf)


def cpu(facts: Facts) -> Cpu:
    """vendor_id, model name, sockets and cores, flags and address sizes from /proc/cpuinfo
    lines; threads: `nproc`."""
    text = facts.text("cpuinfo", "the vendor_id and model name lines of /proc/cpuinfo")
    fields: dict[str, str] = {}
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    socket = "0"
    per_socket: int | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        fields.setdefault(key, value)
        if key == "physical id":
            socket = value
            sockets.add(value)
        elif key == "core id":
            cores.add((socket, value))
        elif key == "cpu cores" and value.isdigit():
            per_socket = int(value)
    for needed in ("vendor_id", "model name"):
        if needed not in fields:
            raise ParseError(f"expected a '{needed}' line", source=facts.where("cpuinfo"))
    threads = facts.integer("nproc", "the output of `nproc --all` (an integer)")
    n_sockets = max(len(sockets), 1)  # no 'physical id' lines (some VMs, ARM): one socket
    if cores:
        n_cores = len(cores)
    elif per_socket:
        n_cores = per_socket * n_sockets
    else:
        n_cores = threads
    bits = re.match(r"(\d+) bits physical", fields.get("address sizes", ""))
    flags = fields.get("flags")
    return Cpu(
        vendor=fields["vendor_id"], model=fields["model name"], sockets=n_sockets,
        cores=n_cores, threads=threads, phys_bits=int(bits.group(1)) if bits else None,
        flags=flags.split() if flags is not None else None)


def memory_bytes(facts: Facts) -> int:
    """`MemTotal: N kB` of /proc/meminfo, in bytes."""
    line = facts.first_line("meminfo", "the MemTotal line of /proc/meminfo")
    match = re.match(r"^MemTotal:\s+(\d+)\s+kB$", line)
    if match is None:
        raise ParseError(f"expected 'MemTotal: N kB', got {line!r}", source=facts.where("meminfo"))
    return int(match.group(1)) * 1024


def boot(facts: Facts) -> Boot:
    """efi or legacy-bios; Secure Boot from `mokutil --sb-state` (no mokutil: off)."""
    mode = facts.first_line("boot-mode", "efi or legacy-bios")
    if mode not in ("efi", "legacy-bios"):
        raise ParseError(
            f"expected efi or legacy-bios, got {mode!r}", source=facts.where("boot-mode"))
    secure = False
    if mode == "efi" and facts.has("mokutil-sb-state"):
        secure = "SecureBoot enabled" in facts.text("mokutil-sb-state", "")
    return Boot(mode="efi" if mode == "efi" else "legacy-bios", secureboot=secure)


def boot_tool(facts: Facts) -> BootToolStatus:
    """`proxmox-boot-tool status`: exit code, exact stdout and stderr."""
    name = "proxmox-boot-tool-status"
    expected = "the stdout of `proxmox-boot-tool status`"
    return BootToolStatus(
        exit_code=facts.rc(name), output=facts.text(name, expected),
        stderr=facts.text(f"{name}.stderr", "its stderr") if facts.has(f"{name}.stderr") else "")


def cluster_nodes(facts: Facts, node: str, tree_nodes: Iterable[str]) -> list[str]:
    """Nodes named by `pvecm nodes`, the local node, and every node that has VMs in the tree."""
    names: list[str] = []
    if facts.has("pvecm-nodes") and facts.rc("pvecm-nodes") == 0:
        for line in facts.text("pvecm-nodes", "").splitlines():
            match = _PVECM_ROW.match(line)
            if match is not None and _NODE.match(match.group(1)):
                names.append(match.group(1))
    for name in (node, *tree_nodes):
        if name not in names:
            names.append(name)
    return names


def vm_state(facts: Facts, vmid: str) -> VmState:
    """`qm status VMID --verbose`: the `key: value` lines it prints."""
    name = f"qm-status-{vmid}"
    rc = facts.rc(name)
    if rc != 0:
        err = ""
        if facts.has(f"{name}.stderr"):
            err = facts.text(f"{name}.stderr", "its stderr").strip()
        raise ParseError(f"qm status failed (exit {rc}): {err}", source=facts.where(name))
    values: dict[str, str] = {}
    for line in facts.text(name, "the output of `qm status VMID --verbose`").splitlines():
        match = _QM_LINE.match(line)
        if match is not None:
            values.setdefault(match.group(1), match.group(2).strip())
    status = values.get("status")
    if status not in ("running", "stopped", "paused"):
        raise ParseError(
            f"expected a 'status: running|stopped' line, got {status!r}", source=facts.where(name))
    running = status != "stopped"  # paused: the QEMU process runs (qmpstatus says paused)
    uptime = values.get("uptime", "0")
    return VmState(
        status="running" if running else "stopped",
        running_machine=values.get("running-machine") if running else None,
        lock=values.get("lock") or None, uptime=int(uptime) if uptime.isdigit() else 0,
        qmpstatus=values.get("qmpstatus") if running else None)


def vm_states(facts: Facts) -> dict[str, VmState]:
    """Every VM the script ran `qm status` for, by VMID, with its HA state from the HA
    resources file the script copied (`qm status` does not say it)."""
    states: dict[str, VmState] = {}
    ha = ha_states(_tree_text(facts, HA_RESOURCES))
    for path in sorted(facts.folder.glob("qm-status-*")):
        vmid = path.name.removeprefix("qm-status-")
        if vmid.isdigit():
            states[vmid] = vm_state(facts, vmid).model_copy(
                update={"ha_state": ha.get(int(vmid))})
    return dict(sorted(states.items(), key=lambda item: int(item[0])))


def _tree_text(facts: Facts, host_path: str) -> str:
    """A file the script copied into the tree beside the facts folder ("" when it has none)."""
    path = facts.folder.parent / host_path.lstrip("/")
    if not path.is_file() or path.is_symlink():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")


def acs(facts: Facts) -> dict[str, str]:
    """ACSCtl per bridge from `lspci -D -vvv` (no lspci: none)."""
    if not facts.has("lspci-acs"):
        return {}
    return acs_from_lspci(facts.text("lspci-acs", ""))


def meta_from_facts(folder: Path, tree_nodes: Iterable[str] = ()) -> HostMeta:
    """HostMeta from a `.pvefix-facts/` folder; `tree_nodes`: nodes with VM configs."""
    facts = Facts(folder)
    if not folder.is_dir():
        raise ParseError("missing: not a bundle made by `pvefix collect script`", source=FACTS_DIR)
    node = node_name(facts)
    return HostMeta.model_validate(
        {
            "schema": SCHEMA_ID,
            "node": node,
            "cluster_nodes": cluster_nodes(facts, node, tree_nodes),
            "versions": versions(facts),
            "cpu": cpu(facts),
            "memory_bytes": memory_bytes(facts),
            "boot": boot(facts),
            "proxmox_boot_tool": boot_tool(facts),
            "vms": vm_states(facts),
            "acs": acs(facts)})
