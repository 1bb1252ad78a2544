"""The host's boot loader: which cmdline the next boot would use, and the tools that set it.

Editing `/etc/kernel/cmdline` or `/etc/default/grub` changes nothing by itself: only
`proxmox-boot-tool refresh` (systemd-boot, or GRUB on ESPs) or `update-grub` (plain GRUB) install
it, and only a reboot makes `/proc/cmdline` show it. The installed cmdline is kept in
`.pvefix-sim/boot.json` so it survives restarts of the simulator.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Literal

from pvefix.hosttree.meta import HostMeta

Flavor = Literal["systemd-boot", "grub-esp", "grub"]
PREFIX_KEYS = ("BOOT_IMAGE=", "initrd=")


def flavor(meta: HostMeta) -> Flavor:
    """How the host boots, read from `proxmox-boot-tool status` (exit 2 = not managed)."""
    status = meta.proxmox_boot_tool
    if status.exit_code != 0:
        return "grub"
    if "configured with: grub" in status.output or "configured with: grub" in status.stderr:
        return "grub-esp"
    return "systemd-boot"


def split_prefix(cmdline: str) -> tuple[list[str], list[str]]:
    """Split `/proc/cmdline` into the loader's own tokens (BOOT_IMAGE=, initrd=) and the rest."""
    prefix: list[str] = []
    rest: list[str] = []
    for token in cmdline.split():
        (prefix if token.startswith(PREFIX_KEYS) else rest).append(token)
    return prefix, rest


_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
_REF = re.compile(r"\$\{?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)\}?(?![A-Za-z0-9_])")


def _expand(raw: str, values: dict[str, str]) -> str:
    """sh's expansion of the two variables outside single quotes (all the simulator needs)."""
    out: list[str] = []
    quoted = False
    for part in re.split(r"(')", raw):
        if part == "'":
            quoted = not quoted
            out.append(part)
        elif quoted:
            out.append(part)
        else:
            out.append(_REF.sub(lambda m: values.get(m.group(1), ""), part))
    return "".join(out)


def grub_values(text: str) -> dict[str, str]:
    """The shell assignments that matter, in order (last one wins, `$VAR` of the two expanded):
    /etc/default/grub followed by its grub.d drop-ins, as update-grub sources them."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or "=" not in stripped:
            continue
        name, _, raw = stripped.partition("=")
        if name not in _VARS:
            continue
        raw = _expand(raw, values)
        try:
            parts = shlex.split(raw, comments=True)
        except ValueError:
            parts = [raw.strip("\"'")]
        values[name] = " ".join(" ".join(parts).split())
    return values


def grub_cmdline(default_grub: str, running: str) -> str:
    """What update-grub puts on the `linux` line after the kernel image."""
    values = grub_values(default_grub)
    linux = values.get("GRUB_CMDLINE_LINUX", "")
    default = values.get("GRUB_CMDLINE_LINUX_DEFAULT", "")
    _, rest = split_prefix(running)
    root = next((t for t in rest if t.startswith("root=")), None)
    head = [] if root is None else [root, "ro"]
    return " ".join([*head, *linux.split(), *default.split()])


class BootLoader:
    """The installed (next-boot) cmdline of one host tree."""

    def __init__(self, state_file: Path) -> None:
        self.state_file = state_file

    def installed(self, proc_cmdline: str) -> str:
        """The cmdline the loader would boot; until a refresh, what is running now."""
        try:
            data = json.loads(self.state_file.read_text())
            value = data.get("installed")
            if isinstance(value, str):
                return value
        except (OSError, ValueError):
            pass
        return " ".join(split_prefix(proc_cmdline)[1])

    def install(self, cmdline: str) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"installed": cmdline}) + "\n")
        tmp.replace(self.state_file)

    def forget(self) -> None:
        self.state_file.unlink(missing_ok=True)

    def next_proc_cmdline(self, proc_cmdline: str) -> str:
        """`/proc/cmdline` after a reboot: the loader's prefix style, then the installed line."""
        prefix, _ = split_prefix(proc_cmdline)
        return " ".join([*prefix, *self.installed(proc_cmdline).split()])


def kernel_cmdline_first_line(text: str | None) -> str | None:
    """proxmox-boot-tool uses the first line of /etc/kernel/cmdline only."""
    if text is None:
        return None
    lines = text.splitlines()
    return lines[0].strip() if lines else ""


def refresh_output(
    kind: Flavor, kernel: str, esp_uuid: str = "9A3B-1C2D", *, aborted: bool = False
) -> str:
    """What `proxmox-boot-tool refresh` prints on each kind of host (on stdout); `aborted`:
    up to where zz-proxmox-boot stops on an /etc/kernel/cmdline without root=."""
    head = (
        "Running hook script 'proxmox-auto-removal'..\n"
        "Running hook script 'zz-proxmox-boot'..\n"
        "Re-executing '/etc/kernel/postinst.d/zz-proxmox-boot' in new private mount namespace..\n"
    )
    if aborted:
        return head
    if kind == "grub":
        return head + "No /etc/kernel/proxmox-boot-uuids found, skipping ESP sync.\n"
    if kind == "grub-esp":
        return head + (
            f"Copying and configuring kernels on /dev/disk/by-uuid/{esp_uuid}\n"
            f"\tCopying kernel {kernel}\n"
            "Generating grub configuration file ...\n"
            f"Found linux image: /boot/vmlinuz-{kernel}\n"
            f"Found initrd image: /boot/initrd.img-{kernel}\n"
            "done\n"
        )
    return head + (
        f"Copying and configuring kernels on /dev/disk/by-uuid/{esp_uuid}\n"
        f"\tCopying kernel and creating boot-entry for {kernel}\n"
    )


def update_grub_output(kernel: str) -> str:
    return (
        "Generating grub configuration file ...\n"
        f"Found linux image: /boot/vmlinuz-{kernel}\n"
        f"Found initrd image: /boot/initrd.img-{kernel}\n"
        "Adding boot menu entry for UEFI Firmware Settings ...\n"
        "done\n"
    )
