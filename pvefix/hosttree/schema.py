"""Write docs/host-tree.schema.json from the HostMeta model.

    python -m pvefix.hosttree.schema [PATH]     # default: docs/host-tree.schema.json

tests/hosttree/test_schema.py fails when the committed file is not current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pvefix.hosttree.meta import json_schema

DEFAULT_PATH = Path("docs") / "host-tree.schema.json"


def schema_text() -> str:
    """The schema file's exact text."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the schema file; returns an exit code."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DEFAULT_PATH
    path.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
