"""Closed world: the vm states pvefix may meet, classified (see pvefix.closedworld)."""

from __future__ import annotations

from pvefix.closedworld.model import Input

INPUTS: tuple[Input, ...] = ()
