"""The closed world's value types (pure): one classified input, the claims it can touch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pvefix.findings import Finding

#: The claims a plan makes, by the rule or verdict that makes them. An input names the claims it
#: feeds (modelled) or touches (unmodelled); docs/why-each-change.md lists them.
Claim = Literal[
    "start",         # Proxmox starts the VM as planned (machine, devices, firmware)
    "machine",       # q35 rule: the machine type the VM runs with
    "pcie",          # pcie=1 rule: each hostpci on a root port
    "bar-space",     # the firmware places every BAR within the vCPU's reach (plan and rehearse)
    "host-iommu",    # the host kernel cmdline's IOMMU verdict (on, passthrough, off)
    "iommu-groups",  # a GPU's IOMMU group and what else shares it
    "p2p",           # the P2P clique and what it needs (KVM visible, NVIDIA, whole GPUs)
    "guest-cmdline", # the guest's pci=realloc and what the guest kernel sees
    "activation",    # when and how a change takes effect (start, restart, snapshot, rollback)
    "drift",         # what `desired` records and `check` compares
]
CLAIMS: tuple[Claim, ...] = (
    "start", "machine", "pcie", "bar-space", "host-iommu", "iommu-groups", "p2p",
    "guest-cmdline", "activation", "drift",
)

InputKind = Literal["config-key", "hostpci-option", "args-word", "vm-state", "kernel-param",
                    "gpu-vendor"]
Status = Literal["modelled", "inert", "unmodelled"]


@dataclass(frozen=True)
class Input:
    """One input pvefix may meet, classified.

    modelled: pvefix reads it and `claims` lists what it feeds; inert: it changes none of
    pvefix's claims (`why` says so); unmodelled: it touches `claims` and pvefix does not model
    how, so each of them is "not established" where the input is present.
    """

    kind: InputKind
    name: str
    status: Status
    claims: tuple[Claim, ...]
    why: str
    source: str = ""  # where the behaviour is established (file, function, document)

    def __post_init__(self) -> None:
        if self.status == "inert" and self.claims:
            raise ValueError(f"{self.kind} {self.name}: an inert input touches no claim")
        if self.status != "inert" and not self.claims:
            raise ValueError(f"{self.kind} {self.name}: name the claims it feeds or touches")


def not_established(rule: str, item: Input, claim: Claim, detail: str,
                    evidence: list[str] | None = None) -> Finding:
    """The finding a claim becomes where an unmodelled (or not yet read) input touches it."""
    return Finding(
        id=f"not-established.{claim}.{item.kind}.{item.name}", rule=rule, severity="warning",
        title=f"not established: {claim} ({item.kind} {item.name})",
        detail=f"{detail} {item.why}".strip(),
        evidence=list(evidence or []) + ([f"source: {item.source}"] if item.source else []))
