"""The probe report (`schema: pvefix.probe/v1`): pydantic models, frozen values.

Each section says whether it was measured; when it was not, `reason` says why (no GPU, no
nvidia-smi, no PyTorch, CUDA unusable, timeout, ...). Figures are medians in microseconds and
GB/s (10^9 bytes per second).
"""

from __future__ import annotations

from typing import Final, Literal, TypeVar

from pvefix.probe._model import BaseModel, ConfigDict, Field

SCHEMA: Final = "pvefix.probe/v1"

Status = Literal["measured", "not_measured"]

#: Legend of `nvidia-smi topo -p2p` cells (DOMAIN.md section 6).
P2P_LEGEND: dict[str, str] = {
    "X": "self",
    "OK": "status OK",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}

#: `nvidia-smi topo -p2p <mode>` letters and what each asks about.
P2P_MODES: dict[str, str] = {
    "r": "read",
    "w": "write",
    "n": "nvlink",
    "a": "atomics",
    "p": "pcie",
}


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Section(_Value):
    """Common head of every section: measured, or not measured and why."""

    status: Status = "measured"
    reason: str | None = None

    @property
    def measured(self) -> bool:
        return self.status == "measured"


class Bar(_Value):
    """One PCI BAR from sysfs `resource` (index 6 is the expansion ROM)."""

    index: int
    start: int
    size: int
    flags: int
    prefetchable: bool
    is_64bit: bool


class Link(_Value):
    """PCIe link as sysfs reports it (speed like '32.0 GT/s PCIe', width in lanes)."""

    current_speed: str | None = None
    current_width: int | None = None
    max_speed: str | None = None
    max_width: int | None = None


class Gpu(_Value):
    """One NVIDIA GPU, merged from nvidia-smi and sysfs by PCI address."""

    index: int | None = None
    name: str | None = None
    pci_address: str
    device_id: str | None = None
    memory_total_mib: int | None = None
    numa_node: int | None = None
    bars: tuple[Bar, ...] = ()
    link: Link | None = None
    driver: str | None = None
    iommu_group: str | None = None


class GpuSection(Section):
    gpus: tuple[Gpu, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    sources: tuple[str, ...] = ()


class Matrix(_Value):
    """A square-ish labelled matrix: `cells[i][j]` is row `rows[i]`, column `columns[j]`."""

    columns: tuple[str, ...]
    rows: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]

    def cell(self, row: str, column: str) -> str | None:
        """The cell at (row, column), or None when either label is absent."""
        if row not in self.rows or column not in self.columns:
            return None
        return self.cells[self.rows.index(row)][self.columns.index(column)]


class Affinity(_Value):
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


class TopologySection(Section):
    """`nvidia-smi topo -m`: the link matrix and each GPU's CPU/NUMA affinity."""

    matrix: Matrix | None = None
    affinity: dict[str, Affinity] = Field(default_factory=dict)


class P2PStatusSection(Section):
    """`nvidia-smi topo -p2p r|w|n|a|p`, one matrix per mode letter that answered."""

    modes: dict[str, Matrix] = Field(default_factory=dict)
    failed_modes: dict[str, str] = Field(default_factory=dict)


class CmdlineSection(Section):
    cmdline: str | None = None
    source: str | None = None


class KernelLogFinding(_Value):
    """One kernel log line that says a BAR or PCI region could not be placed."""

    kind: str
    line: str


class KernelLogSection(Section):
    source: str | None = None
    lines_scanned: int = 0
    findings: tuple[KernelLogFinding, ...] = ()


class HostPath(_Value):
    """Copies between one GPU and pinned host memory, and within the GPU, for reference."""

    device: int
    h2d_latency_us: float
    d2h_latency_us: float
    h2d_bandwidth_gbps: float
    d2h_bandwidth_gbps: float
    d2d_bandwidth_gbps: float


class PairResult(_Value):
    """One ordered GPU pair: the grant, whether the data arrived, and what the path is worth."""

    src: int
    dst: int
    can_access_peer: bool
    peer_enabled: bool | None = None
    peer_error: str | None = None
    data_delivered: bool | None = None
    mismatched_bytes: int | None = None
    bytes_checked: int | None = None
    latency_us: float | None = None
    bandwidth_gbps: float | None = None
    host_staged_latency_us: float | None = None
    host_staged_bandwidth_gbps: float | None = None
    error: str | None = None


class CudaDevice(_Value):
    index: int
    name: str
    pci_address: str | None = None
    total_memory_mib: int | None = None
    capability: str | None = None


class P2PMeasuredSection(Section):
    """Measured copies through PyTorch: per GPU against host memory, per ordered GPU pair."""

    python: str | None = None
    torch_version: str | None = None
    cuda_version: str | None = None
    devices: tuple[CudaDevice, ...] = ()
    latency_bytes: int | None = None
    bandwidth_bytes: int | None = None
    iterations: int | None = None
    host_paths: tuple[HostPath, ...] = ()
    pairs: tuple[PairResult, ...] = ()
    note: str | None = None


class AllReduceRow(_Value):
    bytes: int
    latency_us: float
    bus_bandwidth_gbps: float
    correct: bool


class AllReduceRun(Section):
    """One all-reduce sweep, under one NCCL environment."""

    label: str
    env: dict[str, str] = Field(default_factory=dict)
    rows: tuple[AllReduceRow, ...] = ()


class AllReduceSection(Section):
    world_size: int = 0
    runs: tuple[AllReduceRun, ...] = ()


class Report(_Value):
    """Everything one `pvefix probe` run saw. Serialised as JSON with `schema` first."""

    schema_: Literal["pvefix.probe/v1"] = Field(default=SCHEMA, alias="schema")
    pvefix_version: str
    created: str
    hostname: str
    kernel: str | None = None
    quick: bool = False
    duration_s: float = 0.0
    gpus: GpuSection
    topology: TopologySection
    p2p_status: P2PStatusSection
    cmdline: CmdlineSection
    kernel_log: KernelLogSection
    p2p: P2PMeasuredSection
    allreduce: AllReduceSection
    #: NCCL_*, VLLM_* and CUDA_VISIBLE_DEVICES as the probe's process saw them (the guest side
    #: that decides whether P2P is used: docs/p2p.md). Empty in reports made before it existed.
    environment: dict[str, str] = Field(default_factory=dict)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def to_json(self) -> str:
        """The versioned JSON form (what `--format json` prints)."""
        return self.model_dump_json(by_alias=True, indent=2)


S = TypeVar("S", bound=Section)


def not_measured(cls: type[S], reason: str) -> S:
    """A section of type `cls` that says it was not measured, and why."""
    return cls(status="not_measured", reason=reason)
