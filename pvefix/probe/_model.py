"""Where the probe's model base comes from: pydantic v2, or the standard-library stand-in.

Inside pvefix, pydantic is installed and used. In a guest that only has python3 (the zipapp
that `pvefix verify` ships), `pvefix.probe._stdmodel` stands in; the zipapp sets
`PVEFIX_PROBE_STDLIB=1` so the guest's own pydantic (maybe v1) is never picked up. Either way the
JSON report is validated by real pydantic when pvefix reads it back.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

ENV_STDLIB = "PVEFIX_PROBE_STDLIB"

if TYPE_CHECKING:
    from pydantic import BaseModel, ConfigDict, Field, ValidationError
else:

    def _use_pydantic() -> bool:
        if os.environ.get(ENV_STDLIB) == "1":
            return False
        try:
            import pydantic
        except ImportError:
            return False
        return str(getattr(pydantic, "VERSION", "1")).startswith("2")

    if _use_pydantic():
        from pydantic import BaseModel, ConfigDict, Field, ValidationError
    else:
        from pvefix.probe._stdmodel import BaseModel, ConfigDict, Field, ValidationError

#: True when the stand-in is in use (the zipapp in a guest, or no pydantic installed).
STDLIB_MODELS: bool = BaseModel.__module__ == "pvefix.probe._stdmodel"

__all__ = ["STDLIB_MODELS", "BaseModel", "ConfigDict", "Field", "ValidationError"]
