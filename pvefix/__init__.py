"""pvefix: make multi-GPU passthrough on Proxmox VE right, safely."""

__version__ = "0.1.0"
