"""Cluster PCI resource mappings: `/etc/pve/mapping/pci.cfg`.

The file is Proxmox's section-config format (PVE::Mapping::PCI in pve-guest-common). Proxmox
writes each section header as the bare mapping id (`pro6000`), then one indented `key value`
line per property; `map` may repeat, one line per device and node:

    pro6000
    <TAB>map id=10de:2bb5,iommugroup=42,node=kpro6,path=0000:01:00.0,subsystem-id=10de:204b

A blank line ends a section; `#` lines are comments. The generic section-config header
`pci: pro6000` is accepted too. Parsing is strict (every problem is a ParseError naming the file
and line) and lossless: the text is kept as read, and `render()` gives it back unchanged.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from pvefix.errors import ParseError
from pvefix.paths import MAPPING_FILE

_CONFIGID_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_\-]+$")
_HEADER_RE = re.compile(r"^(?:pci:\s+)?(\S+)\s*$")
_PROPERTY_RE = re.compile(r"^\s+(\S+)(?:\s+(.*\S))?\s*$")
_ID_RE = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}$")
_PCI_RE = r"[a-f0-9]{4,}:[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?"
_PATH_RE = re.compile(rf"^(?:{_PCI_RE};)*{_PCI_RE}$")
_NODE_RE = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$")
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_TRUE = {"1", "on", "yes", "true"}
_FALSE = {"0", "off", "no", "false"}
_MAP_KEYS = {"node", "id", "path", "iommugroup", "subsystem-id", "description"}
_SECTION_KEYS = {"description", "mdev", "live-migration-capable", "map"}


class MapEntry(BaseModel):
    """One `map` line: a device on one node."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    node: str
    id: str = Field(description="vendor:device, e.g. 10de:2bb5")
    path: str = Field(description="0000:01:00.0, 0000:01:00 (all functions) or a;b")
    iommugroup: int | None = None
    subsystem_id: str | None = Field(default=None, alias="subsystem-id")
    description: str | None = None
    raw: str = Field(description="the property string as written")
    line: int

    @property
    def paths(self) -> list[str]:
        """The device paths, in order (Proxmox uses the first free one at VM start)."""
        return self.path.split(";")

    @property
    def multifunction(self) -> bool:
        """A path without a function maps every function of the device."""
        return not re.search(r"\.[a-f0-9]$", self.paths[0])


class PciMapping(BaseModel):
    """One section: a named logical device with its per-node `map` entries."""

    model_config = ConfigDict(frozen=True)

    id: str
    description: str | None = None
    mdev: bool | None = None
    live_migration_capable: bool | None = None
    maps: list[MapEntry]
    line: int = Field(description="line of the section header")

    def for_node(self, node: str) -> list[MapEntry]:
        """The map entries of one node, in file order."""
        return [entry for entry in self.maps if entry.node == node]


class PciMappingFile(BaseModel):
    """The parsed file: mappings by id, plus the exact text read."""

    model_config = ConfigDict(frozen=True)

    mappings: dict[str, PciMapping]
    raw: str
    source: str = MAPPING_FILE

    def get(self, mapping_id: str) -> PciMapping | None:
        """A mapping by id, or None."""
        return self.mappings.get(mapping_id)

    def render(self) -> str:
        """The file text, byte for byte as read."""
        return self.raw

    @classmethod
    def parse(cls, text: str, source: str = MAPPING_FILE) -> PciMappingFile:
        """Parse the file text; ParseError names `source` and the line."""
        return cls(mappings=_parse_sections(text, source), raw=text, source=source)


def split_property_string(value: str, source: str, line: int) -> list[tuple[str, str]]:
    """Split `k=v,k2="a, b"` into pairs; double quotes protect commas (with \\" escapes)."""
    pairs: list[tuple[str, str]] = []
    rest = value
    while True:
        key, eq, rest = rest.partition("=")
        if not eq or not key or "," in key:
            raise ParseError(f"'{value}': expected key=value pairs", source=source, line=line)
        if rest.startswith('"'):
            match = re.match(r'^"((?:[^"\\]|\\.)*)"', rest)
            if match is None:
                raise ParseError(f"'{value}': unterminated quote", source=source, line=line)
            item = re.sub(r"\\(.)", r"\1", match.group(1))
            rest = rest[match.end() :]
            if rest and not rest.startswith(","):
                raise ParseError(f"'{value}': text after quoted value", source=source, line=line)
        else:
            item, sep, tail = rest.partition(",")
            rest = sep + tail
        pairs.append((key, item))
        if not rest:
            return pairs
        rest = rest[1:]
        if not rest:
            raise ParseError(f"'{value}': trailing comma", source=source, line=line)


