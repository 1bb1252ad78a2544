"""The parsers of node command outputs: answers in, values out (pure); and, for a fact a host
tree keeps in pvefix-host.json, how its command prints the value kept (`Fact.shown`: what the
simulator answers), each beside its parser so the two are read together."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pvefix.facts.model import Answer, Output
from pvefix.hostfacts import file_fact

_ACS_RE = re.compile(r"^\s+ACSCtl:\s*(.*?)\s*$")
_LSPCI_HEAD_RE = re.compile(r"^([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ")
_CONFIG_RE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")


def text(path: str, out: Output | None) -> str | None:
    """`cat PATH`: its text; None when absent or not read; other failures are errors."""
    return file_fact(path, out).text  # type: ignore[arg-type]  # any Output: exit, std*


def first_line(out: Output | None) -> str | None:
    """A command's first output line (`uname -r`, `hostname`); None when it failed."""
    if out is None or not out.ok or not out.stdout.strip():
        return None
    return out.stdout.strip().splitlines()[0].strip()


def line(value: object) -> Output:
    """A command printing `value` on one line (`hostname`, `uname -r`); None: it fails."""
    return Answer(1, "") if value is None else Answer(0, f"{value}\n")


def acs_from_lspci(lspci: str) -> dict[str, str]:
    """Port address -> ACSCtl line, from `lspci -D -vv` output."""
    acs: dict[str, str] = {}
    current: str | None = None
    for line in lspci.splitlines():
        head = _LSPCI_HEAD_RE.match(line)
        if head is not None:
            current = head.group(1)
            continue
        match = _ACS_RE.match(line)
        if match is not None and current is not None:
            acs[current] = match.group(1)
    return acs


def acs(out: Output | None) -> dict[str, str] | None:
    """`lspci -D -vv`'s ACSCtl lines; None when it failed or was not run."""
    return acs_from_lspci(out.stdout) if out is not None and out.ok else None


def lspci_acs(acs: Mapping[str, str] | None) -> Output:
    """`lspci -D -vv` as far as `acs` reads it: a head line per port, its ACSCtl line."""
    return Answer(0, "".join(f"{port} PCI bridge: port\n\tACSCtl:\t{ctl}\n\n"
                             for port, ctl in sorted((acs or {}).items())))


def address_bits(out: Output | None) -> int | None:
    """`address sizes : N bits physical, ...` of /proc/cpuinfo."""
    if out is None or not out.ok:
        return None
    m = re.search(r"(\d+) bits physical", out.stdout)
    return int(m.group(1)) if m else None


def address_line(bits: int | None) -> Output:
    """`grep -m1 -e '^address sizes' /proc/cpuinfo`: the line, or no match (exit 1)."""
    if bits is None:
        return Answer(1, "")
    return Answer(0, f"address sizes\t: {bits} bits physical, 48 bits virtual\n")


def package_versions(out: Output | None) -> dict[str, str]:
    """`dpkg-query -W -f='${Package} ${Version}\\n' ...` as {package: version} (empty: not run)."""
    found: dict[str, str] = {}
    for line in (out.stdout if out is not None else "").splitlines():
        name, _, version = line.strip().partition(" ")
        if name and version[:1].isdigit():
            found[name] = version
    return found


def dpkg_versions(installed: Mapping[str, str | None], asked: Sequence[str]) -> Output:
    """`dpkg-query -W -f='${Package} ${Version}\\n' PACKAGE...`: a line per installed package
    asked, and exit 1 naming each one not installed (the others still printed)."""
    lines = [f"{name} {installed[name]}\n" for name in asked if installed.get(name)]
    missing = [f"dpkg-query: no packages found matching {name}\n"
               for name in asked if not installed.get(name)]
    return Answer(1 if missing else 0, "".join(lines), "".join(missing))


def kernel_config_text(config: str) -> dict[str, str]:
    """The `CONFIG_NAME=value` lines of a kernel build's config, values as written (`y`, `m`,
    `"text"`, `0x...`); `# CONFIG_X is not set` lines and comments are left out."""
    found: dict[str, str] = {}
    for line in config.splitlines():
        match = _CONFIG_RE.match(line.strip())
        if match is not None:
            found[match.group(1)] = match.group(2)
    return found


def kernel_config(out: Output | None) -> dict[str, str] | None:
    """`cat /boot/config-RELEASE`; None when not read (no file, or not asked)."""
    if out is None or not out.ok:
        return None
    return kernel_config_text(out.stdout)


def ha_states(resources: str) -> dict[int, str]:
    """VMID -> requested state of each `vm: VMID` section of the HA resources file
    (`state` line; absent: started, ha-manager's default)."""
    found: dict[int, str] = {}
    current: int | None = None
    for line in resources.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[:1].isspace():
            kind, _, name = line.partition(":")
            name = name.strip()
            current = int(name) if kind.strip() == "vm" and name.isdigit() else None
            if current is not None:
                found[current] = "started"
            continue
        key, _, value = line.strip().partition(" ")
        if current is not None and key == "state" and value.strip():
            found[current] = value.strip()
    return found
