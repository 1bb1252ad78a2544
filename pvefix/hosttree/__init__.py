"""The host tree: one on-disk format for a Proxmox host (bundle, scenario, replay).

A host tree is a directory mirroring the host's own paths (`etc/pve/qemu-server/100.conf`,
`etc/kernel/cmdline`, `proc/cmdline`, `sys/devices/...`) plus `pvefix-host.json` for the facts
only the API or commands give. See docs/host-tree.md.
"""

from pvefix.hosttree.mapping import MapEntry, PciMapping, PciMappingFile
from pvefix.hosttree.meta import META_FILE, HostMeta, VmState, load_meta, parse_meta
from pvefix.hosttree.scenarios import (
    ScenarioInfo,
    list_scenarios,
    materialize_scenario,
    resolve_scenario,
)
from pvefix.hosttree.sysfs import Bar, PciDevice, parse_resource
from pvefix.hosttree.tree import HostTree, load_tree

__all__ = [
    "META_FILE",
    "Bar",
    "HostMeta",
    "HostTree",
    "MapEntry",
    "PciDevice",
    "PciMapping",
    "PciMappingFile",
    "ScenarioInfo",
    "VmState",
    "list_scenarios",
    "load_meta",
    "load_tree",
    "materialize_scenario",
    "parse_meta",
    "parse_resource",
    "resolve_scenario",
]
