"""What a check compares against the desired state: a VM's config views and its node's cmdlines.

Built from a HostState (bundle, or `read_live`) or straight from API answers (the cluster
reader), so every source gives the comparison the same values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pvefix.cmdline import Cmdline, KernelCmdlineFile, ProcCmdline
from pvefix.cmdline.grubd import GrubConfig, is_dropin
from pvefix.digest import sha1_text
from pvefix.hostfacts import BootLoader, BootToolFacts
from pvefix.paths import GRUB_DEFAULT, KERNEL_CMDLINE, PROC_CMDLINE
from pvefix.vmconfig.config import VMConfig
from pvefix.vmconfig.nextstart import NextStart

if TYPE_CHECKING:  # a check of a live cluster never builds one: the PCI models stay unloaded
    from pvefix.state import HostState

# Keys the API adds that are not config (digest) and never drift by themselves.
NOT_CONFIG = frozenset({"digest"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ObservedVm(_Frozen):
    """One VM as read: the config now (`current`), after [PENDING] is applied (`next`), and what
    QEMU really runs."""

    vmid: int
    node: str
    status: Literal["running", "stopped"]
    running_machine: str | None = None
    current: dict[str, str] = Field(default_factory=dict)
    next: dict[str, str] = Field(default_factory=dict)
    guest_cmdline: str | None = None
    digest: str | None = Field(
        default=None, description="Proxmox's config digest (SHA-1 of the raw file)")

    @property
    def has_pending(self) -> bool:
        return self.current != self.next


class ObservedNode(_Frozen):
    """One node's kernel cmdline: configured (where its boot loader reads it) and booted."""

    name: str
    loader: BootLoader = "unknown"
    configured: str | None = None
    configured_source: str | None = None
    running: str | None = None
    problem: str | None = Field(
        default=None, description="why the configured cmdline could not be read"
    )

    def configured_cmdline(self) -> Cmdline | None:
        return None if self.configured is None else Cmdline.parse(self.configured)

    def running_cmdline(self) -> Cmdline | None:
        return None if self.running is None else Cmdline.parse(self.running)


def _observed(vmid: int, node: str, ns: NextStart, status: Literal["running", "stopped"],
              running_machine: str | None, guest_cmdline: str | None = None) -> ObservedVm:
    return ObservedVm(
        vmid=vmid, node=node, status=status,
        running_machine=running_machine if status == "running" else None,
        current=dict(ns.current), next=ns.values, guest_cmdline=guest_cmdline, digest=ns.digest)


def vm_from_config(vmid: int, node: str, text: str, status: Literal["running", "stopped"],
                   running_machine: str | None, guest_cmdline: str | None = None) -> ObservedVm:
    """A VM from its raw config file (all sections)."""
    ns = NextStart.from_config(VMConfig.parse(text, f"{vmid}.conf"), sha1_text(text))
    return _observed(vmid, node, ns, status, running_machine, guest_cmdline)


def vm_from_state(state: HostState) -> ObservedVm:
    vm = state.vm
    return vm_from_config(
        vm.vmid, vm.node, vm.config_text, vm.status, vm.running_machine,
        state.guest.cmdline if state.guest is not None else None)


def vm_from_api(vmid: int, node: str, pending_rows: Iterable[Mapping[str, Any]],
                status: Mapping[str, Any]) -> ObservedVm:
    """A VM from GET .../pending (current and pending value of every key) and
    GET .../status/current."""
    ns = NextStart.from_rows(pending_rows)
    run: Literal["running", "stopped"] = (
        "running" if status.get("status") == "running" else "stopped")
    machine = status.get("running-machine")
    return _observed(vmid, node, ns, run, str(machine) if machine else None)


def node_from_files(name: str, boot_tool: BootToolFacts, files: Mapping[str, str | None], *,
                    unreadable: str | None = None) -> ObservedNode:
    """A node from its boot loader facts and host files (None: absent or not read), GRUB's
    drop-ins (/etc/default/grub.d/*.cfg) among them."""
    proc = files.get(PROC_CMDLINE)
    running = ProcCmdline.parse(proc).config_cmdline.render().strip() if proc else None
    if unreadable is not None:
        return ObservedNode(name=name, running=running, problem=unreadable)
    loader = boot_tool.loader
    if loader == "unknown":
        return ObservedNode(
            name=name, running=running,
            problem="boot loader unknown (`proxmox-boot-tool status` gave no usable answer): "
            "pvefix cannot tell which file holds the configured cmdline")
    path = KERNEL_CMDLINE if loader == "systemd-boot" else GRUB_DEFAULT
    text = files.get(path)
    if text is None:
        return ObservedNode(
            name=name, loader=loader, running=running, configured_source=path,
            problem=f"{path} is absent on the node")
    if path == KERNEL_CMDLINE:
        configured = KernelCmdlineFile.parse(text, path).cmdline.render().strip()
        return ObservedNode(name=name, loader=loader, configured=configured,
                            configured_source=path, running=running)
    # update-grub's line: /etc/default/grub, then each drop-in of grub.d (as the planner reads it)
    grub = GrubConfig({p: t for p, t in files.items()
                       if t is not None and (p == GRUB_DEFAULT or is_dropin(p))})
    source = ", ".join(grub.paths)
    if grub.unknown:
        return ObservedNode(name=name, loader=loader, running=running, configured_source=source,
                            problem="the configured GRUB line cannot be evaluated: "
                            + "; ".join(grub.unknown))
    return ObservedNode(name=name, loader=loader, configured=grub.cmdline.render().strip(),
                        configured_source=source, running=running)


def node_from_state(state: HostState) -> ObservedNode:
    """The VM's node from a HostState (no SSH: the host files are unknown)."""
    if not state.host_files_read:
        return node_from_files(
            state.node.name, state.boot_tool, {},
            unreadable="no SSH access: the host cmdline has no API (pass SSH settings)")
    files = {path: fact.text for path, fact in state.files.items()}
    return node_from_files(state.node.name, state.boot_tool, files)
