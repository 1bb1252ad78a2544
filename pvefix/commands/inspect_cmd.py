"""`pvefix inspect config|cmdline`: show what pvefix understands of a file."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path

import typer

from pvefix.errors import PvefixError

app = typer.Typer(
    help="Show what pvefix understands of a VM config or a kernel cmdline file.",
    no_args_is_help=True,
)


class ConfigFormat(StrEnum):
    text = "text"
    json = "json"
    conf = "conf"


def read_input(path: str) -> tuple[str, str]:
    """Read PATH, or standard input for '-'. Returns (text, name for messages)."""
    from pvefix.digest import text_of

    # any bytes: a config with a non-UTF-8 byte is still a config
    return text_of(read_input_bytes(path)), "<stdin>" if path == "-" else path


def read_input_bytes(path: str) -> bytes:
    """The bytes of an `inspect` input: PATH, or standard input for '-'. Bounded (16 MiB), and
    a regular file: a FIFO, a device (/dev/zero) or a directory is refused naming it."""
    from pvefix.hosttree.safe import FILE_CAP, read_local

    if path == "-":
        data = sys.stdin.buffer.read(FILE_CAP + 1)
        if len(data) > FILE_CAP:
            raise PvefixError(f"is larger than {FILE_CAP} bytes; not read", source="<stdin>")
        return data
    found = read_local(Path(path), FILE_CAP)
    if found is None:
        raise PvefixError("no such file", source=path)
    return found


@app.command("config")
def inspect_config(
    path: str = typer.Argument(..., help="A VM config file (VMID.conf), or '-' for stdin."),
    fmt: ConfigFormat = typer.Option(
        ConfigFormat.text, "--format", "-f",
        help="text: a readable summary; json: the parsed model; conf: the file re-emitted."),
) -> int:
    """Parse a Proxmox VM config losslessly and show it. Exit 1 if Proxmox would warn or refuse."""
    from pvefix.vmconfig import VMConfig
    from pvefix.vmconfig.inspect import describe, to_json

    text, name = read_input(path)
    cfg = VMConfig.parse(text, name)
    if fmt is ConfigFormat.conf:
        _emit(cfg.render())
    elif fmt is ConfigFormat.json:
        print(json.dumps(to_json(cfg), indent=2))
    else:
        _emit(describe(cfg) + "\n")
    for problem in cfg.problems:
        print(f"{name}:{problem.line}: {problem.message}", file=sys.stderr)
    return 1 if cfg.problems else 0


def _emit(text: str) -> None:
    """Write text to stdout as the bytes it came from (a non-UTF-8 byte comes out as it went
    in, never as a UnicodeEncodeError)."""
    from pvefix.digest import raw_bytes

    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        return
    buffer.write(raw_bytes(text))
    buffer.flush()


class CmdlineFormat(StrEnum):
    text = "text"
    json = "json"
    conf = "conf"


class CmdlineKind(StrEnum):
    kernel = "kernel"
    grub = "grub"
    proc = "proc"


@app.command("cmdline")
def inspect_cmdline(
    path: str = typer.Argument(
        ..., help="/etc/kernel/cmdline, /etc/default/grub, /proc/cmdline (a copy), or '-'."
    ),
    fmt: CmdlineFormat = typer.Option(
        CmdlineFormat.text, "--format", "-f",
        help="text: tokens and findings; json: the parsed model; conf: the file re-emitted."),
    kind: CmdlineKind | None = typer.Option(
        None, "--kind", help="What the file is; guessed from its name when not given."
    ),
) -> int:
    """Parse a kernel command line file and show its tokens, pci= options and findings."""
    from pvefix.commands.inspect_cmdline import inspect_cmdline as run

    return run(path, fmt.value, kind.value if kind else None)
