"""One model of the VM's next start: pvefix.vmconfig.nextstart. The main section with
[PENDING] applied and its deletes honoured is computed there and nowhere else, from a config
file or from the API's pending rows; so no other module reads a section's pending deletes, a
pending row's `delete`, or merges a [PENDING] section over the main one itself."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pvefix"
MODEL = PACKAGE / "vmconfig" / "nextstart.py"
#: Who else may touch [PENDING]'s parts, and why: the lossless file model parses them, the
#: inspector shows the sections as written, and the simulator is Proxmox's writer (it edits
#: [PENDING] and commits it at a start, as qemu-server does).
ALLOWED = {
    PACKAGE / "vmconfig" / "config.py": "parses the sections",
    PACKAGE / "vmconfig" / "inspect.py": "shows the sections as written",
    PACKAGE / "sim" / "vmview.py": "the simulator's Proxmox edits and commits [PENDING]",
    PACKAGE / "sim" / "vmops.py": "the simulator's Proxmox update, start and snapshot code",
}

#: What NextStart values are called: their `deletes` and `has_pending` are the model's own.
MODEL_NAMES = ("ns", "nxt", "next", "view", "saved")


def _offences(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("deletes", "has_pending") and (
            _name(node.value) not in MODEL_NAMES
        ):
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Attribute) and node.attr == "pending" and isinstance(
            node.ctx, ast.Load
        ) and _is_config(node.value):
            found.append((node.lineno, ".pending of a config"))
        key = _key_read(node)  # a load: writing a `delete` parameter is fine
        if key == "delete":
            found.append((node.lineno, f"a row's {key!r}"))
    return found


def _name(value: ast.expr) -> str:
    return value.attr if isinstance(value, ast.Attribute) else (
        value.id if isinstance(value, ast.Name) else "")


def _is_config(value: ast.expr) -> bool:
    """`cfg.pending`, `snap.pending`, `ctx.cfg.pending`: a VMConfig's [PENDING] section."""
    return _name(value) in ("cfg", "snap", "config", "ca", "cb", "snap_cfg", "live_cfg")


def _key_read(node: ast.AST) -> str | None:
    """The constant key of `x["k"]` or `x.get("k")`."""
    if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and isinstance(node.ctx, ast.Load)):
        return str(node.slice.value)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and node.args
            and isinstance(node.args[0], ast.Constant)):
        return str(node.args[0].value)
    return None


def test_only_the_model_computes_the_next_start() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == MODEL or path in ALLOWED:
            continue
        for line, what in _offences(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {what}")
    assert found == [], (
        "compute the next start with pvefix.vmconfig.nextstart.NextStart:\n" + "\n".join(found))


def test_the_rule_sees_what_it_forbids() -> None:
    # The check above means something only while it finds these forms.
    code = ("a = cfg.pending.deletes\nb = row.get('delete')\nc = row['delete']\n"
            "d = ctx.cfg.pending.as_dict()\ne = cfg.has_pending\n")
    assert len(_offences(ast.parse(code))) == 6
    model = {what for _, what in _offences(ast.parse(MODEL.read_text(encoding="utf-8")))}
    assert ".deletes" in model and "a row's 'delete'" in model
