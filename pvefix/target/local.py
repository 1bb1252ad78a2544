"""The `local` backend: pvefix runs on the Proxmox node itself.

Files are read directly (under `root`, "/" on a real node, a host tree in tests), API data comes
from `pvesh get PATH --output-format json` (which runs as root@pam), and other commands run as
subprocesses. It offers the same two faces as the remote backend: `get()` like ApiClient and
`run()` / `run_many()` like SshShell, so the live reader does not know which one it has.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pvefix.errors import PvefixError
from pvefix.target.api import ApiError
from pvefix.target.files import cat_text, temp_path
from pvefix.target.process import run_process, start_process, stop_group
from pvefix.target.result import CommandResult
from pvefix.target.ssh import run_each

#: File commands the executor sends (locks, backups), done under the root by LocalShell.
_FILE_COMMANDS = frozenset({"mkdir", "rm", "cp", "mv"})
CLEAN_UP = 15.0  # seconds a command stopped by Ctrl-C has to clean up before SIGKILL


def _mkdir(path: Path, parents: bool, *, private: bool) -> None:
    """`mkdir [-p] [--mode=0700] DIR` as coreutils does it: the mode whatever the umask (a
    folder that exists keeps its own, as with coreutils)."""
    existed = path.is_dir()
    path.mkdir(mode=0o700 if private else 0o777, parents=parents, exist_ok=parents)
    if private and not existed:
        os.chmod(path, 0o700)


class LocalApi:
    """API reads through `pvesh` on this node."""

    def __init__(self, timeout: float = 30.0, pvesh: str = "pvesh") -> None:
        self.timeout = timeout
        found = shutil.which(pvesh)
        if found is None:
            raise PvefixError(
                "the local backend needs `pvesh`, which is not on PATH: run pvefix on a "
                "Proxmox VE node, or use the API backend (--host) or a bundle (--bundle)"
            )
        self.pvesh = found


    @property
    def api_user(self) -> str | None:
        """pvesh on the node runs as root@pam: every privilege, no token."""
        return None

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        argv = [self.pvesh, "get", "/" + path.strip("/"), "--output-format", "json"]
        for key, value in (params or {}).items():
            argv += [f"--{key}", value]
        try:
            done = run_process(argv, self.timeout)
        except subprocess.TimeoutExpired:
            raise PvefixError(f"pvesh get {path}: no answer within {self.timeout:g} s") from None
        if done.returncode != 0:
            raise ApiError(f"pvesh get {path}: {done.stderr.strip()}", status=None)
        return json.loads(done.stdout) if done.stdout.strip() else None

    base_url = "pvesh (this node)"

    def write(self, method: str, path: str, data: Mapping[str, str],
              timeout: float | None = None) -> Any:
        """POST as `pvesh create`, PUT as `pvesh set`. pvesh runs a worker task in the
        foreground (RESTEnvironment fork_worker: `sync` for the CLI), printing its log, then the
        UPID; the task has ended when pvesh returns, and its exit status is in the task index."""
        verb = {"POST": "create", "PUT": "set"}[method]
        # A task runs inside pvesh: it gets the task's time (`timeout`), not only the API's.
        wait = max(self.timeout, timeout or 0.0)
        argv = [self.pvesh, verb, "/" + path.strip("/")]
        for key, value in data.items():
            argv += [f"--{key}", value]
        argv += ["--output-format", "json"]
        try:
            done = run_process(argv, wait)
        except subprocess.TimeoutExpired:
            raise PvefixError(f"pvesh {verb} {path}: no answer within {wait:g} s") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise ApiError(f"{method} {path}: " + " ".join(lines[-3:]), status=None,
                           source=self.base_url)
        return _last_json(done.stdout)

    def close(self) -> None:
        return None


def _last_json(stdout: str) -> Any:
    """The value pvesh printed last (a foreground task prints its log lines before it)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        last = text.splitlines()[-1]
        try:
            return json.loads(last)
        except json.JSONDecodeError:
            raise PvefixError(f"pvesh printed no JSON value: {last[:200]!r}") from None


