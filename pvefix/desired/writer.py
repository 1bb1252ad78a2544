"""Write a desired-state file: a small deterministic TOML writer for this one schema.

Same state, same bytes: nodes sorted by name, VMs by VMID, hostpci entries by index, keys by
name; one table per thing, so a change shows up as a one-line diff in review.
"""

from __future__ import annotations

import re
from collections import Counter

from pvefix.desired.model import CmdlineRules, DesiredState, HostPciRule, VmDesired

_BARE = re.compile(r"^[A-Za-z0-9_\-]+$")
_WIDTH = 96


def string(value: str) -> str:
    """A TOML basic string."""
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def key(name: str) -> str:
    return name if _BARE.match(name) else string(name)


def array(items: tuple[str, ...] | list[str]) -> str:
    """An array of strings: on one line when short, else packed lines of whole items."""
    rendered = [string(i) for i in items]
    one_line = "[" + ", ".join(rendered) + "]"
    if len(one_line) <= _WIDTH - 16:
        return one_line
    lines: list[str] = []
    current = ""
    for item in rendered:
        candidate = f"{current} {item}," if current else f"  {item},"
        if current and len(candidate) > _WIDTH:
            lines.append(current)
            candidate = f"  {item},"
        current = candidate
    lines.append(current)
    return "[\n" + "\n".join(lines) + "\n]"


def _cmdline(lines: list[str], header: str, rules: CmdlineRules) -> None:
    lines.append(f"[{header}]")
    lines.append(f"required = {array(rules.required)}")
    lines.append(f"forbidden = {array(rules.forbidden)}")
    lines.append("")


def _hostpci_index(name: str) -> int:
    return int(name[len("hostpci"):])


def _hostpci(lines: list[str], header: str, rule: HostPciRule) -> None:
    lines.append(f"[{header}]")
    if rule.mapping is not None:
        lines.append(f"mapping = {string(rule.mapping)}")
    if rule.host is not None:
        lines.append(f"host = {string(rule.host)}")
    if rule.pcie is not None:
        lines.append(f"pcie = {'true' if rule.pcie else 'false'}")
    if rule.x_vga is not None:
        lines.append(f"x-vga = {'true' if rule.x_vga else 'false'}")
    if rule.mdev is not None:
        lines.append(f"mdev = {string(rule.mdev)}")
    lines.append("")


def shared_free(state: DesiredState) -> tuple[str, ...]:
    """The `free` list the writer puts under `[defaults]`: the one most VMs have, when two or
    more share it (ties: the first in sort order, so the same state gives the same bytes)."""
    counts = Counter(vm.free for vm in state.vms.values() if vm.free)
    best = min(counts.items(), key=lambda item: (-item[1], item[0]), default=None)
    return best[0] if best is not None and best[1] >= 2 else ()


def _vm(lines: list[str], vmid: int, vm: VmDesired, shared: tuple[str, ...]) -> None:
    base = f"vms.{vmid}"
    lines.append(f"[{base}]")
    if vm.node is not None:
        lines.append(f"node = {string(vm.node)}")
    lines.append(f"closed = {'true' if vm.closed else 'false'}")
    if vm.absent:
        lines.append(f"absent = {array(vm.absent)}")
    if vm.free != shared:  # the same list as [defaults]: left to it
        lines.append(f"free = {array(vm.free)}")
    lines.append("")
    if vm.machine is not None:
        lines.append(f"[{base}.machine]")
        if vm.machine.family is not None:
            lines.append(f"family = {string(vm.machine.family)}")
        if vm.machine.exact is not None:
            lines.append(f"exact = {string(vm.machine.exact)}")
        lines.append("")
    for name in sorted(vm.hostpci, key=_hostpci_index):
        _hostpci(lines, f"{base}.hostpci.{name}", vm.hostpci[name])
    if vm.keys:
        lines.append(f"[{base}.keys]")
        for name in sorted(vm.keys):
            lines.append(f"{key(name)} = {string(vm.keys[name])}")
        lines.append("")
    if vm.guest_cmdline is not None:
        _cmdline(lines, f"{base}.guest_cmdline", vm.guest_cmdline)
    if vm.p2p is not None:
        lines.append(f"[{base}.p2p]")
        lines.append(f"wanted = {'true' if vm.p2p.wanted else 'false'}")
        if vm.p2p.clique_map is not None:
            lines.append(f"clique_map = {string(vm.p2p.clique_map)}")
        lines.append("")


def dumps_desired(state: DesiredState, *, header: str | None = None) -> str:
    """The file text for `state`; `header` becomes leading comment lines."""
    lines: list[str] = []
    for text in (header or "").splitlines():
        lines.append(f"# {text}".rstrip())
    lines.append(f"schema = {string(state.schema_)}")
    lines.append("")
    shared = shared_free(state)
    if shared:
        lines.append("[defaults]  # for every VM below that does not say otherwise")
        lines.append(f"free = {array(shared)}")
        lines.append("")
    for name in sorted(state.nodes):
        _cmdline(lines, f"nodes.{key(name)}.cmdline", state.nodes[name].cmdline)
    for vmid in sorted(state.vms):
        _vm(lines, vmid, state.vms[vmid], shared)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"