def parse_map_entry(value: str, source: str = MAPPING_FILE, line: int = 0) -> MapEntry:
    """Parse one `map` property string, checking each value as Proxmox's schema does."""
    fields: dict[str, str] = {}
    for key, item in split_property_string(value, source, line):
        if key not in _MAP_KEYS:
            raise ParseError(f"map: unknown key '{key}'", source=source, line=line)
        if key in fields:
            raise ParseError(f"map: duplicate key '{key}'", source=source, line=line)
        fields[key] = item
    for key in ("node", "id", "path"):
        if key not in fields:
            raise ParseError(f"map: missing '{key}'", source=source, line=line)
    checks = {
        "node": _NODE_RE,
        "id": _ID_RE,
        "subsystem-id": _ID_RE,
        "path": _PATH_RE,
        "iommugroup": _INT_RE}
    for key, pattern in checks.items():
        if key in fields and not pattern.match(fields[key]):
            raise ParseError(f"map: invalid {key} '{fields[key]}'", source=source, line=line)
    if len(fields.get("description", "")) > 4096:
        raise ParseError("map: description longer than 4096", source=source, line=line)
    group = fields.get("iommugroup")
    return MapEntry(
        node=fields["node"], id=fields["id"], path=fields["path"],
        iommugroup=int(group) if group is not None else None,
        subsystem_id=fields.get("subsystem-id"), description=fields.get("description"), raw=value,
        line=line)


def _boolean(key: str, value: str, source: str, line: int) -> bool:
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ParseError(f"{key}: '{value}' is not a boolean", source=source, line=line)


class _Section:
    def __init__(self, mapping_id: str, line: int) -> None:
        self.id = mapping_id
        self.line = line
        self.values: dict[str, str] = {}
        self.maps: list[MapEntry] = []

    def add(self, key: str, value: str | None, source: str, line: int) -> None:
        if key not in _SECTION_KEYS:
            raise ParseError(f"mapping '{self.id}': unknown key '{key}'", source=source, line=line)
        if value is None:
            raise ParseError(f"mapping '{self.id}': '{key}' has no value", source=source, line=line)
        if key == "map":
            self.maps.append(parse_map_entry(value, source, line))
            return
        if key in self.values:
            raise ParseError(
                f"mapping '{self.id}': duplicate '{key}'", source=source, line=line
            )
        if key != "description":
            _boolean(key, value, source, line)
        self.values[key] = value

    def build(self, source: str) -> PciMapping:
        if not self.maps:
            raise ParseError(f"mapping '{self.id}' has no map line", source=source, line=self.line)
        flags = {
            key: _boolean(key, self.values[key], source, self.line)
            for key in ("mdev", "live-migration-capable")
            if key in self.values
        }
        return PciMapping(
            id=self.id, description=self.values.get("description"), mdev=flags.get("mdev"),
            live_migration_capable=flags.get("live-migration-capable"), maps=self.maps,
            line=self.line)


def _parse_sections(text: str, source: str) -> dict[str, PciMapping]:
    mappings: dict[str, PciMapping] = {}
    current: _Section | None = None

    def close() -> None:
        nonlocal current
        if current is not None:
            mappings[current.id] = current.build(source)
            current = None

    for number, line in enumerate(text.split("\n"), start=1):
        if line == "":
            close()
            continue
        if line.strip() == "" or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():
            prop = _PROPERTY_RE.match(line)
            if current is None or prop is None:
                raise ParseError(
                    f"property line outside a mapping section: {line.strip()!r}",
                    source=source, line=number)
            current.add(prop.group(1), prop.group(2), source, number)
            continue
        close()
        header = _HEADER_RE.match(line)
        if header is None or not _CONFIGID_RE.match(header.group(1)):
            raise ParseError(f"invalid section header {line!r}", source=source, line=number)
        mapping_id = header.group(1)
        if mapping_id in mappings:
            raise ParseError(f"duplicate mapping '{mapping_id}'", source=source, line=number)
        current = _Section(mapping_id, number)
    close()
    return mappings
