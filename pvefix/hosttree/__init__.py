"""The host tree: one on-disk format for a Proxmox host (bundle, scenario, replay).

A host tree is a directory mirroring the host's own paths (`etc/pve/qemu-server/100.conf`,
`etc/kernel/cmdline`, `proc/cmdline`, `sys/devices/...`) plus `pvefix-host.json` for the facts
only the API or commands give. See docs/host-tree.md.
"""

from typing import TYPE_CHECKING

from pvefix.lazy import lazy_names

if TYPE_CHECKING:
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

# Loaded on first use: a reader of one submodule (pvefix.hosttree.safe, .mapping) does not
# pay for the others (the meta models, the scenarios, the tree walker).
__getattr__ = lazy_names(__name__, {
    "MapEntry": "mapping", "PciMapping": "mapping", "PciMappingFile": "mapping",
    "META_FILE": "meta", "HostMeta": "meta", "VmState": "meta", "load_meta": "meta",
    "parse_meta": "meta", "ScenarioInfo": "scenarios", "list_scenarios": "scenarios",
    "materialize_scenario": "scenarios", "resolve_scenario": "scenarios", "Bar": "sysfs",
    "PciDevice": "sysfs", "parse_resource": "sysfs", "HostTree": "tree", "load_tree": "tree",
})

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
