"""Where pvefix keeps its snapshots: `--state-dir`, else $PVEFIX_STATE_DIR, else
$XDG_STATE_HOME/pvefix, else ~/.local/state/pvefix. Folders 0700, files 0600: snapshots hold
VM configs and host files, which are nobody else's business.

What pvefix reads back from here it acts on as root (a snapshot is restored, a desired state
is checked against), so the state dir is trusted only as OpenSSH trusts `~/.ssh`: the folder
and everything in it owned by the effective user and writable by nobody else, the folders
above it owned by that user or root (group/other-writable only with the sticky bit, like
/tmp), and no symlink anywhere inside it. `open_state_dir` refuses anything else, naming the
`chown`/`chmod`/`rm` to run; files are opened with O_NOFOLLOW (`read_private`)."""

from __future__ import annotations

import errno
import os
import shlex
import stat
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


def open_state_dir(option: Path | None = None, env: dict[str, str] | None = None) -> Path:
    """The state directory these settings name, checked (`check_state_tree`) if it exists:
    what every command that reads or writes it uses."""
    path = resolve_state_dir(option, env)
    check_state_tree(path)
    return path


def check_state_tree(root: Path) -> None:
    """Refuse a state dir that someone other than the effective user could have written:
    the folders above it, it and every entry in it (lstat: no symlink is followed)."""
    fixes = _ancestor_fixes(root)
    try:
        top = os.lstat(root)
    except FileNotFoundError:
        top = None
    if top is not None:
        fixes += _entry_fixes(root, top)
        if stat.S_ISDIR(top.st_mode):
            for folder, dirs, files in os.walk(root):
                for name in sorted(dirs + files):
                    entry = Path(folder) / name
                    fixes += _entry_fixes(entry, os.lstat(entry))
    if fixes:
        raise PvefixError(_refusal(root, fixes), source=str(root))


def _refusal(root: Path, fixes: list[str]) -> str:
    shown = fixes[:10]
    more = f"\n  ... and {len(fixes) - 10} more" if len(fixes) > 10 else ""
    return ("refusing a state directory another user could have written (what pvefix reads "
            "back from it, it restores as root); if it is yours, run:\n  "
            + "\n  ".join(shown) + more)


def _entry_fixes(path: Path, st: os.stat_result) -> list[str]:
    """What makes one entry of the state dir safe again, as commands (none: it is safe)."""
    quoted = shlex.quote(str(path))
    if stat.S_ISLNK(st.st_mode):
        return [f"rm {quoted}  # a symlink: pvefix follows none in its state directory"]
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return [f"rm {quoted}  # neither a folder nor a file"]
    fixes = []
    if st.st_uid != os.geteuid():
        fixes.append(f"chown {os.geteuid()}:{os.getegid()} {quoted}")
    if st.st_mode & 0o022:
        fixes.append(f"chmod go-w {quoted}")
    return fixes


def _ancestor_fixes(root: Path) -> list[str]:
    """The folders above the state dir (symlinks resolved: /var/run is fine): each owned by
    root or the effective user, and writable by others only with the sticky bit (/tmp)."""
    fixes = []
    above = Path(os.path.realpath(root.parent))
    for folder in [above, *above.parents]:
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            continue
        quoted = shlex.quote(str(folder))
        if st.st_uid not in (0, os.geteuid()):
            fixes.append(f"chown {os.geteuid()}:{os.getegid()} {quoted}"
                         "  # or choose a --state-dir under a folder of yours")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            fixes.append(f"chmod go-w {quoted}")
    return fixes


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed, and make it 0700: every folder this makes is
    0700 whatever the umask (`Path.mkdir(parents=True)` would make the parents 0777 & ~umask:
    under umask 000 the state dir's `desired/` came out 0777). An existing `path` that is a
    symlink, or another user's, is refused (never chmod-ed through)."""
    missing = [path, *(p for p in path.parents if not os.path.lexists(p))]
    try:
        for folder in reversed(missing):
            folder.mkdir(exist_ok=True, mode=DIR_MODE)
            fixes = _entry_fixes(folder, os.lstat(folder))
            if any(not f.startswith("chmod") for f in fixes):
                raise PvefixError(_refusal(folder, fixes), source=str(folder))
            os.chmod(folder, DIR_MODE)
    except OSError as exc:
        raise PvefixError(f"cannot create the state directory: {exc.strerror}",
                          source=str(path)) from None
    return path


def read_private(path: Path) -> bytes:
    """A file of the state dir: never through a symlink (O_NOFOLLOW), and refused when
    another user owns it or may write it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise PvefixError(_refusal(path, _entry_fixes(path, os.lstat(path))),
                          source=str(path)) from None
    try:
        fixes = _entry_fixes(path, os.fstat(fd))
        if fixes:
            raise PvefixError(_refusal(path, fixes), source=str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_private_text(path: Path, errors: str = "strict") -> str:
    """`read_private`, decoded as UTF-8."""
    return read_private(path).decode("utf-8", errors)


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
