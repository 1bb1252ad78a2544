"""What the next start holds that can move a BAR and that the rehearsal does not boot as the VM
would (pure): its verdict is then not established, and says which input leaves it so.

The rehearsal boots the firmware with the VM's machine, CPU, RAM (memory hotplug's DIMMs
included), Proxmox's buses and virtio functions, stand-ins of the passed functions' BARs, and
three kinds of `args` word (an OVMF `-fw_cfg name=opt/ovmf/NAME,string=N`, a `-global
...pci-hole64-size=`, `-cpu`): QEMU and the firmware then decide, nothing is modelled. Every
other input the closed world (pvefix.closedworld) says can move a BAR (its `bar-space` claim)
is left out of that boot:
- a config key pvefix does not model for bar-space (`ivshmem`, `kvm: 0`, `acpi: 0`, SEV/TDX,
  an unknown key), memory hotplug aside (booted as qemu-server lays it out);
- an `args` word the rehearsal does not keep (`-device`, `-m`, `-object`, `-machine`, another
  `-global`, a `--cpu` spelled with two dashes, ...), unless the registry knows it inert;
- a vGPU entry (`mdev=`): its stand-in would have the physical GPU's BARs, not the mediated
  device's;
- a host kernel parameter that changes the address width KVM reports (`kvm_intel.ept=0`).
"""

from __future__ import annotations

from pvefix.closedworld.args_words import classify, options
from pvefix.closedworld.gaps import Gap
from pvefix.planner.closed import gaps as closed_gaps
from pvefix.planner.context import Context
from pvefix.rehearse.command import args_of
from pvefix.vmconfig.args import qemu_words

CLAIM = "bar-space"
#: Config keys the rehearsal boots as qemu-server does, which the planner's sums leave out.
BOOTED_KEYS = frozenset({"hotplug"})


def left_out(ctx: Context) -> list[str]:
    """Each input of the rehearsed config (`ctx`) that can move a BAR and that the rehearsal
    does not boot, as one line: what, where, and why it matters."""
    found = [g for g in closed_gaps(ctx) if CLAIM in g.item.claims
             and g.item.kind != "args-word"  # the args words: below, word by word
             and not (g.item.kind == "config-key" and g.item.name in BOOTED_KEYS)]
    found += _args_left_out(ctx.values.get("args"))
    return list(dict.fromkeys(  # each line once, in order
        f"{g.item.kind} {g.item.name} ({g.where}): {g.item.why}" for g in found))


def _args_left_out(args: str | None) -> list[Gap]:
    if not args:
        return []
    booted = args_of(args)
    kept = set(zip(booted.kept[::2], booted.kept[1::2], strict=True))
    out = []
    for opt in options(qemu_words(args)):
        if (opt.name, opt.value) in kept or (
                opt.name == "-cpu" and opt.value is not None and opt.value == booted.cpu):
            continue
        item = classify(opt)
        if item.status != "inert" and CLAIM in item.claims:
            where = f"args: {opt.name}" + (f" {opt.value}" if opt.value is not None else "")
            out.append(Gap(item, where))
    return out
