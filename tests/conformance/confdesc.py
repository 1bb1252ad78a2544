"""qemu-server's config schema as Proxmox's own code states it, for the simulator to ship.

`pve_schema.pl dump` (beside this file) loads qemu-server from ../shared/pve-oracle and prints
`json_config_properties()`: per key its type, range, length, pattern, enumeration and format name
(no descriptions). `derive()` folds indexed keys (hostpci0..hostpci15) into families; the result
is pvefix/sim/confdesc.json, which the simulator reads at run time (it never runs Perl).

Regenerate after an oracle update:  .venv/bin/python -m tests.conformance.confdesc --write
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.shared import ORACLE

HELPER = Path(__file__).with_name("pve_schema.pl")
TARGET = Path(__file__).resolve().parents[2] / "pvefix" / "sim" / "confdesc.json"
_INDEXED = re.compile(r"^([a-z][a-z_-]*?)(\d+)$")


def perl(mode: str, stdin: str = "") -> str:
    env = {**os.environ, "PVE_ORACLE_ROOT": str(ORACLE)}
    done = subprocess.run(["perl", str(HELPER), mode], input=stdin, capture_output=True,
                          text=True, env=env, check=True)
    return done.stdout


def sources_line() -> str:
    for line in (ORACLE / "SOURCES").read_text(encoding="utf-8").splitlines():
        if line.startswith("qemu-server "):
            return line.strip()
    return "qemu-server (version unknown)"


def derive(raw: dict[str, dict[str, Any]], source: str) -> dict[str, Any]:
    """Plain keys as they are; numbered keys whose every member has one schema as a family."""
    families: dict[str, list[int]] = {}
    for key in raw:
        m = _INDEXED.match(key)
        if m and str(int(m.group(2))) == m.group(2):
            families.setdefault(m.group(1), []).append(int(m.group(2)))
    indexed: dict[str, Any] = {}
    folded: set[str] = set()
    for prefix, numbers in sorted(families.items()):
        numbers.sort()
        specs = [raw[f"{prefix}{n}"] for n in numbers]
        if numbers == list(range(len(numbers))) and all(s == specs[0] for s in specs):
            indexed[prefix] = {"count": len(numbers), "schema": specs[0]}
            folded.update(f"{prefix}{n}" for n in numbers)
    return {
        "source": f"json_config_properties() of {source}",
        "keys": {k: v for k, v in sorted(raw.items()) if k not in folded},
        "indexed": indexed,
    }


def current() -> dict[str, Any]:
    """What Proxmox's code says now (needs ../shared/pve-oracle and perl)."""
    return derive(json.loads(perl("dump")), sources_line())


def rendered(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    text = rendered(current())
    if "--write" in sys.argv:
        TARGET.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
