"""Start-up does no work it does not need: `--version` imports neither typer nor pydantic, and
running one command imports that command's modules, not every command's. (Timings are in
bench/startup_and_parse.py; these check what is imported, which can fail without a clock.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_version_imports_neither_typer_nor_pydantic() -> None:
    loaded = _modules_after("from pvefix.main import main\nassert main(['--version']) == 0")
    heavy = {m for m in loaded if m.split(".")[0] in ("typer", "pydantic", "click", "rich")}
    assert not heavy, f"--version imported {sorted(heavy)}"


def test_one_command_imports_only_its_own_module() -> None:
    loaded = _modules_after(
        "from pvefix.cli import build_command\n"
        "command = build_command()\n"
        "assert command.commands['plan'].name == 'plan'"
    )
    others = {"pvefix.commands.apply_cmd", "pvefix.commands.sim_cmd", "pvefix.sim",
              "pvefix.commands.probe_cmd", "pvefix.verify", "pvefix.hosttree.large",
              "paramiko", "proxmoxer", "jinja2"}
    assert "pvefix.commands.plan_cmd" in loaded
    assert not others & loaded, f"`plan` imported {sorted(others & loaded)}"


def test_help_still_lists_every_command() -> None:
    from pvefix.cli import COMMANDS, build_command

    command = build_command()
    assert list(command.commands) == list(COMMANDS)
    assert all(command.commands[name].name == name for name in COMMANDS)


def test_options_left_out_build_no_coercion_and_given_ones_still_coerce() -> None:
    """typer builds a pydantic TypeAdapter per option (~1 ms each, ~40 for `plan`): pvefix
    builds one only for an option given a value."""
    import pytest
    import typer

    from pvefix.cli import LazyCoercion, load_command

    command = load_command("plan")
    ctx = command.make_context("plan", ["100", "--bundle", "x"], resilient_parsing=True)
    lazy = {p.name: p._runtime_param for p in command.params if hasattr(p, "type_descriptor")}
    assert lazy and all(isinstance(r, LazyCoercion) for r in lazy.values())
    port = next(p for p in command.params if p.name == "port")
    assert port._runtime_param.coerce(None, param=port, ctx=ctx) is None
    assert port._runtime_param._real is None  # left out: nothing built
    assert port._runtime_param.coerce("8006", param=port, ctx=ctx) == 8006
    with pytest.raises(typer.BadParameter):
        port._runtime_param.coerce("8k", param=port, ctx=ctx)
    vmids = next(p for p in command.params if p.name == "vmids")
    assert vmids._runtime_param.coerce(None, param=vmids, ctx=ctx) == ()
    assert vmids._runtime_param.coerce(("1", "2"), param=vmids, ctx=ctx) == [1, 2]
