"""GPU topology: where the GPUs sit on the host, and what that means for P2P inside the VM.

One root complex per GPU (no PCIe switch) does not forbid peer-to-peer on bare metal: on AMD Zen
hosts the NVIDIA driver allows BAR1 P2P across root complexes (about 0.5 us write latency
against about 14 us through host memory; DOMAIN.md section 6). On other platforms the sources do
not settle it, and pvefix says it must be measured. Inside a KVM guest the driver cannot see the
host topology, so it reports P2P as not supported (NS) between passed GPUs. QEMU's vfio-pci
property `x-nv-gpudirect-clique=0..15` tells the guest driver which GPUs may talk; Proxmox sets
it only through `args: -set device.hostpciN.x-nv-gpudirect-clique=0` (root@pam only). Caveats:
it works only on single-function ids (`-set` cannot address `hostpciN.0`), and not at all while
any entry has `x-vga=1` or `cpu` has `hidden=1`: qemu-server then hides KVM from the whole VM
(`kvm=off` on -cpu; PCI.pm print_hostpci_devices, CPUConfig.pm get_cpu_options), and public
reports show a grant that reads OK while writes land in a private mirror: verify by moving data
(`pvefix probe` / `pvefix verify`), not by `nvidia-smi topo -p2p`. Even with P2P, NCCL keeps
using host memory across CPU host bridges unless `NCCL_P2P_LEVEL=SYS`. This rule reports; it
plans no change: the P2P phase (phase 3, rules/p2p.py) is planned when asked for with `--p2p`,
and then speaks for the clique instead of the finding here.
"""

from __future__ import annotations

import re

from pvefix.closedworld.vendors import may_take
from pvefix.errors import PvefixError
from pvefix.planner import mmio
from pvefix.planner.context import Context, Passed
from pvefix.planner.effective_cpu import args_hide_kvm
from pvefix.planner.model import Finding, RuleResult
from pvefix.vmconfig.args import CLIQUE_PROPERTY, clique_map

NAME = "topology"


ZEN_MODEL = re.compile(r"\b(EPYC|Ryzen|Threadripper)\b", re.IGNORECASE)


def is_amd_zen(ctx: Context) -> bool:
    """An AMD host whose CPU model is a Zen-family part (EPYC, Ryzen, Threadripper)."""
    node = ctx.state.node
    return node.cpu_vendor == "AuthenticAMD" and bool(ZEN_MODEL.search(node.cpu_model or ""))


def kvm_hidden_by(ctx: Context) -> list[str]:
    """What makes the VM's -cpu carry kvm=off: x-vga=1 unless the cpu line (or its model) sets
    `hidden` (which then decides alone: CPUConfig.pm get_cpu_options), hidden=1; under an args
    -cpu only that one (QEMU keeps the last -cpu, Proxmox's kvm=off with it)."""
    if ctx.args_cpu is not None:  # QEMU keeps args' -cpu: the cpu line and x-vga are moot
        return [f"args sets -cpu {ctx.args_cpu} (kvm=off), which QEMU keeps over Proxmox's"
                " own -cpu"] if args_hide_kvm(ctx.args_cpu) else []
    cpu = mmio.read_cpu(ctx.value("cpu"), ctx.cpu_models)
    why = [] if cpu.hidden_given else [f"{p.key} has x-vga=1" for p in ctx.passed
                                       if p.entry.x_vga]
    if cpu.hidden and cpu.prop.get("hidden") is None and cpu.model is not None:
        why.append(f"cpu model {cpu.cputype} has `hidden 1` in cpu-models.conf")
    elif cpu.hidden:
        why.append("cpu has hidden=1")
    return why


def existing_cliques(args: str | None) -> dict[str, int]:
    """hostpciN -> clique already set through `args: -set device.hostpciN.x-nv-...=N`."""
    try:
        return clique_map(args)
    except PvefixError:  # an args line qemu-server could not split either
        return {}


