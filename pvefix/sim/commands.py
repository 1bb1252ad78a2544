"""The shell commands the simulated host answers over SSH, run against the host tree.

A command of the fact registry (`pvefix.facts.node`: `hostname`, `uname -r`, the files read by
`cat`, ...) is answered from the tree by the fact's own declaration (`Shell.declared`): its tree
path's text, the files its glob matches, or `shown` of its `meta:` key, so a fact added to the
registry is answered without a line here. Other commands are answered by name.

Command lines are split with shlex; `a && b`, `a || b`, `a ; b`, `$?`, `>&2` and `> FILE` /
`>> FILE` redirections work; anything unknown answers `bash: NAME: command not found` with exit
127, as bash does. Paths are host paths (`/etc/kernel/cmdline`), relative ones start at /root.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import posixpath
import re
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pvefix.cmdline.files import KERNEL_CMDLINE_NO_ROOT, esp_refresh_aborts
from pvefix.errors import PvefixError
from pvefix.facts.project import tree_answer
from pvefix.hosttree import safe
from pvefix.hosttree.meta import HostMeta
from pvefix.paths import KERNEL_CMDLINE
from pvefix.sim import boot, vmops
from pvefix.sim.auth import Identity
from pvefix.sim.errors import ApiError
from pvefix.sim.state import NodeState
from pvefix.sim.vmview import api_config
from pvefix.vmconfig.config import encode_text

ROOT = Identity(user="root@pam", via="ssh")
HIDDEN = (".pvefix-sim", "pvefix-host.json", "nodes")  # nodes/: other nodes' host files
_PROC_CMDLINE = re.compile(r"^/proc/(\d+)/cmdline$")  # a running VM's QEMU (qemu_cmdline.py)


@dataclass
class Result:
    """What one command line printed and its exit status; `after` runs once output is sent."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0
    after: list[Callable[[], None]] = field(default_factory=list)


