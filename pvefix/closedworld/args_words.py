"""Closed world: every word an `args:` line can carry, classified.

qemu-server splits `args` like a shell (pvefix.vmconfig.args `qemu_words`) and appends the words
after everything it generates (QemuServer.pm config_to_command), so an option given there
overrides Proxmox's own where QEMU keeps the last one (`-cpu`, `-machine` properties, `-m`,
`-bios`). Each QEMU option is one input here; its value is read with it (`options`). A word that
is no option QEMU documents (qemu-options.hx) is unknown: unmodelled, touching every claim a
start can change. pvefix models `-set device.hostpciN.x-nv-gpudirect-clique=C` (the clique it
writes itself) and `-cpu` (the effective CPU: pvefix.planner.effective_cpu); every other option
that reaches the machine, memory, firmware or devices is unmodelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from pvefix.closedworld.model import Claim, Input

_SRC = "QEMU qemu-options.hx; qemu-server src/PVE/QemuServer.pm config_to_command (args last)"

_START: tuple[Claim, ...] = ("start", "machine", "pcie", "bar-space", "p2p", "iommu-groups",
                             "guest-cmdline", "activation")


#: -machine properties that change no claim: timers, SMM, vmport, memory merging, dumps.
_INERT_MACHINE = frozenset({"hpet", "vmport", "smm", "dump-guest-core", "mem-merge",
                            "kernel-irqchip", "usb", "graphics", "suppress-vmdesc"})


def _word(name: str, status: str, claims: tuple[Claim, ...], why: str) -> Input:
    return Input("args-word", name, status, claims, why, _SRC)  # type: ignore[arg-type]


def _inert(names: str, why: str) -> tuple[Input, ...]:
    return tuple(_word(n, "inert", (), why) for n in names.split())


INPUTS: tuple[Input, ...] = (
    _word("-cpu", "modelled", ("bar-space", "p2p", "start"),
          "QEMU keeps the last -cpu: the args one is the VM's CPU (model, phys-bits,"
          " host-phys-bits, kvm=off); a `cpu` change never takes effect under it"),
    _word("-set", "modelled", ("p2p", "start"),
          "device.hostpciN.x-nv-gpudirect-clique=C is modelled; an id no hostpci or net device"
          " has (hostpciN of an entry of several functions, a deleted entry) makes QEMU exit"
          " (vl.c qemu_set_option); any other -set target is unmodelled (see `-set:other`)"),
    _word("-set:rombar", "inert", (),
          "device.ID.rombar=N: a device's option ROM BAR, a 32-bit BAR of the ROM's size (an"
          " ID no hostpci or net device has fails the start, as for `-set`)"),
    _word("-set:other", "unmodelled", ("start", "bar-space", "p2p"),
          "a -set of another property or device changes what QEMU builds"),
    _word("-machine", "unmodelled", ("machine", "bar-space", "start"),
          "machine properties (type, pci-hole64 size, iommu) override Proxmox's"),
    _word("-machine:inert", "inert", (),
          f"only properties that change no claim ({', '.join(sorted(_INERT_MACHINE))})"),
    _word("-M", "unmodelled", ("machine", "bar-space", "start"), "short for -machine"),
    _word("-global", "unmodelled", ("bar-space", "p2p", "start"),
          "a default of every device of a type (e.g. q35-pcihost.pci-hole64-size)"),
    _word("-device", "unmodelled", ("start", "bar-space", "iommu-groups"),
          "another device: its BARs and bus are not in pvefix's sums"),
    _word("-fw_cfg", "modelled", ("bar-space",),
          "name=opt/ovmf/X-PciMmio64Mb,string=N sizes OVMF's window (planner/mmio.py)"),
    _word("-fw_cfg:other", "unmodelled", ("bar-space",),
          "another firmware config item: what the firmware does with it is not modelled"),
    _word("-m", "unmodelled", ("bar-space", "start"),
          "memory size, slots and maxmem: the RAM and hotplug range below the window"),
    _word("-smp", "unmodelled", ("start",), "a CPU topology other than Proxmox's"),
    _word("-numa", "unmodelled", ("start", "bar-space"), "NUMA nodes and their memory"),
    _word("-object", "unmodelled", ("start", "bar-space"),
          "memory backends and other objects (sizes, iommufd)"),
    _word("-bios", "unmodelled", ("bar-space", "start"), "another firmware image"),
    _word("-drive", "unmodelled", ("bar-space", "start"),
          "a drive (if=pflash is another firmware)"),
    _word("-blockdev", "unmodelled", ("bar-space", "start"), "a block node (pflash firmware)"),
    _word("-L", "unmodelled", ("bar-space",), "another firmware directory"),
    _word("-accel", "unmodelled", ("start", "p2p", "bar-space"), "an accelerator other than KVM"),
    _word("-enable-kvm", "inert", (), "KVM is Proxmox's default"),
    _word("-kernel", "unmodelled", ("guest-cmdline", "start"), "a kernel booted directly"),
    _word("-initrd", "unmodelled", ("guest-cmdline", "start"), "with -kernel"),
    _word("-append", "unmodelled", ("guest-cmdline",),
          "the guest kernel's cmdline given by QEMU, not the guest's boot loader"),
    _word("-S", "unmodelled", ("activation",), "QEMU starts paused"),
    _word("-loadvm", "unmodelled", ("activation", "start"), "starts from a saved state"),
    _word("-incoming", "unmodelled", ("activation", "start"), "waits for a migration"),
    _word("-readconfig", "unmodelled", _START, "a config file of any options"),
    _word("-iommu", "unmodelled", ("iommu-groups", "p2p"), "a virtual IOMMU"),
    _word("-pflash", "unmodelled", ("bar-space", "start"), "another firmware flash image"),
    _word("-no-acpi", "unmodelled", ("bar-space", "guest-cmdline"),
          "no ACPI: the guest kernel reads no _CRS, so it learns no 64-bit window"),
    _word("-acpitable", "unmodelled", ("bar-space", "guest-cmdline"),
          "an extra ACPI table the guest kernel reads"),
    _word("-only-migratable", "unmodelled", ("start",),
          "refuses devices that cannot migrate, as vfio-pci devices are"),
    _word("-dump-vmstate", "unmodelled", ("activation", "start"), "dumps and exits"),
    _word("-xen-domid", "unmodelled", _START, "a Xen guest, not KVM"),
    _word("-xen-attach", "unmodelled", _START, "a Xen guest, not KVM"),
    _word("-xen-domid-restrict", "unmodelled", _START, "a Xen guest, not KVM"),
    _word("-plugin", "unmodelled", ("start",), "a TCG plugin"),
    *_inert("-name -uuid -k -rtc -boot -vga -display -nographic -spice -vnc -serial -parallel"
            " -monitor -mon -qmp -chardev -pidfile -daemonize -runas -sandbox -msg -trace -d -D"
            " -no-reboot -no-shutdown -nodefaults -no-user-config -smbios -overcommit"
            " -mem-prealloc -mem-path -netdev -nic -net -audiodev -usb -usbdevice -watchdog"
            " -watchdog-action -action -iscsi -add-fd -compat -icount -no-hpet -snapshot"
            " -option-rom -tpmdev -virtfs -fsdev -cdrom -hda -hdb -hdc -hdd -fda -fdb -mtdblock"
            " -sd -dtb -gdb -s -seed -debugcon -echr -dfilter -audio -audio-help -rotate"
            " -portrait -full-screen -singlestep -async-teardown -qmp-pretty -win2k-hack -chroot"
            " -no-fd-bootchk -enable-sync-profile -h -help -version",
            "names, consoles, logs and devices with no large or 64-bit BAR"),
)

#: Options that take no value (the rest take one word after them).
FLAGS = frozenset({"-enable-kvm", "-S", "-nographic", "-daemonize", "-no-reboot",
                   "-no-shutdown", "-nodefaults", "-no-user-config", "-mem-prealloc",
                   "-usb", "-no-hpet", "-no-acpi", "-snapshot", "-only-migratable",
                   "-xen-attach", "-xen-domid-restrict", "-full-screen", "-portrait",
                   "-singlestep", "-async-teardown", "-win2k-hack", "-no-fd-bootchk",
                   "-enable-sync-profile", "-s", "-h", "-help", "-version", "-audio-help"})


@dataclass(frozen=True)
class Option:
    """One QEMU option of an args line and the value it carries (None: a flag)."""

    name: str  # as its registry input: `-cpu`, `--cpu` folded to `-cpu`
    value: str | None
    known: bool


def options(words: list[str]) -> list[Option]:
    """The options of an args line's words, in order, each with its value."""
    out: list[Option] = []
    i = 0
    while i < len(words):
        word = words[i]
        name = "-" + word.lstrip("-") if word.startswith("-") else word
        known = any(x.name == name for x in INPUTS)
        if name in FLAGS or not word.startswith("-"):
            out.append(Option(name, None, known and word.startswith("-")))
            i += 1
            continue
        value = words[i + 1] if i + 1 < len(words) else None
        if not known and value is not None and value.startswith("-"):
            value = None  # an unknown option's arity is unknown: the next option stays one
        out.append(Option(name, value, known))
        i += 2 if value is not None else 1
    return out


