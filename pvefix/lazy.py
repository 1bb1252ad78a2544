"""Packages whose names load on first use (PEP 562 module `__getattr__`).

A package's `__init__` that imports every submodule makes each user of one submodule pay for
all of them: `pvefix check` needs two models of the host tree, not its scenarios and tree
walker. Such a package lists where each public name lives and takes its `__getattr__` from
here; type checkers read the same names from an `if TYPE_CHECKING:` block beside it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `package.<where[name]>` on first use
    of `name` (and keeps it in the package's namespace afterwards)."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
