"""The desired-state file (`schema = "pvefix.desired/v1"`): what must hold for VMs and hosts.

Per node: kernel cmdline parameters that are required and forbidden. Per VM: the machine
(a family, or an exact value), options of named hostpciN entries (pcie, x-vga, mapping, host),
exact values of chosen config keys, keys that must be absent, guest cmdline parameters, and
`free` key patterns that may change freely. With `closed = true` every other key that appears
in the config is drift.

A parameter is written `name` (any value; for `forbidden`: any occurrence) or `name=value`
(that exact value). Names compare as the kernel does: `-` and `_` are the same.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable
from typing import Literal

import pydantic
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from pvefix.cmdline.tokens import WHITESPACE, Token
from pvefix.errors import PvefixError
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, MAX_HOSTPCI, PCI_ID
from pvefix.vmconfig.machine import Machine

SCHEMA = "pvefix.desired/v1"
Family = Literal["i440fx", "q35", "virt"]
CONFIG_KEY = re.compile(r"^[a-z][a-z_\-]*\d*$")
_PATTERN = re.compile(r"^[a-z0-9_\-\*\?\[\]!]+$")



@functools.lru_cache(maxsize=256)
def _free_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Is a key free under this `free` list? One compiled regex per distinct list, and each
    key's answer kept (a check asks for every key of every VM; a fleet shares a few lists)."""
    if not patterns:
        return lambda key: False
    match = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match
    answers: dict[str, bool] = {}

    def is_free(key: str) -> bool:
        found = answers.get(key)
        if found is None:
            found = match(key) is not None
            if len(answers) < 4096:  # config key names are few; a flood is not kept
                answers[key] = found
        return found

    return is_free


@functools.lru_cache(maxsize=256)
def _check_patterns(patterns: tuple[str, ...]) -> None:
    """ValueError for the first pattern that is not one; once per distinct list (a fleet's
    VMs share a few `free` lists)."""
    for pattern in patterns:
        if not _PATTERN.match(pattern):
            raise ValueError(f"'{pattern}' is not a key pattern (a-z, 0-9, _ - * ? [])")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def parameter(text: str) -> tuple[str, str | None]:
    """`name` or `name=value` as the kernel splits it; ValueError for what is not one."""
    if not text or any(c in WHITESPACE for c in text) or text.startswith("="):
        raise ValueError(f"'{text}' is not one kernel parameter (name or name=value)")
    token = Token.from_raw(text)
    try:
        Token.build(token.name, token.value)
    except PvefixError as exc:
        raise ValueError(exc.message) from None
    return token.name, token.value


