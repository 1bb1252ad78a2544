"""Where pvefix keeps its snapshots: `--state-dir`, else $PVEFIX_STATE_DIR, else
$XDG_STATE_HOME/pvefix, else ~/.local/state/pvefix. Folders 0700, files 0600: snapshots hold
VM configs and host files, which are nobody else's business."""

from __future__ import annotations

import os
from pathlib import Path

from pvefix.errors import PvefixError
from pvefix.hosttree.tree import atomic_write

ENV_STATE_DIR = "PVEFIX_STATE_DIR"
DIR_MODE = 0o700
FILE_MODE = 0o600


def resolve_state_dir(option: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """The state directory these settings name (not created)."""
    environ = os.environ if env is None else env
    if option is not None:
        return Path(os.path.expanduser(str(option)))
    if environ.get(ENV_STATE_DIR):
        return Path(os.path.expanduser(environ[ENV_STATE_DIR]))
    xdg = environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path(os.path.expanduser("~")) / ".local" / "state"
    return base / "pvefix"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed, and make it 0700: every folder this makes is
    0700 whatever the umask (`Path.mkdir(parents=True)` would make the parents 0777 & ~umask:
    under umask 000 the state dir's `desired/` came out 0777)."""
    missing = [path, *(p for p in path.parents if not p.exists())]
    try:
        for folder in reversed(missing):
            folder.mkdir(exist_ok=True, mode=DIR_MODE)
            if folder != path:
                os.chmod(folder, DIR_MODE)
        os.chmod(path, DIR_MODE)
    except OSError as exc:
        raise PvefixError(f"cannot create the state directory: {exc.strerror}",
                          source=str(path)) from None
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write a 0600 file atomically and durably (fsync of the file and of its folder)."""
    atomic_write(path, data, FILE_MODE, keep_mode=False)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` survive a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