class LocalShell:
    """Commands on this node. Files are read (`cat`) and written (`write_file`, and the file
    commands `mkdir`, `rm`, `cp`) directly under `root`; every other command (`readlink`,
    `grep`, `pvesh`, `qm`, `proxmox-boot-tool`, ...) runs as a subprocess, an argument list."""

    def __init__(self, root: Path = Path("/"), timeout: float = 30.0) -> None:
        self.root = root
        self.timeout = timeout
        self.exec_count = 0

    def _path(self, host_path: str) -> Path:
        return self.root / host_path.lstrip("/")

    def _host(self, path: str) -> str:
        rel = os.path.relpath(path, self.root)
        return "/" + rel if rel != "." else "/"

    def run(self, argv: Sequence[str]) -> CommandResult:
        self.exec_count += 1
        args = tuple(argv)
        if args and args[0] == "cat":
            return self._cat(args)
        if args and args[0] in _FILE_COMMANDS:
            return self._file_command(args)
        try:
            done = run_process(args, self.timeout)
        except FileNotFoundError:
            return CommandResult(args, 127, "", f"{args[0]}: command not found\n")
        except subprocess.TimeoutExpired:  # as a Node reports it: no exit status
            return CommandResult(args, None, "", f"{args[0]}: not done within "
                                 f"{self.timeout:g} s (--timeout)\n", timed_out=True)
        return CommandResult(args, done.returncode, done.stdout, done.stderr)

    def execute(self, argv: Sequence[str], timeout: float | None = None, *,
                errors: str = "surrogateescape") -> CommandResult:
        """A long command as a subprocess (SshShell.execute's face): no stdin, its own time
        limit (default: the connection's; past it, its process group is stopped and the
        result is `timed_out`). Ctrl-C sends the group SIGTERM and waits a little for it to
        clean up (a `timeout` wrapper passes the signal on), then SIGKILL."""
        self.exec_count += 1
        args = tuple(argv)
        try:
            proc = start_process(args)
        except FileNotFoundError:
            return CommandResult(args, 127, "", f"{args[0]}: command not found\n")
        try:
            out, err = proc.communicate(timeout=self.timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            return CommandResult(args, None, "", "", timed_out=True)
        except BaseException:  # Ctrl-C: let it clean up, then go on unwinding
            stop_group(proc, grace=CLEAN_UP)
            raise
        return CommandResult(args, proc.returncode, out.decode("utf-8", errors),
                             err.decode("utf-8", errors))

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        return run_each(self.run, commands)

    def run_batch(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        """As SshShell.run_batch: here there are no channels to save."""
        return self.run_many(commands)

    def _file_command(self, args: tuple[str, ...]) -> CommandResult:
        """mkdir [-p] [--mode=0700] DIR, rm -f|-rf PATH, cp -p SRC DST, mv -T SRC DST: done
        here, under `root` (the same semantics as the coreutils the executor asks for, never
        outside the root)."""
        flags = {a for a in args[1:] if a.startswith("-")}
        paths = [self._path(a) for a in args[1:] if not a.startswith("-")]
        try:
            if args[0] == "mkdir" and len(paths) == 1 and flags <= {"-p", "--mode=0700"}:
                _mkdir(paths[0], "-p" in flags, private="--mode=0700" in flags)
            elif args[0] == "mv" and len(paths) == 2 and flags == {"-T"}:
                os.rename(paths[0], paths[1])  # -T: onto a non-empty folder fails (ENOTEMPTY)
            elif args[0] == "rm" and len(paths) == 1:
                target = paths[0]
                if target.is_dir() and not target.is_symlink() and "-rf" in flags:
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
                elif "-f" not in flags and "-rf" not in flags:
                    raise FileNotFoundError(2, "No such file or directory")
            elif args[0] == "cp" and len(paths) == 2 and flags <= {"-p"}:
                copy = shutil.copy2 if "-p" in flags else shutil.copy  # -p: mode and times
                copy(paths[0], paths[1])
            else:
                return CommandResult(args, 2, "", f"{args[0]}: unsupported form here\n")
        except OSError as exc:
            name = " ".join(a for a in args[1:] if not a.startswith("-"))
            return CommandResult(args, 1, "", f"{args[0]}: {name}: {exc.strerror}\n")
        return CommandResult(args, 0, "", "")

    def read_file(self, host_path: str) -> str | None:
        """`cat PATH` under `root`: its text (None when it does not exist)."""
        return cat_text(self.run(["cat", host_path]), host_path, "this host")

    def replace_file(self, host_path: str, text: str) -> None:
        """Replace a file atomically under `root`: a temporary file beside it, then a rename;
        the old file's mode is kept."""
        path = self._path(host_path)
        tmp = self._path(temp_path(host_path))
        try:
            mode = path.stat().st_mode & 0o7777 if path.exists() else None
            tmp.write_bytes(text.encode("utf-8", "surrogateescape"))
            if mode is not None:
                tmp.chmod(mode)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise PvefixError(f"cannot write {host_path}: {exc.strerror}",
                              source="this host") from None

    def _cat(self, args: tuple[str, ...]) -> CommandResult:
        out, err, code = "", "", 0
        for name in args[1:]:
            try:
                out += self._path(name).read_text(encoding="utf-8", errors="surrogateescape")
            except FileNotFoundError:
                err += f"cat: {name}: No such file or directory\n"
                code = 1
            except OSError as exc:
                err += f"cat: {name}: {exc.strerror}\n"
                code = 1
        return CommandResult(args, code, out, err)

    def close(self) -> None:
        return None
