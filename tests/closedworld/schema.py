"""qemu-server's schema as the closed world's tests read it: the captured copy (plain tests) or
Proxmox's own code (conformance). `python -m tests.closedworld.schema --write` refreshes the
capture of the hostpci sub-options after an oracle update (confdesc.json has its own)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pvefix.sim import confschema

HOSTPCI_CAPTURE = Path(__file__).with_name("hostpci_format.json")


def key_names(desc: dict[str, Any]) -> list[str]:
    """Every config key of a confdesc: plain keys, numbered families as `prefixN`."""
    return sorted([*desc["keys"], *(f"{p}N" for p in desc["indexed"])])


def lock_values(desc: dict[str, Any]) -> list[str]:
    return list(desc["keys"]["lock"]["enum"])


def captured() -> tuple[dict[str, Any], list[str]]:
    """(confdesc, hostpci sub-options) as captured in this repository."""
    return confschema.confdesc(), json.loads(HOSTPCI_CAPTURE.read_text(encoding="utf-8"))


def live() -> tuple[dict[str, Any], list[str]]:
    """The same from ../shared/pve-oracle (needs perl)."""
    from tests.conformance import confdesc

    return confdesc.current(), json.loads(confdesc.perl("hostpci"))


if __name__ == "__main__":
    _, options = live()
    text = json.dumps(options) + "\n"
    if "--write" in sys.argv:
        HOSTPCI_CAPTURE.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
