"""A HostState from what the live read was answered: pure (answers in, state out).

The live reader (`sources/live.py`) decides what to ask and when; this module puts the API's
answers (`answers`: "config", "pending", "status", "node", "pci", "mapping") and the node's
command results (by argument list) together, the registry's facts through the same
projection every read path uses (`facts/project.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pvefix.errors import PvefixError
from pvefix.facts import node as nf
from pvefix.facts.project import node_fields
from pvefix.facts.sysfs import SYSFS_FILES, SYSFS_LINKS
from pvefix.hostfacts import file_fact
from pvefix.hosttree.mapping import PciMapping, PciMappingFile
from pvefix.hosttree.sysfs import PciDevice
from pvefix.paths import (
    CPU_MODELS,
    GRUB_DEFAULT,
    KERNEL_CMDLINE,
    MAPPING_FILE,
    PROC_CMDLINE,
    SYSFS_PCI,
    vm_config,
)
from pvefix.sources import remote_facts as rf
from pvefix.sources.common import pending_from_api, pending_items
from pvefix.state import FileFact, HostState, NodeFacts, VmFacts
from pvefix.target.result import CommandResult
from pvefix.vmconfig.config import VMConfig

Results = Mapping[tuple[str, ...], CommandResult]
NO_SSH = ("no SSH: host kernel cmdline files, boot loader, sysfs (root ports, BAR sizes) and "
          "ACS are unknown; pass SSH settings to read them")


def mappings(answers: Mapping[str, Any], results: Results, ssh: bool,
             notes: list[str]) -> list[PciMapping]:
    """The PCI mappings: the file over SSH, else the API's."""
    api_mappings = rf.mappings_from_api(answers["mapping"] or [])
    if not ssh:
        return api_mappings
    text = nf.MAPPING.parse(results.get(nf.MAPPING.argv()))
    if text is not None:
        return list(PciMappingFile.parse(text, MAPPING_FILE).mappings.values())
    if api_mappings:
        notes.append(f"{MAPPING_FILE} not readable over SSH; mappings from the API")
    return api_mappings


def files(results: Results) -> dict[str, FileFact]:
    """The node's cmdline and CPU model files, and the GRUB drop-ins its listing named."""
    dropins = nf.GRUB_DROPINS.parse(results.get(nf.GRUB_DROPINS.argv()))
    return {path: file_fact(path, results.get(nf.dropin_read(path)))
            for path in (KERNEL_CMDLINE, GRUB_DEFAULT, PROC_CMDLINE, CPU_MODELS, *dropins)}


def node_facts(node: str, answers: Mapping[str, Any], results: Results,
               known: Mapping[str, str]) -> NodeFacts:
    """The node's facts: its API status, and the registry's facts from the SSH rounds."""
    uname = nf.KERNEL_VERSION.parse(results.get(nf.KERNEL_VERSION.argv()))
    running_qemu = (answers["status"] or {}).get("running-qemu")
    packages = nf.PACKAGES.parse(results.get(nf.PACKAGES.argv()))
    installed_qemu = re.sub(r"-[0-9][0-9a-z.~+]*$", "", packages.get("pve-qemu-kvm", "")) or None
    return rf.node_facts(
        node, answers["node"] or {}, uname, str(running_qemu) if running_qemu else installed_qemu,
    ).model_copy(update={
        "cpu_phys_bits": nf.CPU_PHYS_BITS.parse(results.get(nf.CPU_PHYS_BITS.argv())),
        "edk2_version": packages.get("pve-edk2-firmware-ovmf") or packages.get(
            "pve-edk2-firmware"),
        **node_fields(nf.facts_for("plan"), lambda f, k: results.get(f.argv(k)), known)})


