"""The VM's effective CPU: `args`' last `-cpu` where there is one, else the `cpu` line (pure).

qemu-server appends `args` after everything it generates (QemuServer.pm config_to_command) and
QEMU keeps the last `-cpu` it is given (vl.c: each -cpu replaces the CPU model option), so an
`args: -cpu host,kvm=off` makes the VM run as `host` with KVM hidden whatever `cpu` says, and a
change to `cpu` never takes effect. The args' -cpu is read back in the cpu line's own form
(model, phys-bits, hidden, flags) so the BAR and P2P verdicts judge the CPU the VM really runs;
one pvefix cannot read (a property it does not know) is None: not established.
"""

from __future__ import annotations

from pvefix.closedworld.args_words import last_cpu
from pvefix.vmconfig.args import qemu_words

_ON = ("on", "true", "yes", "1")
_OFF = ("off", "false", "no", "0")
#: QEMU -cpu properties that change no claim pvefix makes (cache and topology hints, Hyper-V
#: enlightenments, the vendor string Windows drivers read).
_INERT_PROPS = ("l3-cache", "migratable", "check", "enforce", "hv-vendor-id", "vendor",
                "model-id", "level", "xlevel", "min-level", "min-xlevel", "pmu")


def args_cpu_raw(args: str | None) -> str | None:
    """The value of args' last -cpu, as written (None: args sets no CPU)."""
    return last_cpu(qemu_words(args))


def args_hide_kvm(qemu_cpu: str | None) -> bool:
    """args' -cpu hides KVM from the guest (`kvm=off`, the last `kvm=` wins, as QEMU's
    properties do)."""
    if qemu_cpu is None:
        return False
    kvm = [p.partition("=")[2] for p in qemu_cpu.split(",")[1:] if p.partition("=")[0] == "kvm"]
    return bool(kvm) and kvm[-1] in _OFF


def as_cpu_line(qemu_cpu: str) -> str | None:
    """QEMU's `-cpu MODEL,prop=..,+flag` as a Proxmox cpu line, or None where a property is not
    one pvefix reads (then the CPU is not established)."""
    model, *props = qemu_cpu.split(",")
    if not model:
        return None
    line = [model]
    flags: list[str] = []
    for prop in props:
        if prop[:1] in "+-" and len(prop) > 1:
            flags.append(prop)
            continue
        name, _, value = prop.partition("=")
        if name == "kvm" and value in _OFF:
            line.append("hidden=1")
        elif name == "kvm" and value in _ON:
            continue
        elif name == "phys-bits" and value.isdigit():
            line.append(f"phys-bits={value}")
        elif name == "host-phys-bits" and value in _ON:
            line.append("phys-bits=host")
        elif (name == "host-phys-bits" and value in _OFF) or name.startswith("hv") \
                or name in _INERT_PROPS:
            continue
        elif value in _ON or value in _OFF:  # `pdpe1gb=on` is a flag
            flags.append(("+" if value in _ON else "-") + name)
        else:
            return None
    if flags:
        line.append("flags=" + ";".join(flags))
    return ",".join(line)
