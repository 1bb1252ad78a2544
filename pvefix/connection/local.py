"""The `local` backend: pvefix runs on the Proxmox node itself.

Files are read directly (under `root`, "/" on a real node, a host tree in tests), API data comes
from `pvesh get PATH --output-format json` (which runs as root@pam), and other commands run as
subprocesses. It offers the same two faces as the remote backend: `get()` like ApiClient and
`run()` / `run_many()` like SshShell, so the live reader does not know which one it has.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pvefix.connection.api import ApiError
from pvefix.connection.ssh import MAX_CHANNELS, CommandResult
from pvefix.errors import PvefixError


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

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        argv = [self.pvesh, "get", "/" + path.strip("/"), "--output-format", "json"]
        for key, value in (params or {}).items():
            argv += [f"--{key}", value]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise PvefixError(f"pvesh get {path}: no answer within {self.timeout:g} s") from None
        if done.returncode != 0:
            raise ApiError(f"pvesh get {path}: {done.stderr.strip()}", status=None)
        return json.loads(done.stdout) if done.stdout.strip() else None

    def close(self) -> None:
        return None


class LocalShell:
    """Commands on this node; `cat`, `readlink` and `grep -H` read files under `root`."""

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
        if args and args[0] == "readlink" and "-m" in args:
            return self._readlink(args)
        if self.root != Path("/") and args and args[0] == "grep":
            return self._grep(args)
        try:
            done = subprocess.run(
                list(args), capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError:
            return CommandResult(args, 127, "", f"{args[0]}: command not found\n")
        except subprocess.TimeoutExpired:
            return CommandResult(args, 124, "", f"{args[0]}: timed out\n")
        return CommandResult(args, done.returncode, done.stdout, done.stderr)

    def run_many(self, commands: Sequence[Sequence[str]]) -> list[CommandResult]:
        if not commands:
            return []
        with ThreadPoolExecutor(max_workers=min(MAX_CHANNELS, len(commands))) as pool:
            return list(pool.map(self.run, commands))

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

    def _readlink(self, args: tuple[str, ...]) -> CommandResult:
        names = [a for a in args[1:] if not a.startswith("-")]
        lines = [self._host(os.path.realpath(self._path(n))) for n in names]
        return CommandResult(args, 0, "".join(line + "\n" for line in lines), "")

    def _grep(self, args: tuple[str, ...]) -> CommandResult:
        names = [a for a in args[1:] if not a.startswith("-")][1:]  # first is the pattern
        out, err, code = "", "", 0
        for name in names:
            try:
                text = self._path(name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                err += f"grep: {name}: No such file or directory\n"
                code = 2
                continue
            out += "".join(f"{name}:{line}\n" for line in text.splitlines())
        return CommandResult(args, code, out, err)

    def close(self) -> None:
        return None
