"""Process entry point: `pvefix` and `python -m pvefix`.

`--version` is answered before typer (or anything heavy) is imported, so it starts fast.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (errors are mapped in commands/run.py)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from pvefix import __version__

        print(f"pvefix {__version__}")
        return 0
    from pvefix.cli import build_command
    from pvefix.commands.run import run_app

    return run_app(build_command(), args)
