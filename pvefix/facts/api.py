"""The Proxmox API reads of the read side, declared once (paths and parameters; pure).

Each is a GET; `{node}` and `{vmid}` are filled per read (`Api.at`). The live reader's waves,
`check`'s cluster read and the activation's neighbours ask through these; the cluster's VM
listing (/cluster/resources) is walked in `pvefix.target.nodes` (target imports no feature).
"""

from __future__ import annotations

from pvefix.facts.model import Api

CLUSTER_STATUS = Api("/cluster/status")  # the cluster's name and each node's address
MAPPINGS = Api("/cluster/mapping/pci")  # the PCI resource mappings, cluster-wide
NODE_STATUS = Api("/nodes/{node}/status")  # versions, CPU, boot mode, memory
NODE_PCI = Api("/nodes/{node}/hardware/pci", (("pci-class-blacklist", ""),))  # every function
NODE_VMS = Api("/nodes/{node}/qemu", (("full", "1"),))  # the node's VMs, run states live
VM_CONFIG = Api("/nodes/{node}/qemu/{vmid}/config")  # the config (+ name, lock)
VM_CURRENT = Api("/nodes/{node}/qemu/{vmid}/config", (("current", "1"),))  # without pending
VM_PENDING = Api("/nodes/{node}/qemu/{vmid}/pending")  # current and pending value per key
VM_STATUS = Api("/nodes/{node}/qemu/{vmid}/status/current")  # run state, machine, lock, HA
