"""The simulator answers as Proxmox VE's own API daemons do (issue 24, item 2).

One fresh ../shared/pve-api node and one fresh `pvefix sim` node of kpro6 get the same requests:
../shared/pve-api/compare.py's 75 (run as a program, `--json`), then pvefix's own requests that
compare.py lacks (agent exec-status/file-read/file-write, the apply snapshot, and what a
least-privileged token reads). Every field where the two answers differ, after compare.py's
masking of volatile values, must be listed with its reason in tests/conformance/
sim_differences.py, and docs/simulator.md lists the same entries; a listed difference that no
longer occurs fails too, so the list stays exact.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pvefix.sim.serve import write_ready_file
from tests.conformance.sim_differences import ALLOWED
from tests.shared import SHARED

pytestmark = pytest.mark.conformance

COMPARE = SHARED / "pve-api" / "compare.py"
DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"
Q = "/nodes/{node}/qemu"
# pvefix's requests that compare.py does not send: (label, method, path, params, auth, task)
EXTRA: tuple[tuple[str, str, str, dict[str, str] | None, str, bool], ...] = (
    ("extra: agent exec-status 100", "GET", Q + "/100/agent/exec-status", {"pid": "1"},
     "token", False),
    ("extra: agent file-read 100", "GET", Q + "/100/agent/file-read", {"file": "/etc/hostname"},
     "token", False),
    ("extra: agent file-write 100", "POST", Q + "/100/agent/file-write",
     {"file": "/tmp/x", "content": "eA==", "encode": "0"}, "token", False),
    ("extra: qemu list full=1 after power actions", "GET", Q, {"full": "1"}, "token", False),
    ("extra: snapshot 101", "POST", Q + "/101/snapshot",
     {"snapname": "pvefix_conformance", "vmstate": "0", "description": "before pvefix apply"},
     "token", True),
    ("extra: task log limit=1000", "GET", "/nodes/{node}/tasks", {"limit": "1", "vmid": "101"},
     "token", False),
    ("extra: privsep resources", "GET", "/cluster/resources", {"type": "vm"}, "privsep", False),
    ("extra: privsep qemu list", "GET", Q, {"full": "1"}, "privsep", False),
    ("extra: privsep status/current 100", "GET", Q + "/100/status/current", None, "privsep",
     False),
    ("extra: privsep pending 100", "GET", Q + "/100/pending", None, "privsep", False),
    ("extra: privsep config 100 current=1", "GET", Q + "/100/config", {"current": "1"},
     "privsep", False),
    ("extra: privsep hardware pci", "GET", "/nodes/{node}/hardware/pci",
     {"pci-class-blacklist": ""}, "privsep", False),
    ("extra: privsep mapping pci", "GET", "/cluster/mapping/pci", None, "privsep", False),
    ("extra: privsep cluster status", "GET", "/cluster/status", None, "privsep", False),
    ("extra: privsep permissions /vms/100", "GET", "/access/permissions", {"path": "/vms/100"},
     "privsep", False),
    ("extra: privsep permissions /", "GET", "/access/permissions", {"path": "/"}, "privsep",
     False),
    ("extra: token permissions /vms/100", "GET", "/access/permissions", {"path": "/vms/100"},
     "token", False),
    ("extra: privsep machine q35", "PUT", Q + "/101/config", {"machine": "q35"}, "privsep",
     False),
    ("extra: privsep start 101", "POST", Q + "/101/status/start", None, "privsep", True),
    ("extra: privsep task list", "GET", "/nodes/{node}/tasks", {"limit": "1"}, "privsep", False),
    ("extra: privsep stop 101", "POST", Q + "/101/status/stop", None, "privsep", True),
    ("extra: privsep args", "PUT", Q + "/101/config", {"args": "-no-reboot"}, "privsep", False),
)


def _compare_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pve_api_compare", COMPARE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sampled(ready: Path, timeout: float = 40.0) -> None:
    """Wait for pvestatd's (or the simulator's stand-in's) first sample: /cluster/resources
    says `unknown` until then, on both (the lag itself is tested in tests/sim)."""
    cmp = _compare_module()
    node = cmp.Node(str(ready))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = node.req("GET", "/cluster/resources", {"type": "vm"})["body"]["data"] or []
        if items and all(i.get("status") != "unknown" for i in items):
            return
        time.sleep(0.5)
    raise AssertionError(f"{ready}: /cluster/resources still says unknown")


def _extra_rows(ready_a: Path, ready_b: Path) -> list[dict[str, Any]]:
    cmp = _compare_module()
    a, b = cmp.Node(str(ready_a)), cmp.Node(str(ready_b))
    rows = []
    for label, method, path, params, auth, task in EXTRA:
        row: dict[str, Any] = {"label": label, "method": method, "path": path}
        for side, node in (("a", a), ("b", b)):
            res = node.req(method, path, params, hdr=cmp.headers(node, auth))
            row[side] = cmp.outcome(node, res, task)
        rows.append(row)
    return rows


def differences(a: object, b: object, path: str = "") -> Iterator[str]:
    """Where two masked answers differ, as paths (`data[*].maxdisk`: list items by position,
    shown as [*] so one entry covers every item)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                yield sub
            else:
                yield from differences(a[key], b[key], sub)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            yield from differences(x, y, f"{path}[*]")
    elif a != b:
        yield path or "."


@pytest.fixture(scope="module")
def compared(pve_api: Any, sim_launcher: Any, tmp_path_factory: pytest.TempPathFactory,
             ) -> dict[str, str]:
    """`label: path` -> one line showing both sides, for every difference found."""
    if not COMPARE.is_file():
        pytest.skip(f"needs ../shared: {COMPARE} is absent")
    base = tmp_path_factory.mktemp("simvsapi")
    real = pve_api.fresh("kpro6")
    sim_ready = base / "sim.json"
    write_ready_file(sim_launcher.start("kpro6", task_seconds=0.2), sim_ready)
    for ready in (real.ready_file, sim_ready):
        _sampled(ready)
    out = base / "compare.json"
    done = subprocess.run([sys.executable, str(COMPARE), str(real.ready_file), str(sim_ready),
                           "--json", str(out)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text()) + _extra_rows(real.ready_file, sim_ready)
    found: dict[str, str] = {}
    for row in rows:
        for where in differences(row["a"], row["b"]):
            found[f"{row['label']}: {where}"] = (
                f"real {json.dumps(row['a'], sort_keys=True)[:600]}\n"
                f"sim  {json.dumps(row['b'], sort_keys=True)[:600]}")
    return found


def test_the_simulator_differs_from_proxmox_only_where_listed(compared: dict[str, str]) -> None:
    unlisted = {k: v for k, v in compared.items() if k not in ALLOWED}
    assert not unlisted, "\n".join(f"{k}\n{v}" for k, v in unlisted.items())


def test_every_listed_difference_still_occurs(compared: dict[str, str]) -> None:
    stale = sorted(k for k in set(ALLOWED) - set(compared)
                   if not ALLOWED[k].startswith("volatile:"))
    assert not stale, f"listed in sim_differences.py but no longer different: {stale}"


def test_docs_list_the_same_differences_with_their_reasons() -> None:
    """docs/simulator.md's table of remaining differences is ALLOWED, entry for entry."""
    text = DOC.read_text()
    section = text.split("## Where the simulator differs from Proxmox's own API", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, re.M))
    assert rows == ALLOWED
