"""GPU topology: where the GPUs sit on the host, and what that means for P2P inside the VM.

One root complex per GPU (no PCIe switch) does not forbid peer-to-peer on bare metal: on AMD Zen
hosts the NVIDIA driver allows BAR1 P2P across root complexes (about 0.5 us write latency against
about 14 us through host memory). Inside a KVM guest the driver cannot see the host topology, so
it reports P2P as not supported (NS) between passed GPUs. QEMU's vfio-pci property
`x-nv-gpudirect-clique=0..15` tells the guest driver which GPUs may talk; Proxmox sets it only
through `args: -set device.hostpciN.x-nv-gpudirect-clique=0` (root@pam only). Caveats: it works
only on single-function ids (`-set` cannot address `hostpciN.0`), not with `x-vga=1` or
`hidden=1`, and public reports show a grant that reads OK while writes land in a private mirror:
verify by moving data (`pvefix probe` / `pvefix verify`), not by `nvidia-smi topo -p2p`. Even
with P2P, NCCL keeps using host memory across CPU host bridges unless `NCCL_P2P_LEVEL=SYS`.
This rule reports; it plans no change.
"""

from __future__ import annotations

from pvefix.planner.context import Context, Passed
from pvefix.planner.model import Finding, RuleResult

NAME = "topology"


def rule(ctx: Context) -> RuleResult:
    entries = ctx.gpu_entries
    gpus = ctx.gpus
    if len(gpus) < 2:
        return RuleResult(rule=NAME, noop="fewer than two GPUs: no peer-to-peer question")
    complexes: dict[str, list[str]] = {}
    for g in gpus:
        root = g.parent_path[0] if g.parent_path else "unknown"
        complexes.setdefault(root, []).append(g.address)
    evidence = [f"{root}: {', '.join(addrs)}" for root, addrs in sorted(complexes.items())]
    findings: list[Finding] = []
    separate = len(complexes) == len(gpus) and "unknown" not in complexes
    where = (
        "each on its own PCIe root complex (no switch)"
        if separate
        else f"on {len(complexes)} root complex(es)"
    )
    vendor = (ctx.state.node.cpu_vendor or "").lower()
    findings.append(
        Finding(
            id="topology.root-complexes",
            rule=NAME,
            severity="info",
            title=f"{len(gpus)} GPUs {where}",
            detail=(
                "On bare metal the NVIDIA driver allows P2P across root complexes"
                + (" on AMD Zen hosts" if "amd" in vendor else "")
                + "; inside the VM it cannot see this topology and reports P2P as NS, so every"
                " transfer between GPUs goes through host memory (about 14 us each)."
            ),
            evidence=evidence,
        )
    )
    eligible = [p for p in entries if not p.entry.x_vga and _single_function(p)]
    blocked = sorted({p.key for p in entries} - {p.key for p in eligible})
    args = " ".join(f"-set device.{p.key}.x-nv-gpudirect-clique=0" for p in eligible)
    caveats = []
    if blocked:
        caveats.append(
            f"not possible for {', '.join(blocked)} (multi-function or x-vga=1: -set cannot"
            " address hostpciN.0, and x-vga/hidden hide the hypervisor from the driver)"
        )
    findings.append(
        Finding(
            id="topology.gpudirect-clique",
            rule=NAME,
            severity="warning",
            title="GPU peer-to-peer in the VM needs x-nv-gpudirect-clique (not planned)",
            detail=(
                "To let the guest driver enable P2P between the passed GPUs, a root@pam admin can"
                f" set: args: {args}"
                + (f". Caveats: {'; '.join(caveats)}" if caveats else "")
                + ". Verify it by moving data (pvefix probe / pvefix verify): a grant can read OK"
                " in nvidia-smi topo -p2p while writes never reach the peer. NCCL also needs"
                " NCCL_P2P_LEVEL=SYS to use P2P across host bridges; vLLM disables its custom"
                " all-reduce on more than 2 PCIe GPUs."
            ),
            evidence=[f"eligible: {', '.join(p.key for p in eligible) or 'none'}"],
        )
    )
    return RuleResult(rule=NAME, findings=findings)


def _single_function(p: Passed) -> bool:
    """True when `-set device.hostpciN` can address the device (one function, no .F suffix)."""
    has_fn = bool(p.addresses) and all("." in a.rsplit(":", 1)[-1] for a in p.addresses)
    return has_fn and (p.entry.mapping is not None or len(p.addresses) == 1)
