"""Closed world: the GPU vendor of every vendor-specific action pvefix plans or advises.

- `x-nv-gpudirect-clique` (the P2P clique): QEMU adds the capability only to an NVIDIA device
  and refuses the property on any other vendor (hw/vfio/pci-quirks.c vfio_add_nv_gpudirect_cap:
  the vendor check fails, the device fails to realize, the VM does not start). Only 0x10de.
- `legacy-igd`: Intel's integrated GPU (0x8086) only (qemu-server PCI.pm, QEMU hw/vfio/igd.c).
- Every other vendor gets no vendor-specific action; one pvefix does not know is unmodelled for
  the claims that rest on the GPU's driver (P2P).
"""

from __future__ import annotations

from pvefix.closedworld.model import Input

NVIDIA = "0x10de"
AMD = "0x1002"
INTEL = "0x8086"

_QEMU = "QEMU hw/vfio/pci-quirks.c vfio_add_nv_gpudirect_cap"

INPUTS: tuple[Input, ...] = (
    Input("gpu-vendor", NVIDIA, "modelled", ("p2p",),
          "NVIDIA: the only vendor QEMU gives x-nv-gpudirect-clique", _QEMU),
    Input("gpu-vendor", AMD, "modelled", ("p2p",),
          "AMD (Radeon, Instinct): QEMU refuses x-nv-gpudirect-clique, so no clique is planned"
          " or advised; P2P between AMD GPUs in a guest is not modelled", _QEMU),
    Input("gpu-vendor", INTEL, "modelled", ("p2p", "start"),
          "Intel: no clique; legacy-igd only for its integrated GPU",
          f"{_QEMU}; QEMU hw/vfio/igd.c"),
)

#: The vendor each vendor-specific action needs.
ACTION_VENDOR: dict[str, str] = {
    "x-nv-gpudirect-clique": NVIDIA,
    "legacy-igd": INTEL,
}


def may_take(action: str, vendor: str) -> bool:
    """Whether a device of `vendor` (`0x10de`) may take the vendor-specific `action`."""
    need = ACTION_VENDOR.get(action)
    return need is None or vendor.lower() == need
