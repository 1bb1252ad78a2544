"""Planner cases as data: a scenario plus edits in, the expected plan out.

Each case file (cases/*.json) has:
  "scenario", "vmid"                    the host tree to start from
  "edit" (optional):
     "config_set": {key: value}, "config_delete": [key], "config_text": "..."  (the VM config)
     "files": {host path: text or null}    (/etc/kernel/cmdline, /etc/default/grub, /proc/cmdline)
     "boot_tool": {"exit_code": N, "output": "..."}
     "vm": {"status": ..., "running_machine": ..., "lock": ...}
     "access": {"method": ..., "user": ..., "auth": ..., "ssh": ..., "guest": ...}
     "guest": {"cmdline": ..., "bar_errors": [...]}
     "node": {"kernel_version": ..., "cpu_vendor": ...}
  "tree" (optional): a host tree of the case's own, built on disk from the scenario's and read
     back with the bundle reader, for facts the edits above cannot reach:
     "write": {host path: text}, "remove": [host path or glob under the tree, e.g.
     "/sys/devices/**/iommu_group"], "meta": {pvefix-host.json key: value (merged one level)}
  "options" (optional): {"p2p": true, "clique_map": {"hostpci0": 0}}   (PlanOptions)
  "expect" (required, with every key below):
     "phases": [{"disruption": ..., "changes": [change id, ...]}]
     "findings": [finding id, ...]            (exactly these, in any order)
     "noops": [rule, ...]                     (rules that said they had nothing to do)
     "severities": {finding id: severity}     (every finding's severity)
     "noop_reasons": {rule: reason}           (what each rule with nothing to do said)
     "values": {change id: [before, after]}   (optional spot checks)
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pvefix.hosttree import resolve_scenario
from pvefix.hosttree.meta import META_FILE
from pvefix.sources.bundle import read_bundle
from pvefix.state import AccessFacts, BootToolFacts, FileFact, GuestFacts, HostState
from pvefix.vmconfig import VMConfig

CASES = Path(__file__).parent / "cases"
REQUIRED_EXPECT = ("phases", "findings", "noops", "severities", "noop_reasons")


def load_case(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text())
    missing = [k for k in ("scenario", "vmid", "expect") if k not in case]
    missing += [f"expect.{k}" for k in REQUIRED_EXPECT if k not in case.get("expect", {})]
    if missing:
        raise AssertionError(f"{path.name}: missing keys {missing}")
    return case


def build_tree(case: dict[str, Any], dest: Path) -> Path:
    """The case's own host tree under `dest`: the scenario's files with the "tree" edits."""
    root = dest / "tree"
    shutil.copytree(resolve_scenario(case["scenario"]), root, symlinks=True)
    spec = case.get("tree", {})
    for pattern in spec.get("remove", []):
        hits = sorted(root.glob(pattern.lstrip("/")))
        if not hits:
            raise AssertionError(f"tree.remove {pattern!r} matches nothing")
        for hit in hits:
            shutil.rmtree(hit) if hit.is_dir() and not hit.is_symlink() else hit.unlink()
    for path, text in spec.get("write", {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    meta_file = root / META_FILE
    meta = json.loads(meta_file.read_text())
    for key, value in spec.get("meta", {}).items():
        meta[key] = {**meta[key], **value} if isinstance(value, dict) else value
    meta_file.write_text(json.dumps(meta, indent=2) + "\n")
    return root


def build_state(case: dict[str, Any]) -> HostState:
    if "tree" in case:
        with tempfile.TemporaryDirectory() as tmp:
            state = read_bundle(build_tree(case, Path(tmp)), int(case["vmid"]))
    else:
        state = read_bundle(resolve_scenario(case["scenario"]), int(case["vmid"]))
    edit = case.get("edit", {})
    vm = state.vm
    if "config_text" in edit or "config_set" in edit or "config_delete" in edit:
        cfg = VMConfig.parse(edit.get("config_text", vm.config_text))
        for key, value in edit.get("config_set", {}).items():
            cfg.main.set(key, value)
        for key in edit.get("config_delete", []):
            cfg.main.delete(key)
        vm = vm.model_copy(update={"config_text": cfg.render(), "digest": cfg.digest})
    if "vm" in edit:
        vm = vm.model_copy(update=edit["vm"])
    files = dict(state.files)
    for path, text in edit.get("files", {}).items():
        files[path] = FileFact.of(path, text)
    update: dict[str, Any] = {"vm": vm, "files": files}
    if "boot_tool" in edit:
        update["boot_tool"] = BootToolFacts(**edit["boot_tool"])
    if "access" in edit:
        update["access"] = AccessFacts(**{**state.access.model_dump(), **edit["access"]})
    if "guest" in edit:
        update["guest"] = GuestFacts(**edit["guest"])
    if "node" in edit:
        update["node"] = state.node.model_copy(update=edit["node"])
    return state.model_copy(update=update)
