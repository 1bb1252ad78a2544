"""Ansible's community.proxmox.proxmox_vm_info (type=qemu, config=current) against a simulator.

The comparison the drift check is measured against: Ansible lists the cluster
(GET /cluster/resources), then reads each VM's config with its own request, one after another.
Ansible and the collection come from PyPI's `ansible` package, installed into a venv of its
own (never the project's):
    python3 -m venv bench/out/ansible-venv
    bench/out/ansible-venv/bin/pip install ansible proxmoxer requests
Usage (normally called by bench/check_all.py --ansible): run_vm_info(ready_info, workdir).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

VENV = Path(__file__).resolve().parent / "out" / "ansible-venv"


def available() -> bool:
    return (VENV / "bin" / "ansible-playbook").is_file()


def run_vm_info(info: Any, workdir: Path) -> int:
    """Run the module once over the whole cluster; returns how many VMs it reported."""
    if not available():
        raise SystemExit(f"Ansible is not installed in {VENV} (see bench/ansible_vm_info.py)")
    host, _, port = info.api_url.removeprefix("https://").partition(":")
    user, _, token = info.token_id.partition("!")
    playbook = workdir / "vm_info.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False, "connection": "local",
        "tasks": [
            {"community.proxmox.proxmox_vm_info": {
                "api_host": host, "api_port": int(port), "api_user": user,
                "api_token_id": token, "api_token_secret": info.token_secret,
                "type": "qemu", "config": "current"},
             "register": "vms", "no_log": True},
            {"copy": {"content": "{{ vms.proxmox_vms | length }}",
                      "dest": str(workdir / "vm_count")}},
        ],
    }]), encoding="utf-8")
    env = dict(os.environ, REQUESTS_CA_BUNDLE=info.ca_cert, ANSIBLE_NOCOWS="1",
               ANSIBLE_PYTHON_INTERPRETER=str(VENV / "bin" / "python"),
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    done = subprocess.run([str(VENV / "bin" / "ansible-playbook"), "-i", "localhost,",
                           str(playbook)], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ansible-playbook failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return int((workdir / "vm_count").read_text(encoding="utf-8"))
