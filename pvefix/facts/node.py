"""Every node fact pvefix reads, declared once: the one list of the host's commands.

The live reader (`sources/live.py`) sends `round_zero("plan")` with the VM configs in its first
SSH round and the later rounds `rounds` gives; `check`'s cluster read sends `round_zero("check")`;
the collect script and the bundle reader keep the file facts at their `tree` paths. The
cluster's VM configs come in one command (`CLUSTER_CONFIGS`, check --all's bulk read). The
simulator answers each command here from its host tree by the declaration alone (the tree path,
or `shown` of the `meta:` key). To add a host fact: declare it here with its `field`, and give
NodeFacts (`pvefix/state.py`) that field; docs/architecture.md shows the recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from pvefix.facts import parse
from pvefix.facts.model import Answer, Command, Fact, Output, User
from pvefix.facts.rounds import rounds
from pvefix.hostfacts import BootToolFacts, boot_tool_facts, dropin_paths
from pvefix.paths import (
    CPU_MODELS,
    GRUB_D,
    GRUB_DEFAULT,
    HA_RESOURCES,
    KERNEL_CMDLINE,
    MAPPING_FILE,
    NODES_DIR,
    PROC_CMDLINE,
)

PLAN: frozenset[User] = frozenset({"plan", "collect"})
EVERYWHERE: frozenset[User] = frozenset({"plan", "check", "collect"})


def _file(name: str, path: str, used_by: frozenset[User] = PLAN) -> Fact[str | None]:
    return Fact(name, Command(("cat", path)), partial(parse.text, path), path, None, used_by)


def _boot_tool(out: Output | None) -> BootToolFacts:
    return boot_tool_facts(out)  # type: ignore[arg-type]  # any Output: exit code, stdout


def _boot_tool_shown(status: Any) -> Output:
    """The status a tree keeps (hosttree.meta.BootToolStatus), as the command prints it."""
    return Answer(status.exit_code, status.output, status.stderr)


def _dropins(out: Output | None) -> list[str]:
    return dropin_paths(out)  # type: ignore[arg-type]  # any Output: ok, stdout


HOSTNAME: Fact[str | None] = Fact(
    "hostname", Command(("hostname",)), parse.first_line, "meta:node", None,
    frozenset({"check", "collect"}), shown=parse.line)
KERNEL_CMDLINE_FILE = _file("kernel_cmdline", KERNEL_CMDLINE, EVERYWHERE)
GRUB_DEFAULT_FILE = _file("grub_default", GRUB_DEFAULT, EVERYWHERE)
PROC_CMDLINE_FILE = _file("proc_cmdline", PROC_CMDLINE, EVERYWHERE)
BOOT_TOOL: Fact[BootToolFacts] = Fact(
    "boot_tool", Command(("proxmox-boot-tool", "status")), _boot_tool,
    "meta:proxmox_boot_tool", BootToolFacts(), EVERYWHERE, shown=_boot_tool_shown)
GRUB_DROPINS: Fact[list[str]] = Fact(
    "grub_dropins", Command(("find", GRUB_D, "-maxdepth", "1", "-name", "*.cfg", "-type", "f")),
    _dropins, "etc/default/grub.d/*.cfg", [], EVERYWHERE)
KERNEL_VERSION: Fact[str | None] = Fact(
    "kernel_version", Command(("uname", "-r")), parse.first_line, "meta:versions.kernel", None,
    PLAN, shown=parse.line)
MAPPING: Fact[str | None] = _file("mapping_file", MAPPING_FILE)
ACS: Fact[dict[str, str] | None] = Fact(
    "acs", Command(("lspci", "-D", "-vv")), parse.acs, "meta:acs", None, PLAN,
    shown=parse.lspci_acs)
# The host's physical address width decides phys-bits=host (Memory.pm get_max_mem reads it so).
CPU_PHYS_BITS: Fact[int | None] = Fact(
    "cpu_phys_bits", Command(("grep", "-m1", "-e", "^address sizes", "/proc/cpuinfo")),
    parse.address_bits, "meta:cpu.phys_bits", None, PLAN, shown=parse.address_line)
CPU_MODELS_FILE = _file("cpu_models", CPU_MODELS)
# The OVMF build and the QEMU (with its SeaBIOS) the next VM start uses; dpkg-query exits 1 when
# one of them is not installed and still prints the others.
PACKAGE_NAMES = ("pve-edk2-firmware-ovmf", "pve-edk2-firmware", "pve-qemu-kvm")


def _packages_shown(versions: Any) -> Output:
    """The versions a tree keeps (hosttree.meta.Versions: OVMF's build as the package
    pve-edk2-firmware, QEMU's without its Debian revision) as dpkg-query prints them."""
    qemu = f"{versions.qemu}-1" if versions.qemu else None
    installed = {"pve-edk2-firmware": versions.edk2, "pve-qemu-kvm": qemu}
    return parse.dpkg_versions(installed, PACKAGE_NAMES)


PACKAGES: Fact[dict[str, str]] = Fact(
    "packages", Command(("dpkg-query", "-W", "-f=${Package} ${Version}\\n", *PACKAGE_NAMES)),
    parse.package_versions, "meta:versions", {}, PLAN, shown=_packages_shown)

# The running kernel build's config: which drivers and options it was built with.
KERNEL_CONFIG: Fact[dict[str, str] | None] = Fact(
    "kernel_config", Command(("cat", "/boot/config-{kernel_version}")), parse.kernel_config,
    "boot/config-{kernel_version}", None, PLAN, needs=("kernel_version",), field="kernel_config")

# Whether VFIO assigns devices without interrupt remapping (Y/N; no file: vfio_iommu_type1 not
# loaded). A modprobe.d option sets it as much as the cmdline's token, so it is read as it runs.
UNSAFE_INTERRUPTS_PATH = "/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"
UNSAFE_INTERRUPTS: Fact[str | None] = Fact(
    "unsafe_interrupts", Command(("cat", UNSAFE_INTERRUPTS_PATH)), parse.first_line,
    UNSAFE_INTERRUPTS_PATH, None, PLAN, field="unsafe_interrupts")

# Which VMs HA manages: the API says it in each VM's status/current (`ha`), a bundle keeps the
# file and `pvefix collect import` puts each VM's state in pvefix-host.json.
HA_RESOURCES_FILE = _file("ha_resources", HA_RESOURCES, frozenset({"collect"}))

NODE_FACTS: tuple[Fact[Any], ...] = (
    HOSTNAME, KERNEL_CMDLINE_FILE, GRUB_DEFAULT_FILE, PROC_CMDLINE_FILE, BOOT_TOOL,
    KERNEL_VERSION, MAPPING, ACS, GRUB_DROPINS, CPU_PHYS_BITS, CPU_MODELS_FILE, PACKAGES,
    KERNEL_CONFIG, HA_RESOURCES_FILE, UNSAFE_INTERRUPTS,
)


# Every VM config of the cluster in one command from pmxcfs (check --all's bulk read; parsed by
# pvefix.sources.pmxcfs): a fixed script run by `sh -c`, nothing of the user's reaches it.
CLUSTER_CONFIGS: tuple[str, ...] = (
    "sh", "-c", f"tar -c -f - {NODES_DIR}/*/qemu-server/*.conf")


def facts_for(user: User) -> list[Fact[Any]]:
    """The node facts `user` reads, in declaration order."""
    return [f for f in NODE_FACTS if user in f.used_by]


def round_zero(user: User) -> list[tuple[str, ...]]:
    """The commands of the first SSH round for `user`: every fact that needs no other."""
    return [f.argv() for f in rounds(facts_for(user))[0]]


def cat(path: str) -> tuple[str, ...]:
    """How a node file that no fact declares by its path is read (a VM config, a GRUB
    drop-in GRUB_DROPINS listed): the one spelling of `cat` outside the declarations."""
    return ("cat", path)


dropin_read = cat


def follow_ups(facts: Sequence[Fact[Any]],
               answer: Callable[[tuple[str, ...]], Output | None]) -> list[tuple[str, ...]]:
    """The reads a first round's answers call for (`answer`: a command's result by its
    argument list): the text of each GRUB drop-in it listed, where GRUB_DROPINS is read."""
    if GRUB_DROPINS not in facts:
        return []
    return [dropin_read(p) for p in GRUB_DROPINS.parse(answer(GRUB_DROPINS.argv()))]


def collect_copies() -> list[str]:
    """The host paths the collect script copies into the tree for the file facts, as words to
    put in double quotes: a path that names another fact's value reads it there
    (`/boot/config-$(uname -r)`)."""
    by_name = {f.name: f for f in NODE_FACTS}
    out: list[str] = []
    for fact in NODE_FACTS:
        argv = fact.read.argv if isinstance(fact.read, Command) else ()
        if "collect" not in fact.used_by or len(argv) != 2 or argv[0] != "cat":
            continue
        path = argv[1]
        for name in fact.needs:
            path = path.replace("{" + name + "}", "$(" + " ".join(by_name[name].argv()) + ")")
        out.append(path)
    return out
