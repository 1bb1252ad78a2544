"""`pvefix-host.json`: the facts of a host tree that no file on the host holds.

Node name, versions, CPU, boot mode, VM run states and the output of `proxmox-boot-tool status`
come from the API or from commands, so a host tree records them here. The model is strict: an
unknown key anywhere is an error that names the file and the key's path, so a typo never turns
into a silently ignored fact.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pvefix.errors import ParseError
from pvefix.paths import VMID_PATTERN

META_FILE = "pvefix-host.json"
SCHEMA_ID = "pvefix.host/v1"

# pve-node: a DNS label (PVE::JSONSchema pve_verify_node_name).
NODE_RE = r"^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$"
PCI_ADDR_RE = r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$"
VMID_RE = re.compile(VMID_PATTERN)  # Proxmox VMIDs: 100 .. 999999999
TOKEN_ID_RE = r"^[^\s@!]+@[A-Za-z][A-Za-z0-9.\-_]+![A-Za-z][A-Za-z0-9.\-_]+$"  # noqa: S105

NodeName = Annotated[str, Field(pattern=NODE_RE)]


class _Strict(BaseModel):
    # Not frozen: the simulator updates run states in place and calls HostTree.save_meta();
    # validate_assignment keeps those updates as strict as the file.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Versions(_Strict):
    """Software versions as `pveversion -v` prints them."""

    pve: str = Field(description="pve-manager version, e.g. 9.1.1")
    kernel: str = Field(description="running kernel release (`uname -r`), e.g. 6.17.2-1-pve")
    qemu: str | None = Field(default=None, description="pve-qemu-kvm version, e.g. 10.1.2")
    edk2: str | None = Field(
        default=None,
        description="pve-edk2-firmware(-ovmf) package version, e.g. 4.2025.02-4: the OVMF build"
        " VMs start with (decides X-PciMmio64Mb and the window's placement)")


class Cpu(_Strict):
    """The host CPU, as /proc/cpuinfo and lscpu describe it."""

    vendor: str = Field(description="vendor_id: AuthenticAMD or GenuineIntel")
    model: str = Field(description="model name, e.g. AMD EPYC 9575F 64-Core Processor")
    sockets: int = Field(ge=1)
    cores: int = Field(ge=1, description="physical cores, all sockets")
    threads: int = Field(ge=1, description="logical CPUs, all sockets")
    phys_bits: int | None = Field(
        default=None, ge=32, le=64,
        description='/proc/cpuinfo "address sizes: N bits physical" (decides phys-bits=host)')
    flags: list[str] | None = Field(
        default=None, description="/proc/cpuinfo flags (pdpe1gb decides OVMF's 40-bit cap)"
    )


class Boot(_Strict):
    """How the host booted (GET /nodes/{node}/status boot-info)."""

    mode: Literal["efi", "legacy-bios"]
    secureboot: bool = False


class BootToolStatus(_Strict):
    """`proxmox-boot-tool status` as run without --quiet: exit code, stdout and stderr."""

    exit_code: int = Field(description="0: ESPs managed by proxmox-boot-tool; 2: not managed")
    output: str = Field(default="", description="exact stdout")
    stderr: str = Field(default="", description="exact stderr (e.g. the 'E: ... does not exist.')")


class VmState(_Strict):
    """Run state of one VM (GET .../status/current)."""

    status: Literal["running", "stopped"]
    running_machine: str | None = Field(
        default=None, description="machine QEMU really runs, e.g. pc-i440fx-10.1+pve0"
    )
    lock: str | None = None
    uptime: int = Field(default=0, ge=0)
    qmpstatus: str | None = None
    ha_state: str | None = Field(
        default=None, description="HA resource state (started, stopped, ...) when HA manages it"
    )

    @model_validator(mode="after")
    def _stopped_runs_nothing(self) -> VmState:
        if self.status == "stopped" and self.running_machine is not None:
            raise ValueError("a stopped VM has no running_machine")
        return self


class Token(_Strict):
    """An API token that exists on the host (no secret: the simulator makes those)."""

    id: str = Field(pattern=TOKEN_ID_RE, description="user@realm!name")
    privsep: bool = True


class NodeFacts(_Strict):
    """What differs on one other node of a cluster (`nodes.NAME` in the metadata); a key left
    out is the same as the local node's. Its files live under `nodes/NAME/` in the tree."""

    versions: Versions | None = None
    cpu: Cpu | None = None
    memory_bytes: int | None = Field(default=None, ge=0)
    boot: Boot | None = None
    proxmox_boot_tool: BootToolStatus | None = None
    acs: dict[Annotated[str, Field(pattern=PCI_ADDR_RE)], str] | None = None


