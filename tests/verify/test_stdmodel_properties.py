"""Property: for what the probe's workers print, the stand-in models accept and write exactly
what pydantic accepts and writes (the report's models, loaded a second time on the stand-in)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import pvefix.probe.report as real
from pvefix.probe._stdmodel import ValidationError as StdValidationError


def _stand_in_report_module() -> Any:
    source = Path(real.__file__).read_text(encoding="utf-8").replace(
        "from pvefix.probe._model import", "from pvefix.probe._stdmodel import"
    )
    module = types.ModuleType("stand_in_report")
    sys.modules[module.__name__] = module  # get_type_hints looks the module up
    exec(compile(source, "stand_in_report.py", "exec"), module.__dict__)  # noqa: S102
    return module


std = _stand_in_report_module()

values = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**12),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
)
PAIR_FIELDS = [name for name in real.PairResult.model_fields]
pairs = st.dictionaries(st.sampled_from([*PAIR_FIELDS, "unknown"]), values, max_size=12)
rows = st.dictionaries(st.sampled_from(["bytes", "latency_us", "bus_bandwidth_gbps", "correct"]),
                       values, max_size=4)


def _same(name: str, data: dict[str, Any]) -> None:
    try:
        want = getattr(real, name).model_validate(data).model_dump(mode="json")
    except ValueError:
        want = None
    try:
        got = getattr(std, name).model_validate(data).model_dump()
    except StdValidationError:
        got = None
    assert got == want, f"{name} {data!r}: stand-in {got!r}, pydantic {want!r}"


@settings(max_examples=400, deadline=None)
@given(pairs)
def test_pair_results_agree_with_pydantic(data: dict[str, Any]) -> None:
    _same("PairResult", data)


@settings(max_examples=300, deadline=None)
@given(rows)
def test_allreduce_rows_agree_with_pydantic(data: dict[str, Any]) -> None:
    _same("AllReduceRow", data)
