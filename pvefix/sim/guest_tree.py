"""The simulated guest's few system files, and the commands that read and change only them.

A simulated VM's guest directory (`<root>/.pvefix-sim/guests/<vmid>/`) holds, besides its
/tmp, a tiny Debian-like tree seeded on first use:

    etc/default/grub      Debian's defaults (GRUB_CMDLINE_LINUX_DEFAULT="quiet")
    proc/cmdline          what the guest kernel booted with
    boot/grub/grub.cfg    what `update-grub` last generated
    kernel.log            what `dmesg` prints: a boot's PCI lines, and a `can't assign; no
                          space` BAR error per passed GPU when the VM's config leaves the
                          guest too little address space (no `phys-bits=host`, no `cpu: host`)

Commands run in-process, on these files only: `cat FILE...`, `dmesg`, `cp [-p] SRC DST`,
`mv [-f] SRC DST`, `update-grub` (fails once, for tests, when the guest directory holds a file
named `fail-update-grub`: a one-shot fault that removes the file as it fires). A VM start
"boots" the guest: /proc/cmdline becomes the line update-grub generated, so `pci=realloc`
shows up after a cold start as it would.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from pathlib import Path

from pvefix.sim.boot import grub_values
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.propstring import PropertyString

#: Guest folders the simulator maps (guest path -> folder under the guest directory), and
#: whether commands may write there.
FOLDERS: dict[str, tuple[str, bool]] = {
    "/tmp": ("tmp", True),  # noqa: S108 - the guest's /tmp, a private folder here
    "/etc/default": ("etc/default", True),
    "/proc": ("proc", False),
    "/boot/grub": ("boot/grub", False),
}
FAIL_UPDATE_GRUB = "fail-update-grub"
KERNEL_IMAGE = "/boot/vmlinuz-6.12.48+deb13-amd64"
BASE_CMDLINE = f"BOOT_IMAGE={KERNEL_IMAGE} root=UUID=3f1e0c2a-7d4b-4e0a-9a55-1c2b3d4e5f60 ro"
DEBIAN_GRUB = """\
# If you change this file or any /etc/default/grub.d/*.cfg file,
# run 'update-grub' afterwards to update /boot/grub/grub.cfg.
# For full documentation of the options in these files, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""
"""


class GuestFault(Exception):
    """A command the guest tree refuses (bad path, missing operand): exit status 1 or 2."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def real_path(root: Path, path: str, *, write: bool = False) -> Path:
    """The real file of guest path `path`, directly inside one of FOLDERS."""
    norm = posixpath.normpath(path) if path.startswith("/") else ""
    folder, name = posixpath.split(norm)
    if folder not in FOLDERS or not name or name in (".", ".."):
        allowed = ", ".join(FOLDERS)
        raise GuestFault(f"{path}: outside the pvefix simulator's guest files ({allowed})", 2)
    sub, writable = FOLDERS[folder]
    if write and not writable:
        raise GuestFault(f"{path}: Read-only file system")
    return root / sub / name


def kernel_log(cfg: VMConfig) -> str:
    """A guest boot's PCI lines; BAR errors when the GPUs cannot fit (see the module doc)."""
    cpu = PropertyString.parse(cfg.main.get("cpu") or "kvm64", default_key="cputype")
    roomy = cpu.get("cputype") == "host" or cpu.get("phys-bits") == "host"
    gpus = sorted(k for k in cfg.main.as_dict() if k.startswith("hostpci"))
    lines = ["[    0.000000] Linux version 6.12.48+deb13-amd64 (debian-kernel@lists.debian.org)",
             "[    0.412000] PCI: Using configuration type 1 for base access",
             "[    0.530102] pci 0000:00:00.0: [8086:29c0] type 00 class 0x060000 conventional"
             " PCI endpoint"]
    for index, _ in enumerate(gpus):
        bus = index + 1
        lines.append(f"[    0.61{index:04d}] pci 0000:{bus:02x}:00.0: [10de:2bb1] type 00 "
                     "class 0x030200 PCIe Legacy Endpoint")
        if not roomy:
            lines.append(f"[    0.72{index:04d}] pci 0000:{bus:02x}:00.0: BAR 1 [mem size "
                         "0x2000000000 64bit pref]: can't assign; no space")
            lines.append(f"[    0.73{index:04d}] pci 0000:{bus:02x}:00.0: BAR 1 [mem size "
                         "0x2000000000 64bit pref]: failed to assign")
    return "\n".join(lines) + "\n"


