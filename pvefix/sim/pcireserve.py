"""What a VM start decides about other VMs: PCI devices held by a running VM.

qemu-server reserves each passed-through PCI device for the VM that starts with it
(PVE::QemuServer::PCI::reserve_pci_usage); a device reserved by a VM that is still running
makes the start die with `PCI device '0000:01:00.0' already in use by VMID '101'`. A mapping
with several devices for the node takes the first one that is free.
"""

from __future__ import annotations

from pvefix.errors import ValidationError
from pvefix.sim.errors import die
from pvefix.sim.state import NodeState
from pvefix.vmconfig.config import Section, VMConfig
from pvefix.vmconfig.hostpci import HOSTPCI_KEY, HostPci


def _full(address: str) -> str:
    return address if address.count(":") == 2 else f"0000:{address}"


def _choices(state: NodeState, main: Section) -> list[tuple[str, list[str]]]:
    """(key, candidate device addresses) for each hostpciN of a config section."""
    mappings = state.tree.pci_mappings()
    out: list[tuple[str, list[str]]] = []
    for key in sorted(main.keys(), key=lambda k: (len(k), k)):
        if not HOSTPCI_KEY.match(key):
            continue
        try:
            dev = HostPci.parse(main.get(key) or "", key)
        except ValidationError:
            continue
        if dev.hosts:
            out.append((key, [_full(h) for h in dev.hosts]))
            continue
        mapping = mappings.get(dev.mapping or "") if mappings is not None else None
        if mapping is not None:
            paths = [_full(p) for e in mapping.for_node(state.node) for p in e.paths[:1]]
            out.append((key, paths))
    return out


def held_devices(state: NodeState, vmid: int) -> set[str]:
    """The devices a running VM of this node holds (what its start reserved)."""
    held: set[str] = set()
    cfg = state.load(vmid).parse()
    taken: set[str] = set()
    for _, candidates in _choices(state, cfg.main):
        free = [c for c in candidates if c not in taken]
        if len(candidates) > 1 and free:
            taken.add(free[0])  # a mapping: the first free device
        else:
            taken.update(candidates)
    held |= taken
    return held


def reserve_devices(state: NodeState, vmid: int, cfg: VMConfig) -> None:
    """Die as reserve_pci_usage does when a device the VM needs is held by a running VM."""
    holders: dict[str, int] = {}
    for other, node in state.vms().items():
        if other == vmid or node != state.node or state.run_state(other).status != "running":
            continue
        for address in held_devices(state, other):
            holders[address] = other
    taken: set[str] = set()
    for _, candidates in _choices(state, cfg.main):
        if len(candidates) > 1:
            free = [c for c in candidates if c not in holders and c not in taken]
            if free:
                taken.add(free[0])
                continue
        for address in candidates:
            if address in holders:
                raise die(f"PCI device '{address}' already in use by VMID '{holders[address]}'")
            taken.add(address)
