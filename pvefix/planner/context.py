"""Facts the rules share, derived once from a HostState (pure: no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pvefix.errors import PvefixError
from pvefix.hosttree.sysfs import PciDevice
from pvefix.paths import CPU_MODELS
from pvefix.planner.model import PlanOptions
from pvefix.state import HostState
from pvefix.vmconfig import HostPci, Machine, VMConfig
from pvefix.vmconfig.cpu_models import CpuModel, parse_cpu_models
from pvefix.vmconfig.hostpci import HOSTPCI_KEY
from pvefix.vmconfig.nextstart import NextStart
from pvefix.vmconfig.schema import WINDOWS_OSTYPES

NVIDIA = "0x10de"
LINUX_OSTYPES = frozenset({"l24", "l26"})


def full_address(pci_id: str) -> str:
    """`41:00.0` -> `0000:41:00.0` (Proxmox assumes domain 0000 when none is given)."""
    return pci_id if pci_id.count(":") == 2 else f"0000:{pci_id}"


@dataclass(frozen=True)
class Passed:
    """One hostpciN entry and the host functions it passes (as far as the facts tell).

    A raw `host=` entry passes every function it names (all of a slot for `BB:DD`). A `mapping=`
    entry passes ONE device of the mapping, picked among the free ones when the VM starts
    (qemu-server PCI.pm choose_hostpci_devices): `devices` then holds the candidates, and
    `is_pool` is true. Counts and sizes go by entries; an entry is sized by its largest
    candidate (`sized`).
    """

    key: str
    entry: HostPci
    addresses: tuple[str, ...]
    devices: tuple[PciDevice, ...]
    problem: str | None = None
    # PCI.pm parse_hostpci's alternatives: one for a raw entry, one per map entry of the VM's
    # node; each its function addresses (a slot as the functions read of it, else as written)
    alternatives: tuple[tuple[str, ...], ...] = ()

    @property
    def is_pool(self) -> bool:
        """A mapping entry: one of `devices` is passed, chosen at start."""
        return self.entry.mapping is not None

    @property
    def unknown(self) -> bool:
        """The entry names devices, but none of them is in the facts read (another host?)."""
        return not self.devices

    @property
    def is_gpu(self) -> bool:
        """A whole GPU: a display-class function (VGA or 3D controller) behind this entry,
        passed as a PCI device (not a vGPU: `is_vgpu`)."""
        return not self.is_vgpu and any(d.is_display for d in self.devices)

    @property
    def is_vgpu(self) -> bool:
        """A mediated device (`mdev=`): a vGPU of the device, which Proxmox never binds to
        vfio-pci as a whole (qemu-server PCI.pm prepare_pci_device creates the mdev on the
        parent instead of pci_dev_group_bind_to_vfio), with the vGPU's own BARs and no PCIe
        P2P (NVIDIA's vGPU documentation)."""
        return self.entry.mdev is not None

    @property
    def gpu_candidates(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.is_display)

    @property
    def sized(self) -> tuple[PciDevice, ...]:
        """The functions whose BARs this entry brings into the guest, sized pessimistically:
        every function of a raw entry; for a mapping pool, its candidate with the most 64-bit
        BAR space (whichever device the start picks, it needs no more than that)."""
        if not self.is_pool:
            return self.devices
        if not self.devices:
            return ()
        return (max(self.devices, key=lambda d: (bar64_total(d), d.address)),)


def bar64_total(device: PciDevice) -> int:
    return sum(b.size for b in device.bars if b.is_64bit and not b.is_io)


@dataclass
class Context:
    state: HostState
    cfg: VMConfig
    machine: Machine
    machine_error: str | None
    ostype: str
    next: NextStart
    passed: list[Passed] = field(default_factory=list)
    options: PlanOptions = field(default_factory=PlanOptions)

    def value(self, key: str) -> str | None:
        """What `key` holds at the VM's next cold start ([PENDING] applied): what rules
        decide from."""
        return self.next.value(key)

    @property
    def values(self) -> dict[str, str]:
        """Every key at the VM's next cold start."""
        return self.next.values

    @property
    def args_cpu(self) -> str | None:
        """args' last -cpu as written (QEMU keeps the last: it is the VM's CPU), or None."""
        from pvefix.planner.effective_cpu import args_cpu_raw

        return args_cpu_raw(self.value("args"))

    @property
    def cpu(self) -> str | None:
        """The CPU the VM runs at its next start, as a cpu line: args' -cpu read back when
        args has one (None too when pvefix cannot read it: `args_cpu` tells them apart), else
        the `cpu` value. Verdicts on the vCPU read this, never `value("cpu")`."""
        from pvefix.planner.effective_cpu import as_cpu_line

        raw = self.args_cpu
        return self.value("cpu") if raw is None else as_cpu_line(raw)

    @property
    def is_template(self) -> bool:
        """The VM is a template (the config now, or after [PENDING]): never started."""
        from pvefix.closedworld.vm_states import is_template

        return is_template(self.cfg.main.get("template")) or is_template(self.value("template"))

    @property
    def running(self) -> bool:
        return self.state.vm.status == "running"

    @property
    def is_windows(self) -> bool:
        return self.ostype in WINDOWS_OSTYPES

    @property
    def is_linux(self) -> bool:
        """ostype l24/l26, or a Linux /proc/cmdline was read in the guest."""
        guest = self.state.guest
        return self.ostype in LINUX_OSTYPES or bool(guest and guest.cmdline is not None)

    @property
    def os_unknown(self) -> bool:
        """ostype other/absent/solaris with nothing read in the guest: pvefix does not guess."""
        return not self.is_linux and not self.is_windows

    @property
    def cpu_models(self) -> dict[str, CpuModel] | None:
        """The cluster's custom CPU models (cpu-models.conf); None when the file was not read
        or is absent (then no `custom-*` model is known)."""
        text = self.state.file(CPU_MODELS).text
        return parse_cpu_models(text) if text is not None else None

    @property
    def gpu_entries(self) -> list[Passed]:
        return [p for p in self.passed if p.is_gpu]

    @property
    def unknown_entries(self) -> list[Passed]:
        """Entries whose devices are not in the facts read (not 'no GPU': unknown here)."""
        return [p for p in self.passed if p.unknown]

    def no_gpu_reason(self, suffix: str = "") -> str:
        """Why a GPU rule has nothing to do: no entries, or entries whose devices are unknown
        here (never "no GPU" for those: pvefix cannot tell)."""
        unknown = self.unknown_entries
        if unknown:
            keys = ", ".join(p.key for p in unknown)
            return (
                f"the devices of {keys} are not in the facts read here: whether they are GPUs is"
                f" unknown (read node {self.state.vm.node}'s own facts)"
            )
        if not self.passed:
            return "no hostpci entries" + suffix
        if self.vgpu_entries:
            return "no whole GPU is passed through (vGPU entries, mdev=, are not)" + suffix
        return "no GPU is passed through" + suffix

    @property
    def vgpu_entries(self) -> list[Passed]:
        return [p for p in self.passed if p.is_vgpu]

    @property
    def gpus(self) -> list[PciDevice]:
        seen: dict[str, PciDevice] = {}
        for p in self.gpu_entries:
            for d in p.devices:
                if d.is_display:
                    seen.setdefault(d.address, d)
        return list(seen.values())


def _resolve(state: HostState, key: str, entry: HostPci) -> Passed:
    # The PCI facts read are those of the node read: a VM of another node (a cluster bundle
    # holds every node's configs) has none of its devices here, whatever addresses match.
    other_node = bool(state.node.name) and state.node.name != state.vm.node
    devices = {} if other_node else {d.address: d for d in state.pci_devices}
    alternatives: list[list[str]] = []
    problem = None
    if entry.mapping:
        mapping = state.mapping(entry.mapping)
        if mapping is None:
            problem = f"PCI mapping '{entry.mapping}' not found"
        else:
            alternatives = [[full_address(p) for p in m.paths]
                            for m in mapping.for_node(state.vm.node)]
            if not alternatives:
                problem = f"PCI mapping '{entry.mapping}' has no device on node {state.vm.node}"
    else:
        alternatives = [[full_address(h) for h in entry.hosts]]
    addresses = [a for alt in alternatives for a in alt]
    found = [d for alt in alternatives for d in _functions(alt, devices)]
    if problem is None and devices:  # a node's inventory read: Proxmox's lspci finds none
        missing = next((a for alt in alternatives for a in alt
                        if not _functions([a], devices)), None)
        if missing is not None:
            problem = f"no PCI device found for '{missing}'"
    if problem is None and entry.mdev and any(
            len(alt) > 1 or len(_functions(alt, devices)) > 1 for alt in alternatives):
        # PCI.pm parse_hostpci: an alternative of more than one function (several ids, or a
        # slot with several functions) dies before the start, whatever mdev type it names.
        problem = "cannot use mediated device with multifunction device"
    expanded = tuple(_expanded(alt, devices) for alt in alternatives)
    return Passed(key, entry, tuple(addresses), tuple(found), problem, expanded)


def _expanded(addresses: list[str], devices: dict[str, PciDevice]) -> tuple[str, ...]:
    """An alternative's function addresses: a slot's functions as read, else the id itself."""
    out: list[str] = []
    for addr in addresses:
        slot = [d.address for d in _functions([addr], devices)] if "." not in addr else []
        out.extend(slot or [addr])
    return tuple(out)


def _functions(addresses: list[str], devices: dict[str, PciDevice]) -> list[PciDevice]:
    """The host functions ids name, as SysFSTools::lspci finds them (`BB:DD`: the slot's)."""
    found: list[PciDevice] = []
    for addr in addresses:
        if addr.count(".") == 0:  # all functions of a slot
            found.extend(d for a, d in sorted(devices.items()) if a.startswith(addr + "."))
        elif addr in devices:
            found.append(devices[addr])
    return found


def build_context(state: HostState, options: PlanOptions | None = None) -> Context:
    cfg = VMConfig.parse(state.vm.config_text, f"{state.vm.vmid}.conf")
    nxt = NextStart.from_config(cfg, state.vm.digest)
    machine_error = None
    try:
        machine = Machine.parse(nxt.value("machine"))
    except PvefixError as exc:
        machine, machine_error = Machine.parse(None), exc.message
    ctx = Context(state, cfg, machine, machine_error, nxt.value("ostype") or "other", nxt,
                  options=options or PlanOptions())
    for key, value in sorted(nxt.values.items(), key=lambda kv: _index(kv[0])):
        if not HOSTPCI_KEY.match(key):
            continue
        try:
            entry = HostPci.parse(value, key)
        except PvefixError:
            continue  # reported by the config rule
        ctx.passed.append(_resolve(state, key, entry))
    return ctx


def _index(key: str) -> tuple[int, str]:
    m = HOSTPCI_KEY.match(key)
    return (int(m.group(1)), key) if m else (-1, key)
