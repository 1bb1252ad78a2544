"""The closed-world section of docs/why-each-change.md: the rule in prose and one table per kind
of input, generated from `REGISTRY` (pvefix.planner.docs appends it; a test checks the page)."""

from __future__ import annotations

from pvefix.closedworld.model import CLAIMS, InputKind
from pvefix.closedworld.registry import inputs_of

RULE = """
## The closed world: what pvefix does not model, it never claims

Every input that can change what pvefix claims is classified in one place,
`pvefix/closedworld/`: every VM config key and every `hostpciN` sub-option of qemu-server's own
schema, every word an `args:` line can carry, every VM state that changes what a start means,
every host kernel parameter that touches the IOMMU, PCI resources or VFIO, and the GPU vendor of
every vendor-specific action. Each input is one of:

- **modelled**: pvefix reads it; the table names the claims it feeds;
- **inert**: it cannot change any claim pvefix makes (the table says why);
- **unmodelled**: it can change the claims named, and pvefix does not model how. Where the VM's
  next start (the config after [PENDING]) holds it with a value that matters, each claim it
  touches becomes a finding `not established: CLAIM (KIND NAME)`, never a confident verdict: the
  rules that make that claim keep their findings with the input named, give no no-op verdict,
  and their changes (and every change that requires one of them) are not planned, so nothing is
  written that rests on it. An input the registry does not know (a config key or an args word
  qemu-server's schema as pvefix knows it lacks) is unmodelled for every claim a start can
  change.

`pvefix check` holds the same rule (docs/check.md, "Not established"): an item of a VM's desired
state that holds as text but whose claim rests on an unmodelled input of the VM's next start
(`machine: q35` under an `args: -machine type=pc`) is `UNKNOWN`, naming the input, never `ok`.

A test fails when qemu-server's schema (the captured copy in pvefix/sim/confdesc.json and
tests/closedworld/hostpci_format.json, and Proxmox's own code in `make conformance`) holds a key,
a `hostpciN` sub-option or a `lock` value that is not classified here, so a Proxmox upgrade that
adds one is caught. The claims:
"""

CLAIM_TEXT = {
    "start": "Proxmox starts the VM as planned (machine, devices, firmware)",
    "machine": "the machine type the VM runs with (q35 rule)",
    "pcie": "each hostpci entry on a root port (pcie=1 rule)",
    "bar-space": "the firmware places every BAR within the vCPU's reach",
    "host-iommu": "the host kernel cmdline's IOMMU verdict",
    "iommu-groups": "a GPU's IOMMU group and what else shares it",
    "p2p": "the P2P clique and what it needs",
    "guest-cmdline": "the guest's pci=realloc and what the guest kernel sees",
    "activation": "when and how a change takes effect",
    "drift": "what `desired` records and `check` compares",
}

TABLES: tuple[tuple[InputKind, str], ...] = (
    ("config-key", "VM config keys (numbered families as `hostpciN`)"),
    ("hostpci-option", "`hostpciN` sub-options"),
    ("args-word", "`args` words (QEMU options; `-set:other` and the like: by their value)"),
    ("vm-state", "VM states"),
    ("kernel-param", "Host kernel parameters"),
    ("gpu-vendor", "GPU vendors of vendor-specific actions"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    parts = [RULE, "\n| Claim | Meaning |\n| --- | --- |\n"]
    parts += [f"| `{c}` | {CLAIM_TEXT[c]} |\n" for c in CLAIMS]
    for kind, title in TABLES:
        items = inputs_of(kind)
        parts.append(f"\n### {title}\n\n")
        if not items:
            parts.append("None classified yet.\n")
            continue
        parts.append("| Input | Status | Claims | Why | Source |\n"
                     "| --- | --- | --- | --- | --- |\n")
        for i in items:
            claims = ", ".join(f"`{c}`" for c in i.claims) or "-"
            parts.append(f"| `{_cell(i.name)}` | {i.status} | {claims} | {_cell(i.why)} |"
                         f" {_cell(i.source) or '-'} |\n")
    return "".join(parts)
