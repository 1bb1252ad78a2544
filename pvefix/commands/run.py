"""The one place where exceptions become exit codes and messages."""

from __future__ import annotations

import sys
from typing import Any

import typer

from pvefix.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, PvefixError, plain_words
from pvefix.render.inert import inert_text


def run_app(app: Any, args: list[str]) -> int:
    """Run a typer app (or the click command built from it) and return the exit code."""
    command = typer.main.get_command(app) if isinstance(app, typer.Typer) else app
    try:
        result: Any = command.main(args=args, prog_name="pvefix", standalone_mode=False)
    except PvefixError as exc:
        _say_error(inert_text(f"pvefix: error: {exc}"))
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        print("pvefix: aborted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("pvefix: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_ERROR
    except OSError as exc:
        # A file or directory the user named (an output path, a key): its name and the
        # system's reason, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        _say_error(f"pvefix: error: {where}{exc.strerror or exc}")
        return EXIT_ERROR
    except typer.TyperException as exc:  # usage errors: typer's own message, in our words
        _own_words(exc)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            print(f"pvefix: error: {exc}", file=sys.stderr)
        # Exit 2 means "changes pending / drift" to pvefix's callers: a usage error is 1.
        return EXIT_OK if type(exc).__name__ == "NoArgsIsHelpError" else EXIT_ERROR
    return int(result) if isinstance(result, int) else 0


def _say_error(text: str) -> None:
    """An error on stderr, filled on a terminal (the lines after the first under the
    message), one line in a log (pvefix/console/terminal.py `say_err`)."""
    from pvefix.console.terminal import say_err

    say_err(text, hang=len("pvefix: error: "))


def _own_words(exc: BaseException) -> None:
    """A usage error typer built from pydantic's validation (`Input should be a valid
    integer...`) says it in pvefix's words instead (`expected a whole number (given: 'abc')`)."""
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if cause is None or type(cause).__name__ != "ValidationError" or not callable(errors):
        return
    found = errors()
    if found and hasattr(exc, "message"):
        exc.message = plain_words(found[0], echo=True)
