"""The plan file (pvefix.plan/v1): written by `pvefix plan --out`, read by `pvefix apply`.
Reader and writer live here together, so the two cannot drift apart."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pydantic

from pvefix.errors import PvefixError
from pvefix.planner.model import PLAN_SCHEMA, Plan

PLANS_DIR = Path("plans")
PLAN_FILE_MAX = 16 << 20  # a plan of a VM is kilobytes; anything this large is not one


def plan_file_path(out: str) -> Path:
    """A bare file name goes into plans/; a path with a directory is used as given."""
    p = Path(out)
    return p if p.parent != Path(".") or out.startswith("./") else PLANS_DIR / p


def save_plan(plan_dict: dict[str, object], out: str) -> Path:
    """Write a plan (as `Plan.to_json_dict()` gives it) with the time it was saved."""
    path = plan_file_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dict(plan_dict)
    data["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def load_plan_file(path: Path) -> Plan:
    """A plan file (pvefix.plan/v1) as `save_plan` writes it."""
    from pvefix.hosttree.safe import read_local

    raw = read_local(path, PLAN_FILE_MAX)  # a FIFO or a device is refused, never read
    if raw is None:
        raise PvefixError("plan file not found", source=str(path))
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PvefixError(f"not UTF-8 text (byte {exc.start})", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise PvefixError(f"not JSON: {exc.msg}", source=str(path), line=exc.lineno) from None
    except RecursionError:
        raise PvefixError("not a plan file: JSON nested too deeply", source=str(path)) from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise PvefixError(f"not a plan file: {exc}", source=str(path)) from None
    if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA:
        raise PvefixError(f"not a {PLAN_SCHEMA} plan file", source=str(path))
    data.pop("created_at", None)
    try:
        return Plan.model_validate(data)
    except pydantic.ValidationError as exc:
        # Each field and the reason, never the input (a plan file may be anyone's bytes).
        problems = [".".join(str(p) for p in err["loc"]) + f": {err['msg']}"
                    for err in exc.errors(include_url=False, include_input=False)[:5]]
        more = len(exc.errors()) - len(problems)
        raise PvefixError("invalid plan: " + "; ".join(problems)
                          + (f" (and {more} more)" if more > 0 else ""),
                          source=str(path)) from None
