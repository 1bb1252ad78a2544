"""`python -m pvefix.schemas [DOCS_DIR]`: rewrite the schemas in the package and in docs/schemas."""

from __future__ import annotations

import sys
from pathlib import Path

from pvefix.schemas import SCHEMAS, schema_text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    docs = Path(args[0]) if args else Path("docs") / "schemas"
    package = Path(__file__).resolve().parent
    docs.mkdir(parents=True, exist_ok=True)
    for name in SCHEMAS:
        text = schema_text(name)
        for folder in (package, docs):
            (folder / f"{name}.schema.json").write_text(text, encoding="utf-8")
    print(f"wrote {len(SCHEMAS)} schemas to {package} and {docs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
