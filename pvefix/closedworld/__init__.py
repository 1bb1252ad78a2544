"""The closed world: every input that can change what pvefix claims, classified in one place.

Each input (a VM config key, a `hostpciN` sub-option, an `args` word, a VM state, a host kernel
parameter, the GPU vendor of a vendor-specific action) is one `Input`: either *modelled* (the
claims it feeds are named), *inert* (it cannot change any claim pvefix makes, said why), or
*unmodelled* (it touches claims pvefix does not model: every claim it touches then reads "not
established: INPUT, why" as a finding, never a confident verdict, and nothing is written that
rests on it). Pure: no I/O. The tables of docs/why-each-change.md are generated from `REGISTRY`.

Modules, one per kind of input (each exports `INPUTS: tuple[Input, ...]`):
    config_keys    VM config keys and hostpciN sub-options (qemu-server's schema)
    args_words     words an `args:` line can carry
    vm_states      VM states that change what a start means (template, each lock)
    kernel_params  host kernel parameters touching the IOMMU, PCI resources or VFIO
    vendors        the GPU vendor of each vendor-specific action
"""

from __future__ import annotations

from pvefix.closedworld.model import CLAIMS, Claim, Input, InputKind, Status, not_established

__all__ = ["CLAIMS", "Claim", "Input", "InputKind", "Status", "not_established"]