class HostMeta(_Strict):
    """The metadata file of a host tree (`pvefix-host.json`, schema pvefix.host/v1)."""

    schema_: Literal["pvefix.host/v1"] = Field(alias="schema")
    node: NodeName
    cluster_nodes: list[NodeName] = Field(default_factory=list)
    cluster_name: str | None = Field(
        default=None, description="the cluster's name (pvecm status); none for a standalone host"
    )
    nodes: dict[NodeName, NodeFacts] = Field(
        default_factory=dict, description="per-node facts of the other nodes (see nodes/NAME/)"
    )
    versions: Versions
    cpu: Cpu
    memory_bytes: int = Field(ge=0)
    boot: Boot
    proxmox_boot_tool: BootToolStatus
    vms: dict[str, VmState] = Field(default_factory=dict)
    acs: dict[Annotated[str, Field(pattern=PCI_ADDR_RE)], str] = Field(
        default_factory=dict, description="port address -> ACSCtl line as lspci -vv prints it"
    )
    users: list[str] = Field(default_factory=lambda: ["root@pam"])
    tokens: list[Token] = Field(default_factory=list)
    reboot_seconds: float = Field(default=2.0, ge=0)

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    @field_validator("vms")
    @classmethod
    def _vmids(cls, value: dict[str, VmState]) -> dict[str, VmState]:
        for key in value:
            if not VMID_RE.match(key):
                raise ValueError(f"'{key}' is not a VMID (100..999999999)")
        return value

    @model_validator(mode="after")
    def _local_node_in_cluster(self) -> HostMeta:
        if not self.cluster_nodes:
            object.__setattr__(self, "cluster_nodes", [self.node])
        elif self.node not in self.cluster_nodes:
            raise ValueError(f"node '{self.node}' is not in cluster_nodes")
        return self

    @model_validator(mode="after")
    def _node_facts_of_members(self) -> HostMeta:
        strangers = sorted(set(self.nodes) - set(self.cluster_nodes or [self.node]))
        if strangers:
            raise ValueError(f"nodes: {', '.join(strangers)} not in cluster_nodes")
        return self

    def for_node(self, name: str) -> HostMeta:
        """The facts as node `name` sees them: its own `nodes.NAME` over the local node's.
        The copy shares `vms` (run states are the cluster's)."""
        if name == self.node:
            return self
        own = self.nodes.get(name) or NodeFacts()
        update: dict[str, Any] = {"node": name}
        for key in ("versions", "cpu", "memory_bytes", "boot", "proxmox_boot_tool", "acs"):
            value = getattr(own, key)
            if value is not None:
                update[key] = value
        return self.model_copy(update=update)

    def vm_state(self, vmid: int) -> VmState:
        """Run state of a VM; a VM absent from `vms` is stopped."""
        return self.vms.get(str(vmid), VmState(status="stopped"))

    def to_json(self) -> str:
        """The file's text: stable key order, 2-space indent, trailing newline."""
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def parse_meta(text: str, source: str = META_FILE) -> HostMeta:
    """Parse and validate the metadata text; ParseError names the file and the field path."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not valid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise ParseError("must hold a JSON object", source=source)
    try:
        return HostMeta.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = _loc(err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown key '{where}'")
            else:
                problems.append(f"{where}: {err['msg']}")
        raise ParseError("; ".join(problems), source=source) from None


def load_meta(path: Path) -> HostMeta:
    """Read and validate a `pvefix-host.json` file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError(f"missing {META_FILE}: not a host tree", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read: {exc}", source=str(path)) from None
    return parse_meta(text, source=str(path))


def json_schema() -> dict[str, Any]:
    """JSON Schema of `pvefix-host.json` (docs/host-tree.schema.json is generated from it)."""
    schema = HostMeta.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    return schema
