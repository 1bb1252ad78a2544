"""Process entry point: `pvefix` and `python -m pvefix`.

`--version` is answered before typer (or anything heavy) is imported, so it starts fast.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from typing import NoReturn


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (errors are mapped in commands/run.py)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from pvefix import __version__

        print(f"pvefix {__version__}")
        return 0
    # pydantic looks for plugins (observability hooks) by scanning every installed package's
    # entry points when the first model is built: ~20-80 ms of a CLI run, for plugins pvefix
    # does not use. Off unless the environment says otherwise (PYDANTIC_DISABLE_PLUGINS).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_scan()
    from pvefix.cli import build_command
    from pvefix.commands.run import run_app

    return run_app(build_command(), args)


def _no_plugin_scan() -> None:
    """With every pydantic plugin off, pydantic's plugin loader has nothing to load, yet
    importing it imports importlib.metadata (and email with it) for the entry-point scan the
    setting turns off: ~13 ms of a plan's start-up (docs/benchmarks.md). Its one function,
    answering as it would (no plugins), stands in for it; an explicit plugin list (the
    variable naming only some) keeps pydantic's own loader."""
    name = "pydantic.plugin._loader"
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true") or (
            name in sys.modules):
        return
    stand_in = types.ModuleType(name, "pvefix: pydantic plugins are off (PYDANTIC_DISABLE_PLUGINS)")
    stand_in.get_plugins = tuple  # type: ignore[attr-defined]  # get_plugins() -> ()
    sys.modules[name] = stand_in


def entry() -> NoReturn:
    """The process's entry point (the `pvefix` script, `python -m pvefix`): main(), then exit
    without the interpreter's last sweeps for reference cycles.

    At exit CPython runs its cycle collector over every object the run made (a 1,000-VM check
    leaves ~50,000): 70-140 ms of a ~1 s run (docs/benchmarks.md), only to free memory the
    operating system takes back anyway. Frozen objects are skipped by those sweeps; reference
    counting still frees everything else and atexit handlers still run, and pvefix closes its
    files and sessions itself before main() returns. Not in main(): tests call it in-process,
    where frozen objects would stay for the rest of the run."""
    code = main()
    gc.freeze()
    raise SystemExit(code)
