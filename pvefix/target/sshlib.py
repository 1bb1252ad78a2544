"""paramiko, as every pvefix module imports it: without paying for invoke at start-up.

paramiko's `config` module imports invoke when it is installed (paramiko needs it only to run
an ssh_config `Match exec` line), and invoke pulls in its vendored YAML, unittest.mock and
asyncio: about 55 ms of every SSH-using command's start-up on the bench machine
(docs/benchmarks.md). So paramiko is imported here with invoke hidden from it for that moment,
and then handed a stand-in that imports invoke on first use: `Match exec` still works for a
program that uses paramiko's SSHConfig beside pvefix. pvefix reads no ssh_config itself. A
program that imported invoke before pvefix keeps it as it is.

paramiko logs every refused connection (a rebooting host) with a traceback on stderr; pvefix
reports connection failures itself, through exceptions, so paramiko's log goes nowhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from typing import Any


class Deferred:
    """A module imported on first attribute access."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def _hide(name: str) -> bool:
    """Make `import name` fail until `_deferred` (True when it was hidden)."""
    if name in sys.modules or "paramiko" in sys.modules:
        return False
    sys.modules[name] = None  # type: ignore[assignment]
    return True


def _deferred(name: str) -> None:
    del sys.modules[name]
    config = sys.modules.get("paramiko.config")
    if getattr(config, name, False) is None and importlib.util.find_spec(name) is not None:
        setattr(config, name, Deferred(name))
        setattr(config, f"{name}_import_error", None)


_hidden = _hide("invoke")
try:
    import paramiko
finally:
    if _hidden:
        _deferred("invoke")
logging.getLogger("paramiko").addHandler(logging.NullHandler())

__all__ = ["Deferred", "paramiko"]