def _config(vmid: int, node: str, answers: Mapping[str, Any], raw: CommandResult | None,
            notes: list[str]) -> tuple[VMConfig, str, str, str, list[Any]]:
    """The VM config, its text, where it came from ("file", "api"), its digest and pending
    items."""
    api_digest = str((answers["config"] or {}).get("digest", ""))
    conf_path = vm_config(node, vmid)
    text = file_fact(conf_path, raw).text if raw is not None else None
    if raw is not None and text is None:
        raise PvefixError("VM config not found on the node over SSH", source=conf_path)
    if text is not None:
        cfg = VMConfig.parse(text, conf_path)
        if api_digest and cfg.digest != api_digest:
            notes.append(f"the VM config changed between reads (file digest {cfg.digest}, API "
                         f"digest {api_digest}); re-run the plan")
        return cfg, text, "file", cfg.digest, pending_items(cfg, cfg.digest)
    rows: list[dict[str, Any]] = list(answers["pending"] or [])
    cfg = rf.rebuild_config(answers["config"] or {}, rows)
    if cfg.digest == api_digest:
        notes.append("VM config rebuilt from the API; it matches the API digest exactly")
    else:
        notes.append(
            "VM config rebuilt from the API; it differs from the stored file (its digest "
            f"{cfg.digest} is not the API's {api_digest}: comments, order or snapshots); "
            "the API digest is used for writes")
    return cfg, cfg.render(), "api", api_digest, pending_from_api(rows)


def vm_facts(vmid: int, node: str, answers: Mapping[str, Any], raw: CommandResult | None,
             notes: list[str]) -> tuple[VMConfig, VmFacts]:
    """The VM's config (the file over SSH, else rebuilt from the API) and its facts."""
    cfg, text, source, digest, pending = _config(vmid, node, answers, raw, notes)
    status: dict[str, Any] = answers["status"] or {}
    run = str(status.get("status", "stopped"))
    return cfg, VmFacts(
        vmid=vmid, node=node, config_text=text,
        config_source=source, digest=digest, pending=pending,
        status="running" if run == "running" else "stopped",
        running_machine=status.get("running-machine") if run == "running" else None,
        lock=status.get("lock") or None, ha_state=ha_state(status))


def ha_state(status: Mapping[str, Any]) -> str | None:
    """status/current's `ha` (PVE::HA::Config::get_service_status): its state when managed."""
    ha = status.get("ha")
    if not isinstance(ha, dict) or not ha.get("managed"):
        return None
    return str(ha.get("state") or "started")


def api_devices(pci_items: list[dict[str, Any]], paths: Mapping[str, list[str]]
                ) -> dict[str, PciDevice]:
    """Every function as the API lists it, with its physical path."""
    return {dev.address: dev
            for dev in (rf.api_device(item, paths.get(str(item.get("id")), []))
                        for item in pci_items)
            if dev is not None}


def sysfs_devices(wanted: list[str], texts: Mapping[str, str], targets: Mapping[str, str],
                  paths: Mapping[str, list[str]]) -> dict[str, PciDevice]:
    """The wanted functions from their sysfs files and links (round C)."""
    out: dict[str, PciDevice] = {}
    for address in wanted:
        prefix = f"{SYSFS_PCI}/{address}/"
        device = rf.sysfs_device(
            address,
            {name: texts[prefix + name] for name in SYSFS_FILES if prefix + name in texts},
            {name: targets.get(prefix + name, "") for name in SYSFS_LINKS},
            list(paths.get(address, [])))
        if device is not None:
            out[address] = device
    return out


def elsewhere(vmid: int, known_node: str, named: str | None) -> list[str]:
    """The note for a VM that does not live on the node the connection names."""
    if named is None or named == known_node:
        return []
    return [f"VM {vmid} lives on node {known_node}, not on {named} (named by the connection):"
            f" every read and write goes to {known_node}"]


def with_notes(state: HostState, notes: list[str]) -> HostState:
    return state.model_copy(update={"notes": [*state.notes, *notes]}) if notes else state


def same_mappings(a: list[PciMapping], b: list[PciMapping]) -> bool:
    """Mappings equal in what matters (ids and map entries), whatever their source."""

    def key(ms: list[PciMapping]) -> list[tuple[str, list[tuple[object, ...]]]]:
        return sorted(
            (m.id, [(e.node, e.id, e.path, e.iommugroup, e.subsystem_id) for e in m.maps])
            for m in ms
        )

    return key(a) == key(b)
