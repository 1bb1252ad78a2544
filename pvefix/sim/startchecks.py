"""Whether Proxmox would start a VM config: the checks of qemu-server's config_to_command and
vm_start that the simulator models (Machine.pm, PCI.pm), in their order, with their messages.
Cross-checked with Proxmox's own code in tests/conformance/test_sim_start_verdicts.py."""

from __future__ import annotations

from pvefix.cmdline.iommu import IOMMU_NOT_PRESENT, iommu_enabled
from pvefix.cmdline.tokens import Cmdline
from pvefix.errors import PvefixError, ValidationError
from pvefix.facts.parse import kernel_config_text
from pvefix.hosttree.sysfs import PciDevice
from pvefix.paths import PROC_CMDLINE, kernel_config
from pvefix.planner import mmio
from pvefix.sim.confschema import machine_rule_error
from pvefix.sim.errors import die
from pvefix.sim.machines import version_error
from pvefix.sim.state import NodeState
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, HostPci
from pvefix.vmconfig.igd import IgdEntry, legacy_igd_error
from pvefix.vmconfig.machine import Machine
from pvefix.vmconfig.schema import parse_bool

PCI_PM_LINE = 510  # where PCI.pm dies without a newline (Perl appends " at FILE line N.")


def candidates(state: NodeState, dev: HostPci) -> list[list[str]]:
    """The alternatives of one hostpci entry (each a list of full addresses), as PCI.pm's
    parse_hostpci_devices lists them: one for raw host=, one per map entry of this node."""
    if dev.mapping:
        mappings = state.tree.pci_mappings()
        mapping = mappings.get(dev.mapping) if mappings else None
        entries = mapping.for_node(state.node) if mapping else []
        return [_functions(state, [_full(p) for p in e.paths]) for e in entries]
    return [_functions(state, [_full(h) for h in dev.hosts])]


def _functions(state: NodeState, addresses: list[str]) -> list[str]:
    """A slot (`0000:16:00`) stands for all its functions, as parse_hostpci expands it from
    the host's devices; an address with a function stays as it is."""
    out: list[str] = []
    for addr in addresses:
        if addr.count(".") == 0:
            found = sorted(d.address for d in state.tree.pci_devices()
                           if d.address.startswith(addr + "."))
            out.extend(found or [addr])
        else:
            out.append(addr)
    return out


def _full(address: str) -> str:
    return address if address.count(":") == 2 else f"0000:{address}"


def choose_per_entry(state: NodeState, vmid: int, cfg: VMConfig, used: dict[str, int],
                     strict: bool) -> dict[str, list[str]]:
    """hostpciN -> the addresses it takes, picked as choose_hostpci_devices does: a single
    alternative as is, else the first one no running VM (nor an earlier entry) holds. `strict`
    raises Proxmox's errors; otherwise conflicts are skipped (for VMs already running)."""
    taken: dict[str, int] = {}
    out: dict[str, list[str]] = {}
    for key in sorted(cfg.main.keys(), key=lambda k: (len(k), k)):
        if not HOSTPCI_KEY.match(key):
            continue
        try:
            dev = HostPci.parse(cfg.main.get(key) or "", key)
        except ValidationError:
            continue
        alternatives = candidates(state, dev)
        if len(alternatives) == 1:
            for addr in alternatives[0]:
                if strict and addr in taken:  # an earlier entry of this VM has it
                    raise die(f"device '{addr}' assigned more than once")
                holder = used.get(addr)
                if strict and holder is not None and holder != vmid:
                    raise die(f"PCI device '{addr}' already in use by VMID '{holder}'")
            pick: list[str] | None = alternatives[0]
        else:
            pick = next((alt for alt in alternatives
                         if not any(a in used or a in taken for a in alt)), None)
            if pick is None and strict and alternatives:
                raise die(f"could not find a free device for '{key}'")
        if pick is not None:
            out[key] = pick
            taken.update(dict.fromkeys(pick, vmid))
    return out


def _choose(state: NodeState, vmid: int, cfg: VMConfig, used: dict[str, int],
            strict: bool) -> dict[str, int]:
    """The addresses this VM takes (address -> vmid)."""
    chosen = choose_per_entry(state, vmid, cfg, used, strict)
    return {addr: vmid for pick in chosen.values() for addr in pick}


def reserved_by_others(state: NodeState, vmid: int) -> dict[str, int]:
    """PCI addresses held by the other running VMs of this node."""
    used: dict[str, int] = {}
    for other, node in sorted(state.vms().items()):
        if other == vmid or node != state.node or state.run_state(other).status != "running":
            continue
        try:
            other_cfg = state.load(other).parse()
        except (PvefixError, OSError):
            continue
        used.update(_choose(state, other, other_cfg, used, strict=False))
    return used


