"""The plan file (pvefix.plan/v1): written by `pvefix plan --out`, read by `pvefix apply`.
Reader and writer live here together, so the two cannot drift apart."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic

from pvefix.errors import PvefixError
from pvefix.planner.model import PLAN_SCHEMA, Plan

if TYPE_CHECKING:
    from pvefix.vmconfig import VMConfig

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
        plan = Plan.model_validate(data)
    except pydantic.ValidationError as exc:
        # Each field and the reason, never the input (a plan file may be anyone's bytes).
        problems = [".".join(str(p) for p in err["loc"]) + f": {err['msg']}"
                    for err in exc.errors(include_url=False, include_input=False)[:5]]
        more = len(exc.errors()) - len(problems)
        raise PvefixError("invalid plan: " + "; ".join(problems)
                          + (f" (and {more} more)" if more > 0 else ""),
                          source=str(path)) from None
    differences = config_after_differences(plan)
    if differences:
        raise PvefixError("the plan file's config_after is not what its phases write (show and "
                          "rehearse would use another config than apply writes); make the plan "
                          "again with `pvefix plan --out`:\n  " + "\n  ".join(differences),
                          source=str(path))
    return plan


def config_after_differences(plan: Plan) -> list[str]:
    """How the file's `config_after` differs from the config its phases write, key by key
    (empty: it is that config). A plan is one thing: what `show` and `rehearse --plan` use is
    derived from the phases `apply` writes."""
    from pvefix.planner.plan import config_after
    from pvefix.vmconfig import VMConfig

    source = f"{plan.observed.vmid}.conf"
    derived = config_after(plan.config_before, source, plan.observed.vm_status == "running",
                           plan.phases)
    if derived == plan.config_after:
        return []
    try:
        said = VMConfig.parse(plan.config_after, "config_after")
    except PvefixError as exc:
        return [f"config_after is no VM config ({exc.message})"]
    want = _keyed(VMConfig.parse(derived, source))
    have = _keyed(said)
    out = []
    for key in sorted(want.keys() | have.keys()):
        if want.get(key) != have.get(key):
            out.append(f"{key} is {_shown(have.get(key))} there, the phases give "
                       f"{_shown(want.get(key))}")
    return out or ["its text differs from the phases' (order, comments or spacing)"]


def _keyed(cfg: VMConfig) -> dict[str, str]:
    """Every value of a config by where it is: main's keys, `[PENDING] KEY`, `[PENDING] delete
    KEY` and other sections' keys (`[snap] memory`), descriptions included."""
    from pvefix.vmconfig.nextstart import NextStart

    view = NextStart.from_config(cfg)
    out = dict(view.current)
    out |= {f"[PENDING] {k}": v for k, v in view.pending.items()}
    out |= {f"[PENDING] delete {k}": "forced" if f else "yes" for k, f in view.deletes.items()}
    for sec in cfg.sections:
        if sec.kind not in ("main", "pending"):
            out |= {f"[{sec.name}] {k}": v for k, v in sec.as_dict().items()}
    return out


def _shown(value: str | None) -> str:
    return "absent" if value is None else repr(value)
