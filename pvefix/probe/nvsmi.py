"""Parsers for nvidia-smi output: the GPU list (CSV query, or the summary table as fallback),
`topo -m` and `topo -p2p <mode>`.

All parsers take text and raise only pvefix's ParseError; they never run anything.
"""

from __future__ import annotations

import re

from pvefix.errors import ParseError
from pvefix.probe._model import BaseModel, ConfigDict
from pvefix.probe.report import Affinity, Matrix

#: Fields asked of `nvidia-smi --query-gpu`; `parse_query_csv` expects them in this order.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "pci.bus_id",
    "memory.total",
    "driver_version",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "pcie.link.gen.max",
    "pcie.link.width.max",
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_BUS_ID = re.compile(r"^(?:([0-9A-Fa-f]{4,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


class SmiGpu(BaseModel):
    """One GPU as nvidia-smi lists it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    name: str
    pci_address: str
    memory_total_mib: int | None = None
    driver_version: str | None = None
    link_gen_current: int | None = None
    link_width_current: int | None = None
    link_gen_max: int | None = None
    link_width_max: int | None = None


class SmiSummary(BaseModel):
    """The plain `nvidia-smi` table: versions and the GPU rows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[SmiGpu, ...]


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (nvidia-smi underlines matrix headers with ESC[4m)."""
    return _ANSI.sub("", text)


def normalize_bus_id(raw: str, *, source: str = "bus id") -> str:
    """'00000000:00:06.0' or '0000:00:06.0' or '00:06.0' -> '0000:00:06.0' (sysfs form)."""
    m = _BUS_ID.match(raw.strip())
    if m is None:
        raise ParseError(f"not a PCI address: {raw.strip()!r}", source=source)
    domain = int(m.group(1), 16) if m.group(1) else 0
    if domain > 0xFFFF:
        raise ParseError(f"PCI domain out of range: {raw.strip()!r}", source=source)
    return f"{domain:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def _optional_int(value: str, *, field: str, source: str, line: int) -> int | None:
    value = value.strip()
    if value.endswith("MiB"):
        value = value[:-3].strip()
    if value == "" or value.startswith("[") or value.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    try:
        return int(value, 0) if value.startswith("0x") else int(value)
    except ValueError:
        raise ParseError(f"{field}: not a number: {value!r}", source=source, line=line) from None


def parse_query_csv(text: str, fields: tuple[str, ...] = QUERY_FIELDS, *,
                    source: str = "nvidia-smi --query-gpu") -> tuple[SmiGpu, ...]:
    """Parse `nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`.

    A header line, if present, must name the same fields (units in brackets are ignored).
    """
    for required in ("index", "name", "pci.bus_id"):
        if required not in fields:
            raise ParseError(f"query fields lack {required!r}", source=source)
    gpus: list[SmiGpu] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        cells = [c.strip() for c in raw.split(",")]
        if lineno == 1 and cells and cells[0] == "index":
            names = tuple(c.split(" [")[0] for c in cells)
            if names != fields:
                raise ParseError(f"header {names} is not {fields}", source=source, line=lineno)
            continue
        if len(cells) != len(fields):
            raise ParseError(
                f"expected {len(fields)} fields, got {len(cells)}", source=source, line=lineno
            )
        row = dict(zip(fields, cells, strict=True))
        index = _optional_int(row["index"], field="index", source=source, line=lineno)
        if index is None:
            raise ParseError("GPU index missing", source=source, line=lineno)

        def num(name: str, row: dict[str, str] = row, lineno: int = lineno) -> int | None:
            if name not in row:
                return None
            return _optional_int(row[name], field=name, source=source, line=lineno)

        gpus.append(
            SmiGpu(
                index=index, name=row["name"],
                pci_address=normalize_bus_id(row["pci.bus_id"], source=f"{source}:{lineno}"),
                memory_total_mib=num("memory.total"),
                driver_version=row.get("driver_version") or None,
                link_gen_current=num("pcie.link.gen.current"),
                link_width_current=num("pcie.link.width.current"),
                link_gen_max=num("pcie.link.gen.max"), link_width_max=num("pcie.link.width.max")))
    if not gpus:
        raise ParseError("no GPU rows", source=source)
    return tuple(gpus)


_VERSIONS = re.compile(r"Driver Version:\s*(\S+).*?CUDA Version:\s*(\S+)")
_TABLE_ROW = re.compile(
    r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
)
_MEMORY = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")


def parse_smi_table(text: str, *, source: str = "nvidia-smi") -> SmiSummary:
    """Parse the plain `nvidia-smi` summary: versions, and per GPU index, name, bus id, memory.

    Names longer than the column are cut by nvidia-smi ('...'); the CSV query is preferred.
    """
    lines = text.splitlines()
    driver = cuda = None
    for line in lines:
        m = _VERSIONS.search(line)
        if m:
            driver, cuda = m.group(1), m.group(2)
            break
    gpus: list[SmiGpu] = []
    for i, line in enumerate(lines):
        m = _TABLE_ROW.match(line)
        if m is None:
            continue
        memory = None
        if i + 1 < len(lines):
            mm = _MEMORY.search(lines[i + 1])
            if mm:
                memory = int(mm.group(2))
        gpus.append(
            SmiGpu(
                index=int(m.group(1)), name=m.group(2).strip(),
                pci_address=normalize_bus_id(m.group(3), source=f"{source}:{i + 1}"),
                memory_total_mib=memory, driver_version=driver))
    if driver is None and not gpus:
        raise ParseError("no 'Driver Version' header and no GPU rows", source=source)
    return SmiSummary(driver_version=driver, cuda_version=cuda, gpus=tuple(gpus))


def _matrix_lines(text: str) -> list[list[str]]:
    """Tab-separated lines before the legend, ANSI removed, cells stripped."""
    out: list[list[str]] = []
    for raw in strip_ansi(text).splitlines():
        if raw.strip().startswith("Legend") or raw.strip().startswith("NIC Legend"):
            break
        if not raw.strip():
            continue
        out.append([c.strip() for c in raw.split("\t")])
    return out


def parse_topo_matrix(text: str, *, source: str = "nvidia-smi topo -m") -> tuple[
    Matrix, dict[str, Affinity]
]:
    """Parse `nvidia-smi topo -m`: the device matrix and the affinity columns per row."""
    lines = _matrix_lines(text)
    if not lines:
        raise ParseError("no matrix header", source=source)
    header = [c for c in lines[0] if c]
    devices = [c for c in header if c not in _AFFINITY_COLUMNS]
    extra = [c for c in header if c in _AFFINITY_COLUMNS]
    if not devices:
        raise ParseError(f"header names no device: {lines[0]!r}", source=source, line=1)
    rows: list[str] = []
    cells: list[tuple[str, ...]] = []
    affinity: dict[str, Affinity] = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line or line[0] not in devices:
            continue
        values = line[1:]
        if len(values) < len(devices):
            raise ParseError(
                f"row {line[0]} has {len(values)} cells for {len(devices)} columns",
                source=source, line=lineno)
        rows.append(line[0])
        cells.append(tuple(values[: len(devices)]))
        rest = [v for v in values[len(devices) :] if v]
        named = dict(zip(extra, rest, strict=False))
        if extra:
            affinity[line[0]] = Affinity(
                cpu_affinity=named.get("CPU Affinity"), numa_affinity=named.get("NUMA Affinity"),
                gpu_numa_id=named.get("GPU NUMA ID"))
    if not rows:
        raise ParseError("matrix has no rows", source=source)
    return Matrix(columns=tuple(devices), rows=tuple(rows), cells=tuple(cells)), affinity


def parse_topo_p2p(text: str, *, source: str = "nvidia-smi topo -p2p") -> Matrix:
    """Parse `nvidia-smi topo -p2p <mode>`: cells are legend codes (X, OK, NS, ...).

    Codes outside the known legend are kept as they are: we never drop what we do not know.
    """
    lines = _matrix_lines(text)
    if not lines:
        raise ParseError("no matrix header", source=source)
    columns = [c for c in lines[0] if c]
    if not columns or not all(c.startswith("GPU") for c in columns):
        raise ParseError(f"header is not GPU labels: {lines[0]!r}", source=source, line=1)
    rows: list[str] = []
    cells: list[tuple[str, ...]] = []
    for lineno, line in enumerate(lines[1:], start=2):
        values = [c for c in line if c]
        if not values:
            continue
        if values[0] not in columns:
            raise ParseError(f"row label {values[0]!r} is not a column", source=source, line=lineno)
        if len(values) - 1 != len(columns):
            raise ParseError(
                f"row {values[0]} has {len(values) - 1} cells for {len(columns)} columns",
                source=source, line=lineno)
        rows.append(values[0])
        cells.append(tuple(values[1:]))
    if not rows:
        raise ParseError("matrix has no rows", source=source)
    return Matrix(columns=tuple(columns), rows=tuple(rows), cells=tuple(cells))