class ShellError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Shell:
    """A tiny POSIX-ish shell over one node's state."""

    def __init__(self, state: NodeState, cwd: str = "/root") -> None:
        self.state = state
        self.cwd = cwd

    # -- paths ------------------------------------------------------------------------------

    def host(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def tree_path(self, path: str, folders: dict[Path, bool] | None = None) -> Path:
        """The tree path of a host path; ShellError when it (links resolved) leaves the tree.

        `folders` caches which folders were found inside the tree, for a command that reads
        many files of few folders (a cluster's `tar`): a file that is not a link is then
        checked through its folder, resolved once."""
        host = self.host(path)
        parts = [p for p in host.split("/") if p]
        if parts and parts[0] in HIDDEN:
            raise ShellError(f"{path}: Permission denied")
        try:
            target = self.state.tree.host_path(host if parts else "/.")
        except PvefixError:
            return self.state.tree.root
        if folders is not None and not target.is_symlink():
            ok = folders.get(target.parent)
            if ok is None:
                ok = folders[target.parent] = safe.inside(target.parent, self.state.tree.root)
            if ok:
                return target
        if not safe.inside(target, self.state.tree.root):
            # As its SFTP server does: nothing outside the host tree, links included.
            raise ShellError(f"{path}: Permission denied")
        return target

    def read(self, cmd: str, path: str) -> str:
        proc = _PROC_CMDLINE.match(self.host(path))
        if proc:
            text = vmops.running_cmdline(self.state, int(proc.group(1)))
            if text is None:
                raise ShellError(f"{cmd}: {path}: No such file or directory")
            return text
        target = self.tree_path(path)
        if target.is_dir():
            raise ShellError(f"{cmd}: {path}: Is a directory")
        try:
            text = safe.read_text(target, self.state.tree.root)
        except PvefixError as exc:
            raise ShellError(f"{cmd}: {path}: {exc.message}") from None
        if text is None:
            raise ShellError(f"{cmd}: {path}: No such file or directory")
        return text

    def text(self, path: str) -> str | None:
        """A host file's text as `cat` reads it; None when there is none (ShellError when it
        cannot be read: a folder, a path outside the tree)."""
        try:
            return self.read("cat", path)
        except ShellError as exc:
            if "No such file" in exc.message:
                return None
            raise

    def files(self, pattern: str) -> list[str]:
        """The host paths of the regular files (not links) a glob in a path's last part
        matches, sorted (what `find DIR -maxdepth 1 -name GLOB -type f` lists)."""
        folder, name = posixpath.split(self.host(pattern))
        try:
            target = self.tree_path(folder)
        except ShellError:
            return []
        if not target.is_dir():
            return []
        return sorted(posixpath.join(folder, e.name) for e in target.iterdir()
                      if fnmatch.fnmatchcase(e.name, name) and e.is_file()
                      and not e.is_symlink())

    def declared(self, argv: list[str]) -> Result | None:
        """A command of the node's fact registry (`NodeState.facts`), answered from the tree
        by the fact's declaration; None: no fact declares it (or its tree cannot say)."""
        for fact in self.state.facts:
            known = fact.match(argv)
            if known is None:
                continue
            try:
                out = tree_answer(fact, known, self.text, self.files, self.state.answered_meta())
            except ShellError as exc:
                return Result(stderr=exc.message + "\n", code=exc.code)
            if out is not None:
                return Result(out.stdout, out.stderr, 1 if out.exit_code is None else out.exit_code)
        return None

    def write(self, path: str, text: str, append: bool = False) -> None:
        if append:
            with contextlib.suppress(ShellError):
                text = self.read("bash", path) + text
        host = self.host(path)
        self.tree_path(path)  # refuses hidden paths
        self.state.write_host(host, text)

    # -- running ----------------------------------------------------------------------------

    def run(self, line: str) -> Result:
        """Run a command line: a chain of simple commands joined by ;, && or ||."""
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|>")
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError as exc:
            return Result(stderr=f"bash: syntax error: {exc}\n", code=2)
        total = Result()
        op = ";"
        current: list[str] = []
        for token in [*tokens, ";"]:
            if token in (";", "&&", "||"):
                runs = op == ";" or (op == "&&") == (total.code == 0)
                if current and runs:
                    # `$?`: the exit status of the last command, as sh expands it. Not in the
                    # script of `sh -c`: the tokens keep no quotes, and pvefix quotes a script
                    # (shlex.join), so sh would leave it for the inner shell to expand.
                    status = str(total.code)
                    one = self._simple(current if current[0] == "sh" else
                                       [t.replace("$?", status) for t in current])
                    total.stdout += one.stdout
                    total.stderr += one.stderr
                    total.code = one.code
                    total.after.extend(one.after)
                current, op = [], token
            else:
                current.append(token)
        return total

    def _simple(self, tokens: list[str]) -> Result:
        argv: list[str] = []
        redirect: tuple[str, bool] | None = None
        drop_stderr = to_stderr = False
        i = 0
        while i < len(tokens):
            word = tokens[i]
            if word in (">", ">>", ">&"):
                fd = argv.pop() if argv and argv[-1] in ("1", "2") else "1"
                target = tokens[i + 1] if i + 1 < len(tokens) else ""
                i += 2
                if word == ">&":
                    # >&2: stdout goes to stderr; 2>&1: one stream is all a channel needs here
                    to_stderr = to_stderr or (fd == "1" and target == "2")
                    continue
                if fd == "2":
                    drop_stderr = drop_stderr or target == "/dev/null"
                elif target != "/dev/null":
                    redirect = (target, word == ">>")
                else:
                    redirect = ("", False)
                continue
            argv.append(word)
            i += 1
        if not argv:
            return Result()
        result = self._dispatch(argv)
        if drop_stderr:
            result.stderr = ""
        if to_stderr:
            result.stderr, result.stdout = result.stderr + result.stdout, ""
        if redirect is not None:
            if redirect[0]:
                try:
                    self.write(redirect[0], result.stdout, append=redirect[1])
                except ShellError as exc:
                    return Result(stderr=f"bash: {exc.message}\n", code=1)
            result.stdout = ""
        return result

    def _dispatch(self, argv: list[str]) -> Result:
        with self.state.lock:
            declared = self.declared(argv)
        if declared is not None:
            return declared
        handler = _COMMANDS.get(argv[0])
        if handler is None:
            return Result(stderr=f"bash: {argv[0]}: command not found\n", code=127)
        try:
            if argv[0] in UNLOCKED:  # long-running, and touches no node state
                return handler(self, argv)
            with self.state.lock:
                result = handler(self, argv)
        except ShellError as exc:
            return Result(stderr=exc.message.rstrip("\n") + "\n", code=exc.code)
        except OSError as exc:  # as a shell would: a message and an exit status, never a hang
            return Result(stderr=f"{argv[0]}: {exc.strerror or exc}\n", code=1)
        return result


Command = Callable[[Shell, list[str]], Result]


def _cat(sh: Shell, argv: list[str]) -> Result:
    out, err, code = "", "", 0
    for path in argv[1:]:
        try:
            out += sh.read("cat", path)
        except ShellError as exc:
            err += exc.message + "\n"
            code = 1
    return Result(out, err, code)


def cpuinfo(meta: HostMeta) -> str:
    """/proc/cpuinfo's first processor block, from the tree's metadata (when the tree has none)."""
    lines = [
        "processor\t: 0",
        f"vendor_id\t: {meta.cpu.vendor}",
        f"model name\t: {meta.cpu.model}",
        "physical id\t: 0",
        f"cpu cores\t: {max(1, meta.cpu.cores // meta.cpu.sockets)}",
    ]
    if meta.cpu.flags is not None:
        lines.append(f"flags\t\t: {' '.join(meta.cpu.flags)}")
    if meta.cpu.phys_bits is not None:
        lines.append(f"address sizes\t: {meta.cpu.phys_bits} bits physical, 48 bits virtual")
    return "\n".join(lines) + "\n\n"


def _test(sh: Shell, argv: list[str]) -> Result:
    if len(argv) != 3 or argv[1] not in ("-e", "-f", "-d", "-s", "-r"):
        return Result(code=2, stderr="test: unsupported expression\n")
    try:
        target = sh.tree_path(argv[2])
    except ShellError:
        return Result(code=1)
    flag = argv[1]
    if flag in ("-e", "-r"):
        ok = target.exists()
    elif flag == "-f":
        ok = target.is_file()
    elif flag == "-d":
        ok = target.is_dir()
    else:
        ok = target.is_file() and target.stat().st_size > 0
    return Result(code=0 if ok else 1)


def _uname(sh: Shell, argv: list[str]) -> Result:
    kernel = sh.state.tree.meta.versions.kernel
    if "-a" in argv:
        return Result(f"Linux {sh.state.node} {kernel} #1 SMP PREEMPT_DYNAMIC PMX {kernel} "
                      "x86_64 GNU/Linux\n")
    return Result("Linux\n")


def _boot_tool(sh: Shell, argv: list[str]) -> Result:
    meta = sh.state.tree.meta
    sub = argv[1] if len(argv) > 1 else ""
    if sub == "status":
        status = meta.proxmox_boot_tool
        if "--quiet" in argv:
            return Result(code=status.exit_code)
        return Result(status.output, status.stderr, status.exit_code)
    if sub == "refresh":
        kind = boot.flavor(meta)
        kernel_cmdline = sh.state.read_host(KERNEL_CMDLINE)
        if kind != "grub" and esp_refresh_aborts(kernel_cmdline):
            # zz-proxmox-boot update_esps, for systemd-boot and GRUB ESPs alike; nothing is
            # installed, and proxmox-boot-tool (set -e) exits with the hook's status 1
            return Result(boot.refresh_output(kind, meta.versions.kernel, aborted=True),
                          KERNEL_CMDLINE_NO_ROOT + "\n", 1)
        if kind == "systemd-boot":
            line = boot.kernel_cmdline_first_line(kernel_cmdline)
            if line:
                sh.state.boot.install(line)
        elif kind == "grub-esp":
            _install_grub(sh)
        return Result(boot.refresh_output(kind, meta.versions.kernel))
    usage = "USAGE: proxmox-boot-tool <commands> [ARGS]\n"
    return Result(stderr=usage, code=1)


def _install_grub(sh: Shell) -> None:
    default = sh.state.read_host("/etc/default/grub") or ""
    # update-grub sources /etc/default/grub.d/*.cfg after it (grub-mkconfig).
    for text in sh.state.tree.grub_dropins().values():
        default += "\n" + text
    running = (sh.state.read_host("/proc/cmdline") or "").strip()
    sh.state.boot.install(boot.grub_cmdline(default, running))


def _update_grub(sh: Shell, argv: list[str]) -> Result:
    if boot.flavor(sh.state.tree.meta) != "systemd-boot":
        _install_grub(sh)
    return Result(stderr=boot.update_grub_output(sh.state.tree.meta.versions.kernel))


def _reboot(sh: Shell, argv: list[str]) -> Result:
    state = sh.state

    def go() -> None:
        state.reboot(lambda: vmops.start_on_boot(state))

    return Result(after=[go])


def _qm(sh: Shell, argv: list[str]) -> Result:
    if len(argv) < 3 or not argv[2].isdigit():
        return Result(stderr="400 not enough arguments\nqm <command> <vmid> [OPTIONS]\n",
                      code=255)
    sub, vmid = argv[1], int(argv[2])
    state = sh.state
    try:
        node = state.vms().get(vmid, state.node)
        if sub == "config":
            loaded = state.load(vmid)
            data = api_config(loaded.parse(), loaded.digest, current="--current" in argv)
            lines = []
            for key in sorted(data):
                if key == "digest":
                    continue
                value = data[key]
                text = encode_text(str(value)) if key == "description" else str(value)
                lines.append(f"{key}: {text}\n")
            return Result("".join(lines))
        if sub == "set":
            vmops.update_config(state, ROOT, node, vmid, _options(argv[3:]), sync=True,
                                cli=True)
            return Result()
        if sub in ("start", "stop", "shutdown", "reboot"):
            upid = vmops.power(state, ROOT, node, vmid, sub, {})
            task = state.tasks.get(upid)
            if task.exitstatus != "OK":
                return Result(stderr=task.exitstatus + "\n", code=255)
            return Result()
        if sub == "status":
            return Result(f"status: {state.run_state(vmid).status}\n")
        if sub == "showcmd":
            from pvefix.sim import qemu_cmdline

            cfg = state.load(vmid).parse()
            meta = state.tree.meta
            try:
                return Result(qemu_cmdline.showcmd(vmid, cfg, state.tree.pci_devices(),
                                                   vmops.chosen_devices(state, vmid, cfg),
                                                   meta.versions.qemu, meta.cpu.phys_bits,
                                                   meta.cpu.vendor))
            except PvefixError as exc:  # what Proxmox would refuse to start: its reason
                return Result(stderr=exc.message.removeprefix(
                    "Proxmox refuses to start this config: ") + "\n", code=255)
    except ApiError as exc:
        return Result(stderr=vmops.api_error_text(exc) + "\n", code=255)
    return Result(stderr=f"unknown command 'qm {sub}'\n", code=255)


def _options(args: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            raise ShellError(f"400 unable to parse option\nqm set: unexpected argument '{arg}'",
                             255)
        key = arg.lstrip("-")
        if "=" in key:
            key, value = key.split("=", 1)
            i += 1
        elif i + 1 < len(args):
            value = args[i + 1]
            i += 2
        else:
            raise ShellError(f"400 Parameter verification failed.\n{key}: missing value", 255)
        out[key] = value
    return out


def _source_and_target(sh: Shell, argv: list[str]) -> tuple[Path, Path]:
    """`mv`/`cp SRC DST` (options ignored): the tree paths, DST inside a folder if it is one."""
    name = argv[0]
    args = [a for a in argv[1:] if not a.startswith("-")]
    if len(args) != 2:
        raise ShellError(f"{name}: missing file operand")
    src, dst = sh.tree_path(args[0]), sh.tree_path(args[1])
    if not src.is_file():
        raise ShellError(f"{name}: cannot stat '{args[0]}': No such file or directory")
    return src, (dst / src.name if dst.is_dir() else dst)


def _mv(sh: Shell, argv: list[str]) -> Result:
    if "-T" in argv[1:]:  # `mv -T SRC DST`: one rename(2), folders too (the node lock)
        args = [a for a in argv[1:] if not a.startswith("-")]
        if len(args) != 2:
            raise ShellError("mv: missing file operand")
        try:
            os.rename(sh.tree_path(args[0]), sh.tree_path(args[1]))
        except OSError as exc:
            raise ShellError(f"mv: cannot move '{args[0]}' to '{args[1]}': {exc.strerror}",
                             1) from None
        return Result()
    os.replace(*_source_and_target(sh, argv))
    return Result()


def _cp(sh: Shell, argv: list[str]) -> Result:
    shutil.copy2(*_source_and_target(sh, argv))
    return Result()


def _sha256sum(sh: Shell, argv: list[str]) -> Result:
    out, err, code = "", "", 0
    for path in argv[1:]:
        try:
            target = sh.tree_path(path)
            data = target.read_bytes()
        except (ShellError, FileNotFoundError, IsADirectoryError):
            err += f"sha256sum: {path}: No such file or directory\n"
            code = 1
            continue
        out += f"{hashlib.sha256(data).hexdigest()}  {path}\n"
    return Result(out, err, code)


def _stat(sh: Shell, argv: list[str]) -> Result:
    if len(argv) < 4 or argv[1] not in ("-c", "--format"):
        raise ShellError("stat: only 'stat -c FORMAT FILE...' is supported")
    fmt, out = argv[2], ""
    for path in argv[3:]:
        target = sh.tree_path(path)
        try:
            st = target.stat()
        except FileNotFoundError:
            raise ShellError(f"stat: cannot statx '{path}': No such file or directory") from None
        values = {
            "%s": str(st.st_size), "%a": f"{st.st_mode & 0o7777:o}", "%Y": str(int(st.st_mtime)),
            "%n": path, "%U": "root", "%G": "root", "%u": "0", "%g": "0",
            "%F": "directory" if target.is_dir() else "regular file",
            "%y": time.strftime("%Y-%m-%d %H:%M:%S.000000000 +0000", time.gmtime(st.st_mtime)),
        }
        line = fmt
        for key, value in values.items():
            line = line.replace(key, value)
        out += line + "\n"
    return Result(out)


def _mkdir(sh: Shell, argv: list[str]) -> Result:
    parents = "-p" in argv
    for path in [a for a in argv[1:] if not a.startswith("-")]:
        target = sh.tree_path(path)
        try:
            target.mkdir(parents=parents, exist_ok=parents)
        except FileExistsError:
            raise ShellError(f"mkdir: cannot create directory '{path}': File exists") from None
        except FileNotFoundError:
            raise ShellError(
                f"mkdir: cannot create directory '{path}': No such file or directory"
            ) from None
    return Result()


def _rm(sh: Shell, argv: list[str]) -> Result:
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
    force, recursive = "f" in flags, "r" in flags or "R" in flags
    for path in [a for a in argv[1:] if not a.startswith("-")]:
        target = sh.tree_path(path)
        try:
            if target.is_dir() and not target.is_symlink():
                if not recursive:
                    raise ShellError(f"rm: cannot remove '{path}': Is a directory")
                shutil.rmtree(target)
            else:
                target.unlink()
        except FileNotFoundError:
            if not force:
                raise ShellError(
                    f"rm: cannot remove '{path}': No such file or directory"
                ) from None
        except OSError as exc:
            raise ShellError(f"rm: cannot remove '{path}': {exc.strerror}") from None
    return Result()


def _echo(sh: Shell, argv: list[str]) -> Result:
    args = argv[1:]
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    return Result(" ".join(args) + ("\n" if newline else ""))


def _pveversion(sh: Shell, argv: list[str]) -> Result:
    meta = sh.state.tree.meta
    return Result(f"pve-manager/{meta.versions.pve}/5e6a2d8c0b1f4a7e "
                  f"(running kernel: {meta.versions.kernel})\n")


def _true(sh: Shell, argv: list[str]) -> Result:
    return Result()


def _false(sh: Shell, argv: list[str]) -> Result:
    return Result(code=1)


HA_STATES = ("started", "stopped", "enabled", "disabled", "ignored")


def _ha_manager(sh: Shell, argv: list[str]) -> Result:
    """`ha-manager set vm:N --state STATE`, the one form pvefix's docs tell admins to run."""
    if len(argv) != 5 or argv[1] != "set" or argv[3] != "--state":
        return Result(stderr="the simulator knows only: ha-manager set vm:N --state STATE\n",
                      code=255)
    sid, wanted = argv[2], argv[4]
    vmid = sid[3:] if sid.startswith("vm:") else ""
    if not vmid.isdigit() or wanted not in HA_STATES:
        return Result(stderr=f"400 Parameter verification failed.\nsid or state: {sid} "
                      f"{wanted}\n", code=255)
    with sh.state.lock:
        if sh.state.run_state(int(vmid)).ha_state is None:
            return Result(stderr=f"resource '{sid}' is not HA managed\n", code=255)
        vmops.ha_request(sh.state, int(vmid), "started" if wanted == "enabled" else wanted)
    return Result()


_COMMANDS: dict[str, Command] = {
    "ha-manager": _ha_manager,
    "cat": _cat,
    "test": _test,
    "uname": _uname,
    "proxmox-boot-tool": _boot_tool,
    "update-grub": _update_grub,
    "reboot": _reboot,
    "qm": _qm,
    "mv": _mv,
    "cp": _cp,
    "sha256sum": _sha256sum,
    "stat": _stat,
    "mkdir": _mkdir,
    "rm": _rm,
    "echo": _echo,
    "pveversion": _pveversion,
    "true": _true,
    "false": _false,
}

# Sysfs readers (readlink -m, grep -H, lspci): registered here, written in commands_sysfs.
from pvefix.sim.commands_sysfs import SYSFS_COMMANDS  # noqa: E402

_COMMANDS.update(SYSFS_COMMANDS)

# `python3 /tmp/NAME.pyz` (pvefix verify's probe over SSH): written in commands_guest.
from pvefix.sim.commands_guest import GUEST_COMMANDS, UNLOCKED  # noqa: E402

_COMMANDS.update(GUEST_COMMANDS)

# `sh -c` and `tar -c` (bulk reads of pmxcfs): written in commands_archive.
from pvefix.sim.commands_archive import ARCHIVE_COMMANDS  # noqa: E402

_COMMANDS.update(ARCHIVE_COMMANDS)

# `timeout ... python3 -c SCRIPT` (pvefix rehearse's node script): written in commands_rehearse.
from pvefix.sim.commands_rehearse import REHEARSE_COMMANDS  # noqa: E402
from pvefix.sim.commands_rehearse import UNLOCKED as _REHEARSE_UNLOCKED  # noqa: E402

_COMMANDS.update(REHEARSE_COMMANDS)
UNLOCKED = UNLOCKED | _REHEARSE_UNLOCKED
