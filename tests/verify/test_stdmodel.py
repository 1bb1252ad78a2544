"""The standard-library stand-in behaves like pydantic where the probe relies on it."""

from __future__ import annotations

import pytest

from pvefix.probe._stdmodel import BaseModel, ConfigDict, Field, ValidationError


class Inner(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int
    rate: float | None = None


class Outer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: str = Field(default="v1", alias="schema")
    items: tuple[Inner, ...] = ()
    table: dict[str, Inner] = Field(default_factory=dict)
    flag: bool = False


def test_nested_values_become_models_with_pydantics_lax_numbers() -> None:
    outer = Outer.model_validate({"items": [{"size": "3", "rate": 2}], "table": {"a": {"size": 1}}})
    assert outer.items == (Inner(size=3, rate=2.0),)
    assert isinstance(outer.items[0].rate, float)
    assert outer.table["a"].size == 1


def test_json_uses_the_alias_and_reads_back_equal() -> None:
    outer = Outer(items=(Inner(size=1),), flag=True)
    text = outer.model_dump_json(by_alias=True, indent=2)
    assert '"schema": "v1"' in text
    assert Outer.model_validate_json(text) == outer


def test_unknown_keys_wrong_types_and_missing_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="extra inputs"):
        Inner.model_validate({"size": 1, "colour": "red"})
    with pytest.raises(ValidationError, match="expected int"):
        Inner(size="many")
    with pytest.raises(ValidationError, match="field required"):
        Inner()


def test_frozen_values_cannot_change_and_copies_take_updates() -> None:
    inner = Inner(size=1)
    with pytest.raises(ValidationError, match="frozen"):
        inner.size = 2
    assert inner.model_copy(update={"size": 2}) == Inner(size=2)
    assert inner == Inner(size=1)


def test_default_factories_give_each_instance_its_own_value() -> None:
    a, b = Outer(), Outer()
    assert a.table == {} and a.table is not b.table
