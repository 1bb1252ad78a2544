"""A finding: something the admin should know, with or without a change behind it (floor 0).

Defined below the planner so that pvefix.closedworld (whose `not_established` makes one) and the
planner (which imports the closed world's tables) do not form a cycle; pvefix.planner.model
re-exports both names, so every existing import keeps working.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["info", "warning", "error"]


class Finding(BaseModel):
    """Something the admin should know, with or without a change behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    rule: str
    severity: Severity
    title: str
    detail: str
    evidence: list[str] = Field(default_factory=list)
