"""Derive a desired state from a HostState: what holds now (after [PENDING]) is what must hold.

`goal_state(state, plan)` is the state the plan reaches once every phase is applied (the VM
config after all phases, the host files it writes, the guest cmdline it sets): `pvefix desired`
derives from it by default, so CI guards the fix, not the misconfiguration it replaces.

- the VM: its machine family, each hostpciN's source (mapping or host), pcie / x-vga and a
  vGPU's `mdev` type (an entry turned into whole-GPU passthrough is drift), the
  exact value of every other key except the ones that change in normal operation (`FREE`:
  name, memory, disks, NICs, ...), and `closed = true` so a new key (an `args:` line, a ninth
  hostpci) is drift;
- its node: the passthrough-relevant kernel parameters of the configured cmdline (iommu,
  pci=, vfio, ACS override, ...) as required, the IOMMU-off forms (`iommu=off`,
  `amd_iommu=off`, `intel_iommu=off`) as forbidden and never required, and on AMD hosts
  `amd_iommu=on` as forbidden when it is not there (it is not a valid value; DOMAIN.md
  section 6);
- the guest: the same kind of parameters, when the state holds the guest cmdline.

The config after [PENDING] and the configured (not the booted) cmdline are used: apply records
where it is going, and a check right after apply says what still waits for a restart.
"""

from __future__ import annotations

from pvefix.cmdline import Cmdline
from pvefix.cmdline.iommu import off_tokens
from pvefix.cmdline.relevant import relevant_parameters
from pvefix.desired.model import (
    CmdlineRules,
    DesiredState,
    HostPciRule,
    MachineRule,
    NodeDesired,
    P2PRule,
    VmDesired,
)
from pvefix.errors import PvefixError
from pvefix.observed import ObservedVm, node_from_state, vm_from_state
from pvefix.planner.model import Plan, PlanOptions
from pvefix.state import FileFact, HostState
from pvefix.vmconfig import HostPci, Machine
from pvefix.vmconfig.hostpci import HOSTPCI_KEY

FREE: tuple[str, ...] = (
    "agent", "balloon", "boot", "bootdisk", "ci*", "cores", "cpulimit", "cpuunits",
    "description", "efidisk[0-9]*", "ide[0-9]*", "ipconfig[0-9]*", "memory", "meta", "name",
    "nameserver", "net[0-9]*", "onboot", "parent", "protection", "sata[0-9]*",
    "scsi[0-9]*", "searchdomain", "shares", "smbios1", "snaptime", "sockets", "sshkeys",
    "startup", "tags", "tpmstate[0-9]*", "unused[0-9]*", "vcpus", "virtio[0-9]*", "vmgenid",
)

# The IOMMU-off forms a desired state forbids on every host (arch/x86/kernel/pci-dma.c
# iommu_setup, drivers/iommu/amd/init.c, drivers/iommu/intel/iommu.c).
OFF_FORBIDDEN = ("iommu=off", "amd_iommu=off", "intel_iommu=off")


def _is_amd(state: HostState) -> bool:
    return "amd" in (state.node.cpu_vendor or "").lower()


def node_desired(state: HostState) -> NodeDesired | None:
    """The node's cmdline rules, or None when the configured cmdline cannot be read."""
    node = node_from_state(state)
    configured = node.configured_cmdline()
    if configured is None:
        return None
    # A token that leaves the host without an IOMMU is never what must hold (cmdline/iommu.py
    # off_tokens reads them as the kernel does): it is left out of `required`, and the plain
    # forms are forbidden, so `check` reports a host configured or booted with one as drift.
    off = {f"{t.name}={t.value}" for t in off_tokens(configured, None)}
    required = tuple(p for p in relevant_parameters(configured) if p not in off)
    forbidden: tuple[str, ...] = OFF_FORBIDDEN
    if _is_amd(state) and not configured.has("amd_iommu", "on"):
        forbidden = ("amd_iommu=on", *forbidden)
    return NodeDesired(cmdline=CmdlineRules(required=required, forbidden=forbidden))