def rule(ctx: Context) -> RuleResult:
    entries = ctx.gpu_entries
    if len(entries) < 2 and len(entries) + len(ctx.unknown_entries) >= 2:
        return RuleResult(rule=NAME, noop=ctx.no_gpu_reason() + ": how many GPUs are passed,"
                          " and so whether there is a peer-to-peer question, is not established")
    if len(entries) < 2:
        return RuleResult(rule=NAME, noop="fewer than two GPU entries: no peer-to-peer question")
    complexes: dict[str, list[str]] = {}
    for p in entries:
        roots = sorted({d.parent_path[0] if d.parent_path else "unknown"
                        for d in p.gpu_candidates})
        # A mapping entry passes one of its candidates; a raw entry of several ids passes them
        # all, as functions of one slot (PCI.pm print_hostpci_devices: hostpciN.0, .1, ...).
        label = roots[0] if len(roots) == 1 else (
            f"one of {len(roots)} (pool {p.entry.mapping})" if p.is_pool
            else "all of " + " + ".join(roots))
        complexes.setdefault(label, []).append(p.key)
    evidence = [f"{root}: {', '.join(keys)}" for root, keys in sorted(complexes.items())]
    pools = [p for p in entries if p.is_pool and len(p.devices) > 1]
    if pools:
        evidence.append(
            "mapping entries pass one device of their pool, picked at start: which root complex"
            " each lands on is decided then"
        )
    findings: list[Finding] = []
    separate = len(complexes) == len(entries) and not any(
        k == "unknown" or k.startswith(("one of", "all of")) for k in complexes
    )
    # a root port directly above the GPU is parent_path [root complex, port]; more bridges
    # between them are a switch (or a PCIe-to-PCI bridge)
    behind = sorted({p.key for p in entries for d in p.gpu_candidates if len(d.parent_path) > 2})
    where = (
        ("each on its own PCIe root complex (no switch)" if not behind else
         f"each on its own PCIe root complex ({', '.join(behind)} behind a switch)")
        if separate
        else f"on {len(complexes)} root complex group(s)"
    )
    zen = is_amd_zen(ctx)
    bare_metal = (
        "On bare metal the NVIDIA driver allows P2P across root complexes on AMD Zen hosts"
        " (NVIDIA open-gpu-kernel-modules; `nvidia-smi topo -p2p w` on the host shows it)"
        if zen
        else "Whether this host lets these GPUs use P2P on bare metal is not settled by the"
        f" sources for {ctx.state.node.cpu_model or 'this CPU'}: it must be measured"
        " (pvefix probe on bare metal, or after a clique in the guest)"
    )
    nvidia = [p for p in entries if clique_vendor(p)]
    detail = (
        bare_metal + "; inside the VM the driver cannot see the host topology and reports P2P"
        " as NS, so every transfer between GPUs goes through host memory."
        if nvidia else _not_nvidia(entries))
    findings.append(
        Finding(
            id="topology.root-complexes", rule=NAME, severity="info",
            title=f"{len(entries)} GPU entries {where}", detail=detail, evidence=evidence))
    if not ctx.options.p2p and nvidia:
        findings.append(_clique_finding(ctx, nvidia))
    return RuleResult(rule=NAME, findings=findings)


