from __future__ import annotations

from pathlib import Path

from pvefix.planner.docs import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "why-each-change.md"


def test_why_each_change_page_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/why-each-change.md is stale: run python -m pvefix.planner.docs"
        " docs/why-each-change.md"
    )


def test_every_rule_is_documented() -> None:
    from pvefix.planner.rules import RULES

    text = render()
    for rule in RULES:
        name = rule.__module__.rsplit(".", 1)[-1]
        module = __import__(rule.__module__, fromlist=["NAME"])
        assert f"## `{module.NAME}`" in text, name