def _lspci(devices: list[str], address: str) -> list[str] | None:
    """SysFSTools::lspci: the functions an id names (`01:00` is every function of the slot);
    None when the tree has no PCI inventory to ask."""
    if not devices:
        return None
    full = _full(address)
    if full.count(".") == 0:
        return [d for d in devices if d.rsplit(".", 1)[0] == full]
    return [d for d in devices if d == full]


def _entry_checks(state: NodeState, dev: HostPci, inventory: list[PciDevice]) -> int:
    """PCI.pm parse_hostpci for one entry: its own errors, in Proxmox's order. Returns the
    most functions an alternative passes (`has-multifunction` when > 1)."""
    for problem in dev.start_errors():
        raise die(problem)
    alternatives = candidates(state, dev)
    if dev.mapping and not alternatives:
        raise die(f"PCI device mapping not found for '{dev.mapping}'")
    if dev.mapping:
        _mapping_groups(state, dev.mapping, inventory)
    devices = [d.address for d in inventory]
    functions = 0
    for alt in alternatives:
        names = dev.hosts or alt  # the ids as the config or the mapping writes them
        count = 0
        for name in names:
            found = _lspci(devices, name)
            if found is None:
                count += 1
                continue
            if not found:
                raise die(f"no PCI device found for '{name}'")
            count += len(found)
        if count > 1 and dev.mdev:  # PCI.pm parse_hostpci, for each alternative
            raise die("cannot use mediated device with multifunction device")
        functions = max(functions, count)
    return functions


def _mapping_groups(state: NodeState, name: str, inventory: list[PciDevice]) -> None:
    """PCI.pm parse_hostpci -> PVE::Mapping::PCI::assert_valid, for the one property the
    host's IOMMU decides: each map entry of this node names its first device's IOMMU group
    (`iommugroup`), and a host without an IOMMU has none. The other properties (id,
    subsystem-id, mdev) are not modelled. The message ends in a space: Perl's die keeps the
    inner newline, and the task's exit status turns it into one."""
    mappings = state.tree.pci_mappings()
    mapping = mappings.get(name) if mappings else None
    by_address = {d.address: d for d in inventory}
    for entry in mapping.for_node(state.node) if mapping else []:
        path = entry.paths[0] if not entry.multifunction else f"{entry.paths[0]}.0"
        device = by_address.get(_full(path))
        if device is None:
            continue
        expected, configured = device.iommu_group, entry.iommugroup
        problem = None
        if expected is not None and configured is None:
            problem = f"missing expected property 'iommugroup' for device '{path}'"
        elif expected is None and configured is not None:
            problem = f"unexpected property 'iommugroup' configured for device '{path}'"
        elif expected != configured:
            problem = f"'iommugroup' does not match for '{name}' ({expected} != {configured})"
        if problem:
            raise die(f"PCI device mapping invalid (hardware probably changed): {problem} ")


def start_checks(state: NodeState, cfg: VMConfig, vmid: int | None = None) -> None:
    """What config_to_command refuses: the machine (Machine.pm), then each hostpci entry in
    PCI.pm's order (parse_hostpci, then parse_hostpci_devices' q35 and legacy IGD rules), then
    the devices another running VM holds (choose_hostpci_devices, reserve_pci_usage).

    An entry the file parser cannot read is dropped by Proxmox's parser (a warning, no
    device), so it does not stop the start."""
    main = cfg.main
    problem = machine_rule_error(main.get("machine") or "")
    if problem:
        raise die(problem)
    problem = version_error(main.get("machine"), state.tree.meta.versions.qemu,
                            main.get("ostype"), main.get("meta"), state.node)
    if problem:
        raise die(problem)
    _memory_checks(state, cfg)
    q35 = Machine.parse(main.get("machine")).is_q35
    legacy = False
    names = main.keys()
    keys = sorted((k for k in names if HOSTPCI_KEY.match(k)), key=lambda k: (len(k), k))
    inventory = state.tree.pci_devices() if keys else []  # read once
    passed = 0
    for key in keys:
        try:
            dev = HostPci.parse(main.get(key) or "", key)
        except ValidationError:
            continue
        passed += 1
        functions = _entry_checks(state, dev, inventory)
        if dev.pcie and not q35:
            raise die(
                "q35 machine model is not enabled at /usr/share/perl5/PVE/QemuServer/PCI.pm"
                f" line {PCI_PM_LINE}."
            )
        if dev.legacy_igd:
            alternatives = candidates(state, dev)
            first = next((a[0] for a in alternatives if a), "")
            problem = legacy_igd_error(IgdEntry(dev, functions, len(alternatives), first),
                                       main.get("vga"), q35, legacy)
            legacy = True
            if problem:
                raise die(problem)
    if vmid is not None:
        _choose(state, vmid, cfg, reserved_by_others(state, vmid), strict=True)
    if passed and not iommu_present(state, inventory):
        # vm_start_nolock -> PCI.pm prepare_pci_device, after the command line is built
        raise die(IOMMU_NOT_PRESENT)