def _clique_finding(ctx: Context, entries: list[Passed]) -> Finding:
    hidden = kvm_hidden_by(ctx)
    have = existing_cliques(ctx.value("args"))
    single = [p for p in entries if _single_function(p)]
    multi = sorted({p.key for p in entries} - {p.key for p in single})
    evidence = [
        f"single-function entries: {', '.join(p.key for p in single) or 'none'}"]
    if multi:
        evidence.append(
            f"multi-function entries ({', '.join(multi)}): -set cannot address hostpciN.0;"
            " pass the GPU function alone (host=BB:DD.0)"
        )
    if have:
        evidence.append(
            "cliques already in args: " + ", ".join(f"{k}={v}" for k, v in sorted(have.items())))
    if hidden:
        return _kvm_hidden(hidden, evidence)
    if not single:
        return Finding(
            id="topology.clique-blocked", rule=NAME, severity="warning",
            title="No passed GPU can be addressed by a P2P clique",
            detail="Every GPU entry is multi-function (host=BB:DD): -set cannot address"
            " hostpciN.0. Passing the GPU function alone (host=BB:DD.0) would make it"
            " eligible.",
            evidence=evidence)
    missing = [p for p in single if p.key not in have]
    if not missing:
        return Finding(
            id="topology.clique-set", rule=NAME, severity="info",
            title="Every eligible GPU already has a P2P clique",
            detail="args sets x-nv-gpudirect-clique for each eligible entry. It asserts P2P to the"
            " guest driver; verify it by moving data (pvefix verify), not by reading"
            " nvidia-smi topo -p2p.",
            evidence=evidence)
    args = " ".join(f"-set device.{p.key}.x-nv-gpudirect-clique=0" for p in missing)
    scope = (
        "one clique for all of them: an AMD Zen host, where the NVIDIA driver allows P2P"
        " across root complexes"
        if is_amd_zen(ctx)
        else "a clique only where P2P between the GPUs is known to work on this host, which"
        " the sources do not settle here: measure first"
    )
    return Finding(
        id="topology.gpudirect-clique", rule=NAME, severity="warning",
        title="GPU peer-to-peer in the VM needs x-nv-gpudirect-clique (not planned)",
        detail=f"To let the guest driver enable P2P ({scope}), a root@pam admin can set: args:"
        f" {args}. Verify it by moving data (pvefix probe / pvefix verify): a grant can"
        " read OK in nvidia-smi topo -p2p while writes never reach the peer. NCCL also needs"
        " NCCL_P2P_LEVEL=SYS to use P2P across host bridges; vLLM disables its custom"
        " all-reduce on more than 2 PCIe GPUs. Ask for it with `pvefix plan --p2p` (phase"
        " 3, proven with apply --verify; docs/p2p.md).",
        evidence=[*evidence, f"eligible: {', '.join(p.key for p in missing)}"])


def _kvm_hidden(hidden: list[str], evidence: list[str]) -> Finding:
    """KVM hidden from the guest (`hidden`: by what) blocks every clique."""
    return Finding(
        id="topology.clique-blocked", rule=NAME, severity="warning",
        title="No GPU can get a P2P clique while KVM is hidden from the guest",
        detail=(
            f"{'; '.join(hidden)}: KVM is hidden (kvm=off on -cpu) for the whole VM"
            " (PCI.pm print_hostpci_devices, CPUConfig.pm get_cpu_options), and the NVIDIA"
            " driver does not honour x-nv-gpudirect-clique without the hypervisor visible."
            " Lifting it: "
            + "; ".join(
                ("remove x-vga=1 from " + h.split()[0]) if "x-vga" in h
                else "remove kvm=off from the -cpu in args (pvefix does not edit it)"
                if h.startswith("args")
                else "set hidden=0 on the VM's cpu line (it overrides the model's)"
                if "cpu-models.conf" in h else "remove hidden=1 from cpu"
                for h in hidden
            )
            + " (keep x-vga=1 only on a GPU that drives the VM's display). `pvefix plan"
            " --p2p` plans these guards with their risks (docs/p2p.md)."
        ),
        evidence=evidence)


def _not_nvidia(entries: list[Passed]) -> str:
    vendors = sorted({d.vendor for p in entries for d in p.gpu_candidates})
    return (f"These GPUs are not NVIDIA's (vendor {', '.join(vendors)}): the GPUDirect clique"
            " (x-nv-gpudirect-clique) is NVIDIA's only, and QEMU refuses it on any other vendor"
            " (hw/vfio/pci-quirks.c), so pvefix neither plans nor advises one; P2P between these"
            " GPUs inside a VM is not modelled by pvefix.")


def clique_vendor(p: Passed) -> bool:
    """Every GPU function of the entry may take x-nv-gpudirect-clique: NVIDIA's only (QEMU
    refuses it on any other vendor: pvefix.closedworld.vendors)."""
    shown = p.gpu_candidates
    return bool(shown) and all(may_take(CLIQUE_PROPERTY, d.vendor) for d in shown)


def _single_function(p: Passed) -> bool:
    """True when `-set device.hostpciN` can address the device (one function, no .F suffix)."""
    has_fn = bool(p.addresses) and all("." in a.rsplit(":", 1)[-1] for a in p.addresses)
    return has_fn and (p.entry.mapping is not None or len(p.addresses) == 1)