def seed(root: Path, cfg: VMConfig) -> None:
    """Create the tree on first use (kept as is afterwards, across simulator restarts)."""
    grub = root / "etc" / "default" / "grub"
    if grub.exists():
        return
    for sub, _ in FOLDERS.values():
        (root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    grub.write_text(DEBIAN_GRUB, encoding="utf-8")
    os.chmod(grub, 0o644)
    (root / "proc" / "cmdline").write_text(f"{BASE_CMDLINE} quiet\n", encoding="utf-8")
    (root / "boot" / "grub" / "grub.cfg").write_text(_grub_cfg(f"{BASE_CMDLINE} quiet"),
                                                    encoding="utf-8")
    (root / "kernel.log").write_text(kernel_log(cfg), encoding="utf-8")


def _grub_cfg(cmdline: str) -> str:
    image, _, rest = cmdline.partition(" ")
    return ("# generated by the pvefix simulator's update-grub\nmenuentry 'Debian GNU/Linux' {\n"
            f"\tlinux\t{image.removeprefix('BOOT_IMAGE=')} {rest}\n}}\n")


def boot(root: Path) -> None:
    """The guest boots: /proc/cmdline becomes what grub.cfg's linux line says."""
    cfg = root / "boot" / "grub" / "grub.cfg"
    if not cfg.is_file():
        return
    for line in cfg.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if words[:1] == ["linux"] and len(words) > 1:
            line_text = " ".join([f"BOOT_IMAGE={words[1]}", *words[2:]])
            (root / "proc" / "cmdline").write_text(line_text + "\n", encoding="utf-8")
            return


def run(root: Path, command: list[str]) -> tuple[int, bytes, bytes]:
    """An in-process guest command: (exit status, stdout, stderr)."""
    name, args = command[0], command[1:]
    try:
        if name == "cat":
            return _cat(root, args)
        if name == "dmesg":
            return 0, (root / "kernel.log").read_bytes(), b""
        if name in ("cp", "mv"):
            return _copy_or_move(root, name, args)
        if name == "update-grub":
            return _update_grub(root)
    except GuestFault as exc:
        return exc.code, b"", f"{name}: {exc}\n".encode()
    raise GuestFault(f"{name}: not a guest-tree command", 2)


def _cat(root: Path, args: list[str]) -> tuple[int, bytes, bytes]:
    out, err, code = b"", b"", 0
    for arg in args:
        try:
            out += real_path(root, arg).read_bytes()
        except FileNotFoundError:
            err += f"cat: {arg}: No such file or directory\n".encode()
            code = 1
    return code, out, err


def _copy_or_move(root: Path, name: str, args: list[str]) -> tuple[int, bytes, bytes]:
    flags = {"-p"} if name == "cp" else {"-f"}
    paths = [a for a in args if a not in flags]
    if len(paths) != 2 or any(a.startswith("-") for a in paths):
        raise GuestFault(f"usage: {name} [{'|'.join(sorted(flags))}] SRC DST", 2)
    src = real_path(root, paths[0], write=name == "mv")
    dst = real_path(root, paths[1], write=True)
    if not src.exists():
        raise GuestFault(f"cannot stat '{paths[0]}': No such file or directory")
    if name == "mv":
        os.replace(src, dst)
    elif "-p" in args:
        shutil.copy2(src, dst)
    else:
        shutil.copyfile(src, dst)
    return 0, b"", b""


def _update_grub(root: Path) -> tuple[int, bytes, bytes]:
    if (root / FAIL_UPDATE_GRUB).exists():
        (root / FAIL_UPDATE_GRUB).unlink()
        return 1, b"", (b"Generating grub configuration file ...\n/usr/sbin/grub-mkconfig: "
                        b"error: out of disk space on /boot (injected by pvefix sim)\n")
    values = grub_values((root / "etc" / "default" / "grub").read_text(encoding="utf-8"))
    extra = " ".join(v for v in (values.get("GRUB_CMDLINE_LINUX", ""),
                                 values.get("GRUB_CMDLINE_LINUX_DEFAULT", "")) if v)
    line = f"{BASE_CMDLINE} {extra}".strip()
    (root / "boot" / "grub" / "grub.cfg").write_text(_grub_cfg(line), encoding="utf-8")
    return 0, b"", (b"Generating grub configuration file ...\nFound linux image: "
                    + KERNEL_IMAGE.encode() + b"\ndone\n")