def p2p_rule(options: PlanOptions) -> P2PRule | None:
    """What a desired state records of the P2P request the plan was made with: wanted (with
    the clique map used, if any) when P2P was on; not wanted when a flag turned it off (the
    admin's word for this VM); nothing when nobody said anything."""
    if options.p2p:
        cliques = ",".join(f"{k}={v}" for k, v in options.clique_map.items())
        return P2PRule(wanted=True, clique_map=cliques or None)
    if options.p2p_from is not None and options.p2p_from.startswith("flag"):
        return P2PRule(wanted=False)
    return None


def vm_desired(state: HostState, p2p: P2PRule | None = None) -> VmDesired:
    """The VM's rules from its config after [PENDING] (and the P2P request, if any)."""
    return vm_rules(vm_from_state(state), p2p)


def vm_rules(observed: ObservedVm, p2p: P2PRule | None = None) -> VmDesired:
    """The rules of one observed VM (its config after [PENDING], its guest cmdline, the P2P
    request if any)."""
    config = observed.next
    probe = VmDesired(free=FREE)
    machine: MachineRule | None = None
    try:
        machine = MachineRule(family=Machine.parse(config.get("machine")).family)
    except PvefixError:
        machine = None  # an invalid machine line is pinned as an exact key below
    hostpci: dict[str, HostPciRule] = {}
    keys: dict[str, str] = {}
    for key, value in sorted(config.items()):
        if probe.is_free(key) or key in ("lock", "digest"):
            continue
        if key == "machine" and machine is not None:
            continue
        if HOSTPCI_KEY.match(key):
            try:
                entry = HostPci.parse(value, key)
            except PvefixError:
                continue  # unparsable: `closed` reports it if it stays
            hostpci[key] = HostPciRule(
                mapping=entry.mapping,
                host=";".join(entry.hosts) if entry.hosts else None,
                pcie=entry.pcie,
                x_vga=entry.x_vga,
                mdev=entry.mdev,
            )
            continue
        if value.strip() == value and value and "\n" not in value:
            keys[key] = value
    guest = None
    if observed.guest_cmdline is not None:
        guest = CmdlineRules(required=relevant_parameters(Cmdline.parse(observed.guest_cmdline)))
    return VmDesired(
        node=observed.node, closed=True, machine=machine, hostpci=hostpci, keys=keys,
        free=FREE, guest_cmdline=guest, p2p=p2p,
    )


def desired_from_state(state: HostState, p2p: P2PRule | None = None) -> DesiredState:
    """The desired state that holds for `state` (its VM, and its node when readable); `p2p`:
    whether the VM wants the P2P phase (`p2p_rule`)."""
    nodes: dict[str, NodeDesired] = {}
    # The host files describe the node pvefix read them on; attach them only when that is the
    # VM's own node (a bundle of a cluster holds the files of its local node only).
    node = node_desired(state) if state.node.name == state.vm.node else None
    if node is not None:
        nodes[state.node.name] = node
    return DesiredState(nodes=nodes, vms={state.vm.vmid: vm_desired(state, p2p)})


def goal_state(state: HostState, plan: Plan) -> HostState:
    """`state` as it will be once every phase of `plan` is applied: the VM config after all
    phases (pending merged), the host files the plan writes, the guest cmdline it sets."""
    files = dict(state.files)
    for path, text in plan.host_files_after.items():
        files[path] = FileFact.of(path, text)
    guest = state.guest
    guest_after = [c.after for p in plan.phases for c in p.changes
                   if c.target == "guest-cmdline" and c.after is not None]
    if guest is not None and guest_after:
        guest = guest.model_copy(update={"cmdline": guest_after[-1]})
    vm = state.vm.model_copy(update={"config_text": plan.config_after})
    return state.model_copy(update={"files": files, "vm": vm, "guest": guest})
