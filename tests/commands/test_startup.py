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



def test_a_plan_does_not_import_the_plugin_scan_it_turns_off(tmp_path: Path) -> None:
    """pydantic plugins are off (PYDANTIC_DISABLE_PLUGINS): their loader's entry-point scan, and
    the importlib.metadata and email it imports (~13 ms), are not loaded; pydantic still asks
    for the plugins and gets none."""
    from pvefix.hosttree import materialize_scenario

    bundle = tmp_path / "kpro6"
    materialize_scenario("kpro6", bundle)
    loaded = _modules_after(
        "import contextlib, io\nfrom pvefix.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['plan', '100', '--bundle', {str(bundle)!r}]) == 2\n"
        "from pydantic.plugin._loader import get_plugins\nassert tuple(get_plugins()) == ()")
    assert "pydantic.plugin._schema_validator" in loaded, "pydantic asked for its plugins"
    assert not {"importlib.metadata", "email"} & loaded
