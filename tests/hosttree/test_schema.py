"""docs/host-tree.schema.json is generated from the model and must be current."""

from __future__ import annotations

import json
from pathlib import Path

from pvefix.hosttree.schema import schema_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "host-tree.schema.json"


def test_the_committed_schema_is_current() -> None:
    assert DOC.read_text() == schema_text(), (
        "docs/host-tree.schema.json is stale: run "
        "`python -m pvefix.hosttree.schema docs/host-tree.schema.json`"
    )


def test_the_schema_forbids_unknown_keys_at_the_top() -> None:
    schema = json.loads(schema_text())
    assert schema["additionalProperties"] is False
    assert "schema" in schema["required"] and "node" in schema["required"]
