"""Closed world: every VM config key and `hostpciN` sub-option of qemu-server's schema, classified.

The keys are `json_config_properties()` of qemu-server (src/PVE/QemuServer.pm `$confdesc`; the
simulator's capture pvefix/sim/confdesc.json), numbered families as `hostpciN`, plus the keys a
config file holds that the schema leaves out (`parent`, `snaptime`, `vmstate`, `runningmachine`,
`runningcpu`, `running-nets-host-mtu`, `meta`). The sub-options are qemu-server PCI.pm's
`$hostpci_fmt`. tests/closedworld holds both lists: a key or sub-option the schema gains that is
not classified here fails them. An unmodelled input only counts where its value can change
something (`matters`): `kvm: 1` is the default, `hotplug` without `memory` adds no DIMM slots.
"""

from __future__ import annotations

from collections.abc import Mapping

from pvefix.closedworld.model import Claim, Input

_QS = "qemu-server src/PVE/QemuServer.pm"
_PCI = "qemu-server src/PVE/QemuServer/PCI.pm"


def _key(name: str, status: str, claims: tuple[Claim, ...], why: str, source: str = _QS) -> Input:
    return Input("config-key", name, status, claims, why, source)  # type: ignore[arg-type]


def _inert(names: str, why: str) -> tuple[Input, ...]:
    return tuple(_key(n, "inert", (), why) for n in names.split())


_VIRTIO = ("adds a modern virtio-pci function (balloon: on unless 0; agent and qxl/virtio vga:"
           " virtio-serial; virtio NICs, disks, SCSI controllers, RNGs, virtiofs) whose 64-bit"
           " prefetchable BAR the firmware places in the GPUs' window: an X-PciMmio64Mb window"
           " of exactly the GPUs' size has no room left and OVMF drops a GPU's BAR"
           " (pvefix.planner.mmio virtio_functions)")
_VIRTIO_SRC = ("QEMU hw/virtio/virtio-pci.c (modern BAR); qemu-server config_to_command; fw-lab"
               " --topo proxmox with a virtio-balloon-pci behind a pci-bridge")

