"""Every VM config a scenario ships parses with pvefix.vmconfig and passes Proxmox's checks."""

from __future__ import annotations

import pytest

from pvefix.hosttree import load_tree, resolve_scenario

vmconfig = pytest.importorskip("pvefix.vmconfig")
values = pytest.importorskip("pvefix.vmconfig.values")


@pytest.mark.parametrize("name", ["kpro6", "intel-grub", "windows-igd", "large"])
def test_every_vm_config_parses_renders_back_and_validates(name: str) -> None:
    tree = load_tree(resolve_scenario(name))
    for vmid in tree.vms():
        path = tree.vm_config_path(vmid)
        text = path.read_text()
        cfg = vmconfig.VMConfig.parse(text, str(path))
        assert cfg.render() == text, path
        for section in (cfg.main, cfg.pending):
            for key, value in section.as_dict().items():
                values.validate(key, value)
            for key, value in section.as_dict().items():
                if key.startswith("hostpci"):
                    vmconfig.HostPci.parse(value, key=key)
        machine = cfg.main.get("machine")
        if machine is not None:
            vmconfig.Machine.parse(machine)