class CmdlineRules(_Strict):
    """Kernel parameters that must be on a command line, and ones that must not be."""

    required: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()

    @field_validator("required", "forbidden")
    @classmethod
    def _parameters(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            parameter(value)
        if len(set(values)) != len(values):
            raise ValueError("a parameter is listed twice")
        return values

    @model_validator(mode="after")
    def _disjoint(self) -> CmdlineRules:
        both = sorted(set(self.required) & set(self.forbidden))
        if both:
            raise ValueError(f"required and forbidden at once: {', '.join(both)}")
        return self

    @property
    def empty(self) -> bool:
        return not self.required and not self.forbidden


class NodeDesired(_Strict):
    """What must hold on one node: its host kernel cmdline (configured and booted)."""

    cmdline: CmdlineRules = Field(default_factory=CmdlineRules)


class MachineRule(_Strict):
    """The VM's machine: a family (`q35` matches `q35`, `pc-q35-9.2+pve0`, ...) or an exact
    value (sub-option order does not matter)."""

    family: Family | None = None
    exact: str | None = None

    @field_validator("exact")
    @classmethod
    def _valid_machine(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                Machine.parse(value)
            except PvefixError as exc:
                raise ValueError(exc.message) from None
            if not value.strip():
                raise ValueError("empty machine value (leave `exact` out instead)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MachineRule:
        if self.family is None and self.exact is None:
            raise ValueError("give `family` or `exact`")
        exact_family = None if self.exact is None else Machine.parse(self.exact).family
        if self.family is not None and exact_family not in (None, self.family):
            raise ValueError(f"exact '{self.exact}' is not of family {self.family}")
        return self

    @property
    def wanted_family(self) -> Family:
        if self.exact is not None:
            return Machine.parse(self.exact).family
        assert self.family is not None
        return self.family


class HostPciRule(_Strict):
    """Options one hostpciN entry must have (only those given are checked)."""

    mapping: str | None = None
    host: str | None = None
    pcie: bool | None = None
    x_vga: bool | None = Field(default=None, alias="x-vga")
    #: The vGPU type of a mediated-device entry (`mdev=`): such an entry turned into whole-GPU
    #: passthrough (which takes the GPU from every other VM's vGPU) is drift.
    mdev: str | None = None

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(f"{PCI_ID}(;{PCI_ID})*", value):
            raise ValueError(f"'{value}' is not a PCI id list ([dddd:]bb:ss[.f], ';'-joined)")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> HostPciRule:
        if self.mapping is not None and self.host is not None:
            raise ValueError("give `mapping` or `host`, not both")
        return self

    def fields(self) -> list[tuple[str, str]]:
        """(option, wanted value as text) for each option given, in a fixed order."""
        out: list[tuple[str, str]] = []
        if self.mapping is not None:
            out.append(("mapping", self.mapping))
        if self.host is not None:
            out.append(("host", self.host))
        if self.pcie is not None:
            out.append(("pcie", "1" if self.pcie else "0"))
        if self.x_vga is not None:
            out.append(("x-vga", "1" if self.x_vga else "0"))
        if self.mdev is not None:
            out.append(("mdev", self.mdev))
        return out


class P2PRule(_Strict):
    """Whether the VM wants the P2P clique phase (`[vms.VMID.p2p]`): `plan` and `apply` plan
    phase 3 for it without `--p2p` (a flag still overrides); `clique_map` is --clique-map's text.
    """

    wanted: bool = True
    clique_map: str | None = Field(default=None, description="hostpciN=C,... as --clique-map")

    @field_validator("clique_map")
    @classmethod
    def _clique_map(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from pvefix.planner.rules.p2p import parse_clique_map

        try:
            parsed = parse_clique_map(value)
        except PvefixError as exc:
            raise ValueError(exc.message.removeprefix("--clique-map: ")) from None
        if not parsed:
            raise ValueError("empty clique map (leave `clique_map` out instead)")
        return ",".join(f"{k}={v}" for k, v in parsed.items())

    @model_validator(mode="after")
    def _map_needs_p2p(self) -> P2PRule:
        if self.clique_map is not None and not self.wanted:
            raise ValueError("a clique_map with wanted = false (it says which GPUs share a"
                             " clique, so it needs wanted = true)")
        return self


class VmDesired(_Strict):
    """What must hold for one VM's config (and its guest)."""

    node: str | None = Field(default=None, description="where the VM was; a hint, not checked")
    closed: bool = False
    machine: MachineRule | None = None
    hostpci: dict[str, HostPciRule] = Field(default_factory=dict)
    keys: dict[str, str] = Field(default_factory=dict)
    absent: tuple[str, ...] = ()
    free: tuple[str, ...] = ()
    guest_cmdline: CmdlineRules | None = None
    p2p: P2PRule | None = None

    @field_validator("hostpci")
    @classmethod
    def _hostpci_keys(cls, value: dict[str, HostPciRule]) -> dict[str, HostPciRule]:
        for key in value:
            m = HOSTPCI_KEY.match(key)
            if not m or int(m.group(1)) >= MAX_HOSTPCI or m.group(1) != str(int(m.group(1))):
                raise ValueError(f"'{key}' is not a hostpci key (hostpci0..hostpci15)")
        return value

    @field_validator("keys", mode="before")
    @classmethod
    def _key_values(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out: dict[object, object] = {}
        for key, item in value.items():
            if isinstance(item, bool):
                item = "1" if item else "0"
            elif isinstance(item, int):
                item = str(item)
            out[key] = item
        return out

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not CONFIG_KEY.match(key):
                raise ValueError(f"'{key}' is not a VM config key")
            if key == "digest":
                raise ValueError("'digest' changes with every edit: it cannot be pinned")
            if not item.strip() or "\n" in item or item.strip() != item:
                raise ValueError(f"{key}: {item!r} cannot be a one-line config value")
            if key == "machine" or HOSTPCI_KEY.match(key):
                raise ValueError(f"{key}: use the `machine` / `hostpci` tables for it")
        return value

    @field_validator("absent")
    @classmethod
    def _absent(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            if not CONFIG_KEY.match(key):
                raise ValueError(f"'{key}' is not a VM config key")
        return value

    @field_validator("free")
    @classmethod
    def _free(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _check_patterns(value)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _no_overlap(cls, data: object, handler: ValidatorFunctionWrapHandler) -> VmDesired:
        """Pinned, absent and free keys do not overlap. Checked where a rule is validated: an
        instance is taken as it is (as pydantic takes its fields), so a fleet's shared rule
        (DesiredState._from_file) is checked once, not once per VM."""
        if isinstance(data, VmDesired):
            return data
        self: VmDesired = handler(data)
        pinned = set(self.keys) | set(self.hostpci) | ({"machine"} if self.machine else set())
        both = sorted(set(self.absent) & pinned)
        if both:
            raise ValueError(f"pinned and absent at once: {', '.join(both)}")
        free = _free_matcher(self.free)  # found once: a fleet's file has thousands of VMs
        free_pinned = sorted(k for k in pinned | set(self.absent) if free(k))
        if free_pinned:
            raise ValueError(f"pinned but also `free`: {', '.join(free_pinned)}")
        return self

    def is_free(self, key: str) -> bool:
        return _free_matcher(self.free)(key)

    def uncovered(self, keys: Iterable[str]) -> list[str]:
        """The keys among `keys` that the desired state says nothing about, in their order
        (the `free` list's matcher found once, not per key: a check asks for every key)."""
        free = _free_matcher(self.free)
        return [key for key in keys
                if key not in self.keys and key not in self.hostpci and key not in self.absent
                and not (key == "machine" and self.machine is not None) and not free(key)]


class VmDefaults(_Strict):
    """`[defaults]`: what every VM of the file has unless its own table says otherwise.

    A shorthand of the file, not of the state: it is applied while the file is read (a VM
    table without `free` gets this list) and the writer puts a list there when two or more
    VMs share it, so a fleet's file does not repeat it for every VM."""

    free: tuple[str, ...] = Field(
        default=(), description="the `free` list of every VM without one of its own")

    @field_validator("free")
    @classmethod
    def _free(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _check_patterns(value)
        return value


class DesiredState(_Strict):
    """A whole desired-state file: nodes by name, VMs by VMID."""

    schema_: Literal["pvefix.desired/v1"] = Field(default="pvefix.desired/v1", alias="schema")
    nodes: dict[str, NodeDesired] = Field(default_factory=dict)
    vms: dict[int, VmDesired] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: object) -> object:
        """A file's tables: `[defaults]` applied, and each distinct VM table validated once
        (a fleet's file repeats a few rules for thousands of VMs)."""
        if not isinstance(data, dict):
            return data
        if "defaults" in data:
            data = cls._defaults(data)
        vms = data.get("vms")
        if isinstance(vms, dict) and len(vms) > 1:
            data = {**data, "vms": _shared_rules(vms)}
        return data

    @classmethod
    def _defaults(cls, data: dict[str, object]) -> dict[str, object]:
        """Apply `[defaults]` to the VM tables read from a file (then drop it: each VM holds
        its own effective list, so the state means the same however it was written)."""
        data = dict(data)
        raw = data.pop("defaults")
        try:
            defaults = VmDefaults.model_validate(raw)
        except pydantic.ValidationError as exc:  # named where the file has it: defaults.free
            raise pydantic.ValidationError.from_exception_data(cls.__name__, [
                {"type": e["type"], "loc": ("defaults", *e["loc"]), "input": e["input"],
                 **({"ctx": e["ctx"]} if "ctx" in e else {})}  # type: ignore[typeddict-item]
                for e in exc.errors()]) from None
        vms = data.get("vms")
        if defaults.free and isinstance(vms, dict):
            data["vms"] = {vmid: {**vm, "free": defaults.free}
                           if isinstance(vm, dict) and "free" not in vm else vm
                           for vmid, vm in vms.items()}
        return data

    @field_validator("vms")
    @classmethod
    def _vmids(cls, value: dict[int, VmDesired]) -> dict[int, VmDesired]:
        for vmid in value:
            if not 100 <= vmid <= 999_999_999:
                raise ValueError(f"{vmid} is not a VMID (100..999999999)")
        return value

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, value: dict[str, NodeDesired]) -> dict[str, NodeDesired]:
        for name in value:
            if not re.fullmatch(r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?", name):
                raise ValueError(f"'{name}' is not a node name")
        return value

    def merged(self, other: DesiredState) -> DesiredState:
        """Both files' VMs and nodes; a node in both gets the union of its rules."""
        nodes = dict(self.nodes)
        for name, node in other.nodes.items():
            if name in nodes:
                mine = nodes[name].cmdline
                nodes[name] = NodeDesired(cmdline=CmdlineRules(
                    required=_union(mine.required, node.cmdline.required),
                    forbidden=_union(mine.forbidden, node.cmdline.forbidden),
                ))
            else:
                nodes[name] = node
        return DesiredState(nodes=nodes, vms={**self.vms, **other.vms})


def _shared_rules(vms: dict[object, object]) -> dict[object, object]:
    """Each VM table that validates, replaced by one frozen VmDesired per distinct table (the
    model takes an instance as it is); one that does not stays as it was, so the error is
    reported where the file has it, as before.

    Tables are told apart by their repr, exact for what TOML yields (`1`, `1.0`, `true` and
    `"1"` differ; order kept), and a hit must also be equal to the table validated."""
    rules: dict[str, tuple[object, VmDesired | None]] = {}
    out: dict[object, object] = {}
    for vmid, table in vms.items():
        out[vmid] = table
        if not isinstance(table, dict):
            continue
        key = repr(table)
        seen = rules.get(key)
        if seen is None or seen[0] != table:
            try:
                seen = (table, VmDesired.model_validate(table))
            except pydantic.ValidationError:
                seen = (table, None)
            rules[key] = seen
        if seen[1] is not None:
            out[vmid] = seen[1]
    return out


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*a, *b]))