INPUTS_MODELLED: tuple[Input, ...] = (
    _key("machine", "modelled", ("machine", "start", "bar-space", "pcie"),
         "the q35 and pcie rules, the 64-bit window (QEMU version), Proxmox's start checks"),
    _key("cpu", "modelled", ("bar-space", "p2p", "start"),
         "phys-bits, the model's address width and hidden=1 (kvm=off)"),
    _key("memory", "modelled", ("bar-space",), "the RAM below the 64-bit window"),
    _key("bios", "modelled", ("bar-space", "start"), "OVMF or SeaBIOS size the window"),
    _key("ostype", "modelled", ("guest-cmdline", "bar-space"),
         "Linux guests get pci=realloc; Windows' own rules"),
    _key("args", "modelled", ("start", "bar-space", "p2p"),
         "each word classified (pvefix.closedworld.args_words); QEMU keeps the last -cpu"),
    _key("hostpciN", "modelled",
         ("start", "pcie", "bar-space", "iommu-groups", "p2p", "drift"),
         "each entry's devices, sub-options classified below", _PCI),
    _key("template", "modelled", ("start", "activation"),
         "Proxmox never starts a template (vm_start): pvefix.closedworld.vm_states"),
    _key("lock", "modelled", ("start", "activation"),
         "a locked VM is refused by every config write and start: vm_states"),
    _key("numa", "modelled", ("bar-space", "start"),
         "read with hotplug: memory hotplug needs numa=1 (Memory.pm)"),
    _key("hotplug", "unmodelled", ("bar-space", "start"),
         "memory hotplug starts QEMU with -m size=,slots=,maxmem= and QEMU reserves the"
         " hot-pluggable range above RAM, below the 64-bit PCI window, which moves up by as"
         " much; pvefix does not size it (and without numa=1 Proxmox refuses the start)",
         "qemu-server src/PVE/QemuServer/Memory.pm; QEMU hw/i386/pc.c device memory"),
    _key("kvm", "unmodelled", ("start", "bar-space", "p2p"),
         "kvm=0 runs the VM under TCG emulation: no KVM for the guest driver, other address"
         " widths"),
    _key("arch", "unmodelled", ("start", "machine", "bar-space"),
         "a non-x86_64 guest: pvefix models x86 machines and firmware only"),
    _key("amd-sev", "unmodelled", ("start", "bar-space"),
         "SEV takes address bits for the C-bit and encrypts guest memory a device cannot DMA"),
    _key("intel-tdx", "unmodelled", ("start", "bar-space"),
         "a TDX guest: passthrough and its address layout are not modelled"),
    _key("ivshmem", "unmodelled", ("bar-space",),
         "adds an ivshmem PCI device whose BAR is the shared memory size"),
    _key("hookscript", "unmodelled", ("start", "activation"),
         "a hook script runs at pre-start and may change anything pvefix read"),
    _key("freeze", "unmodelled", ("activation",),
         "freeze=1 starts the VM paused: nothing runs until someone resumes it"),
    _key("acpi", "unmodelled", ("bar-space", "guest-cmdline"),
         "acpi=0: the guest kernel reads no _CRS, so it learns no 64-bit window"),
    _key("vmstate", "unmodelled", ("start", "activation"),
         "a hibernated VM: the next start resumes the saved state", _QS + " vm_start (resume)"),
    _key("runningmachine", "modelled", ("machine", "activation"),
         "the machine a running or hibernated VM was started with"),
    _key("machine:viommu", "unmodelled", ("p2p",),
         "a vIOMMU (intel-iommu or virtio-iommu) in the guest: every DMA of the passed GPUs,"
         " peer-to-peer included, goes through the guest's own IOMMU translation, which"
         " NVIDIA's P2P guidance and the clique do not cover; pvefix does not model it",
         _QS + " config_to_command (-device intel-iommu,caching-mode=on / virtio-iommu-pci)"),
    _key("efidiskN", "modelled", ("bar-space",),
         "efitype=4m runs the 4 MiB OVMF images of the installed package's edk2; any other VM"
         " the 2 MiB OVMF_CODE.fd, from pve-edk2-firmware 4.2023.08 on a prebuilt edk2 2023.02"
         " build (pve-edk2-firmware-legacy) whose window rules are its own"
         " (pvefix.planner.mmio ovmf_build)",
         _QS + "/OVMF.pm get_ovmf_files; pve-edk2-firmware debian/changelog 4.2023.08-1"),
    *(_key(n, "modelled", ("bar-space",), _VIRTIO, _VIRTIO_SRC)
      for n in "balloon agent vga scsihw netN virtioN scsiN rngN virtiofsN".split()),
    _key("hugepages", "unmodelled", ("start",),
         "Proxmox allocates the pages on the host at start, which fails when the host's pool"
         " lacks them, and pvefix does not read the pool; its refusals from the config alone"
         " (hugepages without numa: 1) are modelled (vm.memory.start-error)",
         "qemu-server src/PVE/QemuServer/Memory.pm config, hugepages_allocate"),
    _key("numaN", "unmodelled", ("start",),
         "a node's hostnodes must exist on the host (and hugepages need them), which pvefix"
         " does not read; the refusals from the config alone (memory, a policy, nodes"
         " adding up to `memory`) are modelled (vm.memory.start-error). Read only with numa: 1",
         "qemu-server src/PVE/QemuServer/Memory.pm config"),
)

INPUTS_INERT: tuple[Input, ...] = (
    *_inert("description name tags protection", "labels and a removal guard"),
    *_inert("onboot autostart startup reboot", "when Proxmox starts or restarts the VM on its"
            " own, not what a start runs"),
    *_inert("affinity cpulimit cpuunits shares cores sockets vcpus smp",
            "CPU count and scheduling: no address width, BAR or device"),
    *_inert("allow-ksm keephugepages",
            "memory merging, and whether hugepages stay reserved after the VM stops"),
    *_inert("boot bootdisk cdrom keyboard localtime tablet tdf startdate"
            " spice_enhancements smbios1 vmgenid watchdog migrate_downtime migrate_speed"
            " vmstatestorage", "settings and devices with no 64-bit BAR (tablet: a USB"
            " device; watchdog: i6300esb, a 32-bit BAR)"),
    *_inert("cicustom cipassword citype ciupgrade ciuser nameserver searchdomain sshkeys"
            " ipconfigN", "cloud-init data for the guest"),
    *_inert("ideN sataN tpmstateN unusedN audioN parallelN serialN usbN",
            "disks on emulated controllers, TPM, sound, serial and USB: no 64-bit BAR in the"
            " GPUs' window"),
    *_inert("parent snaptime running-nets-host-mtu runningcpu meta",
            "bookkeeping Proxmox writes (snapshot tree, creation metadata)"),
)