def classify(opt: Option) -> Input:
    """The input an option is: its registry entry, `-set:other`, or an unknown word."""
    if opt.name == "-set" and not _is_clique(opt.value or ""):
        prop = (opt.value or "").partition("=")[0].split(".")
        rombar = len(prop) == 3 and prop[0] == "device" and prop[2] == "rombar"
        return _named("-set:rombar" if rombar else "-set:other")
    if opt.name == "-fw_cfg" and not (opt.value or "").startswith(
            "name=opt/ovmf/X-PciMmio64Mb,string="):
        return _named("-fw_cfg:other")
    if opt.name == "-machine" and _machine_inert(opt.value or ""):
        return _named("-machine:inert")
    found = next((x for x in INPUTS if x.name == opt.name), None) if opt.known else None
    return found or _word(opt.name, "unmodelled", _START,
                          "a word pvefix does not know: what QEMU does with it is not modelled")


def _named(name: str) -> Input:
    return next(x for x in INPUTS if x.name == name)


def _machine_inert(value: str) -> bool:
    props = [p.partition("=")[0] for p in value.split(",")]
    return bool(props) and all(p in _INERT_MACHINE for p in props)


def _is_clique(value: str) -> bool:
    from pvefix.vmconfig.args import CLIQUE_PROPERTY

    head, _, _ = value.partition("=")
    parts = head.split(".")
    return len(parts) == 3 and parts[0] == "device" and parts[2] == CLIQUE_PROPERTY


def last_cpu(words: list[str]) -> str | None:
    """The value of the last -cpu in args (QEMU keeps the last): the VM's CPU when given."""
    found = [o.value for o in options(words) if o.name == "-cpu" and o.value is not None]
    return found[-1] if found else None