def _memory_checks(state: NodeState, cfg: VMConfig) -> None:
    """Memory.pm's refusals as config_to_command meets them (hotplug memory that is not a
    whole number of DIMMs, less than the static part), through the builder the rehearsal and
    `qm showcmd` use."""
    from pvefix.rehearse.command import ProxmoxRefuses, memory_hotplug
    from pvefix.sim.qemu_cmdline import start_parts

    if not memory_hotplug(cfg.main.as_dict()):
        return  # plain `-m MEMORY`: Memory.pm refuses nothing
    meta = state.tree.meta
    prefix = "Proxmox refuses to start this config: "
    try:
        start_parts(cfg, meta.versions.qemu, meta.cpu.phys_bits, meta.cpu.vendor)
    except ProxmoxRefuses as exc:
        if exc.message.startswith(prefix):  # Memory.pm's; a CPU model not read is not one
            raise die(exc.message.removeprefix(prefix)) from None


def iommu_present(state: NodeState, inventory: list[PciDevice]) -> bool:
    """PVE::SysFSTools::check_iommu_support: /sys/class/iommu holds an entry. A host booted
    with a command line that turns the IOMMU off has none (cmdline/iommu.py reads it as the
    kernel does: `iommu=off` anywhere, the AMD or Intel off, the Intel build default from the
    tree's boot/config when it has one); a tree without a sys/class/iommu folder stands for it
    with its devices' IOMMU groups (a kernel without an IOMMU puts no device in a group)."""
    meta = state.tree.meta
    vendor = meta.cpu.vendor.lower()
    booted = Cmdline.parse(state.read_host(PROC_CMDLINE) or "")
    kver = meta.versions.kernel
    config_text = state.read_host(kernel_config(kver)) if kver else None
    config = kernel_config_text(config_text) if config_text is not None else None
    if not iommu_enabled(booted, "amd" if "amd" in vendor else "intel" if "intel" in vendor
                         else None, kver, config):
        return False
    folder = state.tree.root / "sys" / "class" / "iommu"
    if folder.is_dir():
        return any(not entry.name.startswith(".") for entry in folder.iterdir())
    return not inventory or any(d.iommu_group is not None for d in inventory)


def start_warnings(cfg: VMConfig) -> list[str]:
    """The WARN: lines qemu-server's config_to_command prints for a start (the ones the
    simulator models): an OVMF VM without an EFI disk (QemuServer.pm), and OVMF's possible
    40-bit cap for qemu64/kvm64 models with phys-bits above 40 and no +pdpe1gb (CPUConfig.pm
    check_phys_bits_above_40_compat)."""
    main = cfg.main
    out: list[str] = []
    if main.get("bios") == "ovmf" and not main.get("efidisk0"):
        out.append("no efidisk configured! Using temporary efivars disk.")
    cpu = mmio.read_cpu(main.get("cpu"))
    phys = cpu.phys or ""
    above_40 = phys == "host" or (phys.isdigit() and int(phys) > 40)
    if main.get("bios") == "ovmf" and cpu.qemu64_family and above_40 and cpu.flag("pdpe1gb") != "+":
        out.append("OVMF firmware might limit CPU 'phys-bits' to 40 - enable the 'pdpe1gb' CPU"
                   " flag to avoid this")
    if _needs_2023_certs(main.get("efidisk0"), main.get("template")):
        out.append("EFI disk without 'ms-cert=2023k' option, suggesting that not all UEFI 2023\n"
                   "certificates from Microsoft are enrolled yet.")
    return out


def _needs_2023_certs(efidisk: str | None, template: str | None) -> bool:
    """qemu-server's check_efi_vars (>= 9.2): an EFI disk with pre-enrolled keys but without
    Microsoft's 2023 certificates (`ms-cert=2023k`) warns at each start (templates do not)."""
    if not efidisk or parse_bool(template or "0"):
        return False
    opts = dict(item.partition("=")[::2] for item in efidisk.split(",")[1:])
    return bool(parse_bool(opts.get("pre-enrolled-keys", "0") or "0")) and (
        opts.get("ms-cert") != "2023k"
    )