HOSTPCI_OPTIONS: tuple[Input, ...] = tuple(
    Input("hostpci-option", n, s, c, w, _PCI)  # type: ignore[arg-type]
    for n, s, c, w in (
        ("host", "modelled", ("start", "bar-space", "iommu-groups", "p2p", "drift"),
         "the host functions passed: several ids (`a;b`) or a slot are all passed, as the"
         " functions of one slot (hostpciN.0, .1, ...)"),
        ("mapping", "modelled", ("start", "bar-space", "iommu-groups", "p2p", "drift"),
         "a cluster mapping: one of its devices, chosen at start"),
        ("pcie", "modelled", ("pcie", "start", "bar-space"),
         "a root port (needs q35); the fixed root ports pcie=1 entries leave empty take the"
         " firmware's hotplug padding in the 64-bit window (mmio.hotplug_buses)"),
        ("x-vga", "modelled", ("p2p", "start"),
         "primary VGA; kvm=off for the whole VM, unless the cpu line (or its model) sets"
         " hidden, which then decides (CPUConfig.pm get_cpu_options), or args sets -cpu"),
        ("legacy-igd", "modelled", ("start",), "Intel IGD legacy mode (00:02.0 on i440fx)"),
        ("romfile", "modelled", ("start",), "a ROM under /usr/share/kvm (root only)"),
        ("rombar", "inert", (), "the ROM BAR is a 32-bit BAR of the device's own size"),
        ("mdev", "modelled", ("iommu-groups", "p2p", "bar-space", "drift", "start"),
         "a mediated device (vGPU): Proxmox binds no vfio-pci, the guest sees the vGPU's own"
         " BARs and NVIDIA's vGPU has no PCIe P2P; on an entry of more than one function (a"
         " slot, or ids joined by `;`) parse_hostpci refuses the start"),
        ("vendor-id", "unmodelled", ("p2p",),
         "QEMU checks the vendor id it presents before it adds a vendor-specific capability"),
        ("device-id", "inert", (), "the presented device id: no claim reads it"),
        ("sub-vendor-id", "inert", (), "the presented subsystem vendor: no claim reads it"),
        ("sub-device-id", "inert", (), "the presented subsystem id: no claim reads it"),
        ("driver", "unmodelled", ("start", "iommu-groups"),
         "driver=keep: Proxmox leaves the host driver bound; pvefix assumes vfio-pci"))
)

INPUTS: tuple[Input, ...] = (*INPUTS_MODELLED, *INPUTS_INERT, *HOSTPCI_OPTIONS)


def family(key: str) -> str:
    """The registry name of a config key: `hostpci3` -> `hostpciN` (numbered families)."""
    stem = key.rstrip("0123456789")
    return f"{stem}N" if stem != key and f"{stem}N" in _FAMILIES else key


_FAMILIES = frozenset(i.name for i in INPUTS if i.name.endswith("N"))


def touched(item: Input, value: str, values: Mapping[str, str]) -> tuple[Claim, ...]:
    """The claims an unmodelled key's value touches here: none where it cannot change one
    (`matters`); memory hotplug with numa=1 leaves the start alone (Memory.pm refuses it only
    without NUMA)."""
    if not matters(item.name, value, values):
        return ()
    if item.name == "hotplug" and values.get("numa", "").strip() == "1":
        return tuple(c for c in item.claims if c != "start")
    return item.claims


def matters(name: str, value: str, values: Mapping[str, str]) -> bool:
    """Whether an unmodelled key's value can change a claim (its default cannot)."""
    text = value.strip()
    if name == "hotplug":
        return "memory" in text.split(",") or text == "memory"
    if name == "numaN":  # read only with numa: 1; the host's nodes matter with hostnodes
        return values.get("numa", "").strip() == "1" and (
            "hostnodes" in text or bool(values.get("hugepages", "").strip()))
    if name in ("kvm", "acpi"):
        return text not in ("1", "on", "yes", "true")
    if name in ("freeze",):
        return text not in ("0", "off", "no", "false")
    if name == "arch":
        return text != "x86_64"
    return bool(text)
