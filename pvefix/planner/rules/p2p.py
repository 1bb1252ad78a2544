"""The P2P phase (phase 3, asked for with `--p2p`): NVIDIA's GPUDirect clique in the guest.

Inside a KVM guest the NVIDIA driver cannot see the host topology and reports P2P between the
passed GPUs as NS. QEMU's vfio-pci property `x-nv-gpudirect-clique=0..15` adds a capability that
tells the guest driver which GPUs may talk; Proxmox sets it only through
`args: -set device.hostpciN.x-nv-gpudirect-clique=C` (root@pam only). DOMAIN.md section 6.

What stands in the way, each planned as a change with its risk (the guards):
- `hidden=1` in `cpu` and `x-vga=1` on any entry make qemu-server add `kvm=off` to `-cpu` for the
  whole VM (CPUConfig.pm get_cpu_options; the oracle's `cmd` shows it), which hides the
  hypervisor from the driver: no entry is eligible while either stands.
- `x-vga=1` is removed only from a compute GPU: a 3D-controller-class function (0x0302, no display
  engine), or an entry the admin names in `--clique-map`. A VGA-class GPU with `x-vga=1` is a
  display GPU the user keeps: pvefix never touches it, and the phase is not planned while it stays.
- `host=BB:DD` of a device with several functions gets QEMU ids `hostpciN.0`, `hostpciN.1`, ...
  (PCI.pm), which `-set device.hostpciN` cannot address: the entry is split to `BB:DD.0`, and each
  other function (the audio function) becomes its own entry without a clique.

Cliques come from the host's facts: all GPUs in one clique on an AMD Zen host (the NVIDIA driver
allows BAR1 P2P across root complexes there, DOMAIN.md section 6); elsewhere the sources do not
settle it, so one clique per NUMA node, or the admin's `--clique-map`, and the plan says it must be
measured (`pvefix apply --phase 3 --verify` moves data between every pair).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pvefix.errors import ValidationError
from pvefix.planner import mmio
from pvefix.planner.context import Context, Passed
from pvefix.planner.effective_cpu import args_hide_kvm
from pvefix.planner.model import (
    HOSTPCI_KEY_PATTERN,
    Change,
    Finding,
    Risk,
    RuleResult,
    VmConfigChange,
)
from pvefix.planner.rules import topology
from pvefix.vmconfig import HostPci, PropertyString
from pvefix.vmconfig.args import MAX_CLIQUE, ArgsIgnored, clique_map, merge_cliques
from pvefix.vmconfig.hostpci import MAX_HOSTPCI

NAME = "p2p"
PHASE = 3
NVIDIA = "0x10de"
COMPUTE_CLASS = "0x0302"  # 3D controller: no display engine, no VGA legacy ranges
# Sources users can read (DOMAIN.md is the project's own notes, not shipped).
_SOURCE_ZEN = ("the NVIDIA driver allows BAR1 P2P across root complexes on AMD Zen: NVIDIA"
               " open-gpu-kernel-modules; see it on the host with `nvidia-smi topo -p2p w`")
_PREREQ_RULES = ("q35", "pcie")
PROOF = (
    "after the cold start pvefix reads the running QEMU's /proc/PID/cmdline on the node (every"
    " clique, no kvm=off), then probes the guest: P2P NS -> OK, data delivered byte for byte,"
    " latency and bandwidth per pair, NCCL all-reduce with and without P2P under a timeout."
)


_HOSTPCI_KEY = re.compile(HOSTPCI_KEY_PATTERN)  # as the plan file's model bounds it


def parse_clique_map(text: str) -> dict[str, int]:
    """`hostpci0=0,hostpci1=0,hostpci2=1` -> {hostpci0: 0, ...}; raises ValidationError."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        # ASCII digits only ('²'.isdigit() is true, and int() refuses it).
        if not sep or not re.fullmatch(r"hostpci[0-9]+", key) \
                or not re.fullmatch(r"[0-9]+", value):
            raise ValidationError(f"--clique-map: '{part}' is not hostpciN=CLIQUE")
        if not _HOSTPCI_KEY.match(key):
            raise ValidationError(f"--clique-map: '{key}' is not hostpci0..hostpci15")
        if int(value) > MAX_CLIQUE:
            raise ValidationError(f"--clique-map: clique {value} is not in 0..{MAX_CLIQUE}")
        out[key] = int(value)
    return out


@dataclass
class Assessment:
    """Where the VM stands for the clique, on the config as the earlier phases leave it."""

    gpus: list[Passed]
    values: dict[str, str | None]
    hidden_cpu: str | None = None  # the cpu value when it holds hidden=1
    xvga_compute: list[Passed] = field(default_factory=list)
    xvga_kept: list[str] = field(default_factory=list)
    split: dict[str, list[str]] = field(default_factory=dict)  # key -> other functions
    blocked: dict[str, str] = field(default_factory=dict)
    cliques: dict[str, int] = field(default_factory=dict)
    basis: str = ""
    must_measure: bool = True
    unsettled: str | None = None
    numa: dict[str, int] = field(default_factory=dict)  # key -> the NUMA node its clique is

    def value(self, key: str) -> str | None:
        return self.values.get(key)

    @property
    def kvm_hidden_by(self) -> list[str]:
        why = [f"x-vga=1 on {k}" for k in self.xvga_kept]
        why += [f"x-vga=1 on {p.key}" for p in self.xvga_compute]
        if self.hidden_cpu is not None:
            why.insert(0, f"hidden=1 in cpu ({self.hidden_cpu})")
        return why


def current_values(ctx: Context, earlier: list[Change]) -> dict[str, str | None]:
    """The VM's values (pending merged over main) once the earlier changes are made."""
    values: dict[str, str | None] = dict(ctx.values)
    for c in earlier:
        if c.target == "vm-config":
            values[c.key] = c.after
    return values


def _entry(a: Assessment, p: Passed) -> HostPci:
    raw = a.value(p.key)
    try:
        return HostPci.parse(raw, p.key) if raw else p.entry
    except ValidationError:
        return p.entry


def _nvidia(p: Passed) -> bool:
    return topology.clique_vendor(p)


def assess(ctx: Context, earlier: list[Change]) -> Assessment:
    a = Assessment(gpus=[p for p in ctx.gpu_entries if _nvidia(p)],
                   values=current_values(ctx, earlier))
    cpu = a.value("cpu")
    # Under args' -cpu the cpu line's hidden= never reaches QEMU (the last -cpu wins): only
    # args' own kvm=off hides KVM then (_args_cpu_hides_kvm).
    line = mmio.read_cpu(cpu, ctx.cpu_models)
    if cpu and ctx.args_cpu is None and line.hidden:
        a.hidden_cpu = cpu
    # x-vga=1 hides KVM only through the kvm=off qemu-server puts in its own -cpu, and only
    # where the cpu line (or its model) does not set hidden itself (CPUConfig.pm
    # get_cpu_options): then, and under an args -cpu, x-vga stands in no clique's way.
    xvga_hides = ctx.args_cpu is None and not line.hidden_given
    named = set(ctx.options.clique_map)
    gpu_keys = {p.key for p in a.gpus}
    for p in ctx.passed:
        if not xvga_hides or not _entry(a, p).x_vga:
            continue
        shown = [d for d in p.devices if d.is_display]
        compute = bool(shown) and all(d.class_.startswith(COMPUTE_CLASS) for d in shown)
        if p.key in gpu_keys and (compute or p.key in named):
            a.xvga_compute.append(p)
        else:
            a.xvga_kept.append(p.key)
    for p in a.gpus:
        _addressable(ctx, a, p)
    _decide_cliques(ctx, a)
    return a


def _addressable(ctx: Context, a: Assessment, p: Passed) -> None:
    """Can `-set device.<key>` reach this entry's GPU? Record a split or a block if not."""
    entry = _entry(a, p)
    if p.problem:
        a.blocked[p.key] = p.problem
    elif entry.mapping:
        # a slot of one function is passed as one device, id hostpciN (PCI.pm: multifunction
        # only with more than one function); one of several, or unknown ones, gets hostpciN.0
        whole = [x for x in p.addresses if "." not in x.rsplit(":", 1)[-1]
                 and sum(d.address.startswith(x + ".") for d in p.devices) != 1]
        if whole:
            a.blocked[p.key] = (
                f"mapping {entry.mapping} names {', '.join(whole)} without a function, so QEMU"
                f" ids it {p.key}.0, .1, ... which -set cannot address: name the .0 function in"
                " the mapping (Datacenter > Resource Mappings)"
            )
    elif len(entry.hosts) > 1:
        a.blocked[p.key] = (
            f"{p.key} passes several host ids, which QEMU ids {p.key}.0, .1, ...: -set cannot"
            " address them; pass each GPU as its own hostpci entry"
        )
    elif entry.multifunction:
        functions = sorted(d.address for d in p.devices)
        if not functions:
            a.blocked[p.key] = f"the functions of {entry.hosts[0]} are not in the facts read"
        elif len(functions) > 1:
            a.split[p.key] = [f for f in functions if not f.endswith(".0")]


def _decide_cliques(ctx: Context, a: Assessment) -> None:
    eligible = [p for p in a.gpus if p.key not in a.blocked]
    wanted = ctx.options.clique_map
    node = ctx.state.node
    if wanted:
        unknown = sorted(set(wanted) - {p.key for p in a.gpus})
        if unknown:
            raise ValidationError(
                f"--clique-map names {', '.join(unknown)}, which pass no NVIDIA GPU in VM"
                f" {ctx.state.vm.vmid} (GPU entries: {', '.join(p.key for p in a.gpus) or 'none'})"
            )
        a.cliques = {k: v for k, v in wanted.items() if k not in a.blocked}
        a.basis = "the cliques given with --clique-map"
        a.must_measure = True
        return
    if topology.is_amd_zen(ctx):
        a.cliques = {p.key: 0 for p in eligible}
        a.basis = f"one clique for every GPU: {node.cpu_model} is AMD Zen ({_SOURCE_ZEN})"
        a.must_measure = False
        return
    numa: dict[str, int] = {}
    for p in eligible:
        nodes = {d.numa_node for d in p.devices if d.is_display}
        if len(nodes) == 1 and None not in nodes:
            numa[p.key] = nodes.pop() or 0
        else:
            shown = ", ".join(sorted(str(n) for n in nodes))
            a.blocked[p.key] = (
                f"its GPU candidates sit on NUMA node(s) {shown}: no one clique holds for all"
                " of them; give --clique-map"
            )
    if not numa:
        numa_unknown = any(d.numa_node is None for p in eligible for d in p.devices if d.is_display)
        a.unsettled = (
            "the NUMA nodes of the GPUs are not known" if numa_unknown else
            "no entry's GPU candidates share one NUMA node, and on this host the sources settle"
            " no wider clique"
        ) + ": give --clique-map (then prove it with apply --verify)"
        return
    order = sorted(set(numa.values()))
    a.cliques = {k: order.index(n) for k, n in numa.items()}
    a.numa = numa
    a.basis = (
        f"one clique per NUMA node ({node.cpu_vendor or 'unknown vendor'}"
        f" {node.cpu_model or ''}".rstrip()
        + "): the sources pvefix follows establish P2P across root complexes only on AMD Zen,"
        " so whether these GPUs can P2P on this host must be measured"
    )


def useful(a: Assessment) -> dict[str, int]:
    """The cliques with at least two members (a clique of one enables nothing)."""
    sizes: dict[int, int] = {}
    for c in a.cliques.values():
        sizes[c] = sizes.get(c, 0) + 1
    return {k: c for k, c in a.cliques.items() if sizes[c] >= 2}


def _free_keys(a: Assessment, taken: set[str]) -> list[str]:
    used = {k for k, v in a.values.items() if v is not None} | taken
    return [f"hostpci{i}" for i in range(MAX_HOSTPCI) if f"hostpci{i}" not in used]


def phase(ctx: Context, earlier: list[Change]) -> RuleResult:
    """The P2P phase's changes (called by the planner after the other rules), and where the
    request came from when the command said (`p2p.asked`)."""
    result = _phase(ctx, earlier)
    asked = _asked(ctx)
    if asked is None:
        return result
    return result.model_copy(update={"findings": [asked, *result.findings]})


def _asked(ctx: Context) -> Finding | None:
    """Where `p2p` (and the clique map) came from: flag > desired state > profile."""
    o = ctx.options
    if o.p2p_from is None:
        return None
    evidence = [f"p2p: {'on' if o.p2p else 'off'}, from {o.p2p_from}"]
    if o.p2p and o.clique_map:
        evidence.append("clique map: " + ",".join(f"{k}={v}" for k, v in o.clique_map.items())
                        + f", from {o.clique_map_from or o.p2p_from}")
    elif o.p2p:
        evidence.append("clique map: none given; the cliques come from the host's facts")
    return Finding(
        id="p2p.asked", rule=NAME, severity="info",
        title=("P2P phase asked for by " if o.p2p else "P2P phase not asked for: ") + o.p2p_from,
        detail="Precedence: the command's flag (--p2p, --no-p2p, --clique-map), else the VM's"
               " desired state (`[vms.VMID.p2p]`), else the connection profile (`p2p`,"
               " `clique_map`); each setting from the first that gives it (docs/p2p.md).",
        evidence=evidence)


def _phase(ctx: Context, earlier: list[Change]) -> RuleResult:
    if not ctx.options.p2p:
        return RuleResult(rule=NAME)  # topology's clique finding says how to ask for it
    a = assess(ctx, earlier)
    if len(a.gpus) < 2 and ctx.unknown_entries:
        return RuleResult(rule=NAME, noop=ctx.no_gpu_reason() + ": how many NVIDIA GPUs are"
                          " passed, and so whether a clique can be set, is not established")
    if len(a.gpus) < 2:
        vgpu = (" (vGPU entries, mdev=, have no P2P over PCIe: NVIDIA's vGPU documentation)"
                if ctx.vgpu_entries else "")
        return RuleResult(rule=NAME, noop=f"fewer than two NVIDIA GPUs{vgpu}: no clique to set")
    findings = [_guest_side(ctx, a)]
    if args_hide_kvm(ctx.args_cpu):
        findings.append(_args_cpu_hides_kvm(ctx))
        return RuleResult(rule=NAME, findings=findings + _block_findings(a))
    if a.xvga_kept:
        findings.append(_blocked_display(a))
        return RuleResult(rule=NAME, findings=findings + _block_findings(a))
    cliques = useful(a)
    if not cliques:
        why = a.unsettled or "no two eligible GPUs share a clique"
        findings.append(Finding(id="p2p.no-clique", rule=NAME, severity="warning",
                                title="No P2P clique can be planned", detail=why,
                                evidence=[f"{k}: {v}" for k, v in sorted(a.blocked.items())]))
        return RuleResult(rule=NAME, findings=findings)
    prereq = [c.id for c in earlier if c.rule in _PREREQ_RULES]
    guards = _guards(ctx, a, earlier, cliques)
    before = a.value("args")
    try:
        after = merge_cliques(before, cliques)
    except ArgsIgnored as exc:  # adding to it would make a dead args line live: refused
        findings.append(_args_ignored(before, exc))
        return RuleResult(rule=NAME, findings=findings + _block_findings(a))
    changes = list(guards)
    if after != before:
        needs = prereq + [g.id for g in guards]
        changes.append(_args_change(ctx, a, before, after, cliques, needs))
    findings.append(_cliques_finding(ctx, a, cliques))
    findings.append(_proof_commands(ctx, len(a.gpus)))
    findings += _block_findings(a)
    if not changes:
        return RuleResult(rule=NAME, findings=findings,
                          noop="every clique is already in args and nothing stands in the way")
    return RuleResult(rule=NAME, changes=changes, findings=findings)


def _args_cpu_hides_kvm(ctx: Context) -> Finding:
    """args' -cpu carries kvm=off: QEMU keeps it over Proxmox's -cpu, and pvefix does not edit
    another's -cpu in args, so no clique is planned."""
    return Finding(
        id="p2p.args-cpu-kvm-off", rule=NAME, severity="warning",
        title="No P2P clique: args' -cpu hides KVM (kvm=off)",
        detail="qemu-server appends args after its own options (QemuServer.pm config_to_command)"
        " and QEMU keeps the last -cpu, so the VM runs with kvm=off whatever `cpu` says; the"
        " NVIDIA driver ignores x-nv-gpudirect-clique without the hypervisor visible. Remove"
        " kvm=off from the -cpu in args (or the whole -cpu, leaving the CPU to `cpu`), then plan"
        " --p2p again.",
        evidence=[f"args: {ctx.value('args')}"])


def _requires(earlier: list[Change], key: str) -> list[str]:
    return [c.id for c in earlier if c.target == "vm-config" and c.key == key]


def _guards(ctx: Context, a: Assessment, earlier: list[Change],
            cliques: dict[str, int]) -> list[Change]:
    """What must change beside the clique's `args` for the guest driver to honour it."""
    return [*_hidden_guard(ctx, a, earlier), *_xvga_guards(ctx, a, earlier),
            *_function_splits(ctx, a, earlier, cliques)]


def _hidden_guard(ctx: Context, a: Assessment, earlier: list[Change]) -> list[Change]:
    """`hidden=1` (the VM's or its custom model's) hides KVM: the driver ignores the clique."""
    if a.hidden_cpu is None:
        return []
    ps = PropertyString.parse(a.hidden_cpu, "cputype")
    ps.delete("hidden")
    model = mmio.read_cpu(ps.render(), ctx.cpu_models)
    if model.hidden:  # a custom model's `hidden 1`: the VM's own hidden=0 overrides it
        ps.set("hidden", "0")
    after = ps.render() or None
    source = (f"the custom model {model.model.name}'s `hidden 1` (cpu-models.conf; the VM's"
              " own hidden=0 overrides it, CPUConfig.pm get_cpu_options)"
              if model.hidden and model.model else "hidden=1")
    return [VmConfigChange(
        id="p2p.cpu.hidden", rule=NAME, key="cpu", before=a.hidden_cpu, after=after,
        reason=f"{source} makes Proxmox add kvm=off to -cpu: the guest driver then cannot see"
               " that it runs in a VM and ignores the clique.",
        risk=Risk(level="medium",
                  text="The guest sees the KVM signature again: software that refuses to run"
                       " under a visible hypervisor (old NVIDIA consumer drivers' Code 43,"
                       " some anti-cheat) may stop working.",
                  mitigation="pvefix rollback puts hidden=1 back (the clique then does"
                             " nothing)."),
        evidence=[f"cpu: {a.hidden_cpu}", "qemu-server CPUConfig.pm: hidden=1 -> kvm=off"],
        inverse=f"set cpu back to {a.hidden_cpu}", disruption="vm-restart",
        requires=_requires(earlier, "cpu"))]


def _xvga_guards(ctx: Context, a: Assessment, earlier: list[Change]) -> list[Change]:
    """x-vga=1 on a compute GPU adds kvm=off for the whole VM."""
    out: list[Change] = []
    for p in a.xvga_compute:
        raw = a.value(p.key) or p.entry.raw
        ps = PropertyString.parse(raw, "host")
        ps.delete("x-vga")
        named = p.key in ctx.options.clique_map
        out.append(VmConfigChange(
            id=f"p2p.{p.key}.x-vga", rule=NAME, key=p.key, before=raw, after=ps.render(),
            reason="x-vga=1 makes Proxmox add kvm=off to -cpu for the whole VM, so no GPU can"
                   " join a clique; "
                   + ("the admin named this entry in --clique-map (a compute GPU)." if named else
                      "this GPU is a 3D controller (class 0x0302): it has no display to keep."),
            risk=Risk(level="medium",
                      text="The GPU is no longer the VM's primary VGA device: Proxmox gives the"
                           " VM its emulated display (the `vga` setting, std by default), so the"
                           " boot console moves to noVNC/SPICE.",
                      mitigation="pvefix rollback puts x-vga=1 back."),
            evidence=[f"{p.key}: {raw}"] + [f"{d.address}: class {d.class_}"
                                            for d in p.devices if d.is_display],
            inverse=f"set {p.key} back to {raw}", disruption="vm-restart",
            requires=_requires(earlier, p.key), needs_root_pam=p.entry.is_raw))
    return out


def _function_splits(ctx: Context, a: Assessment, earlier: list[Change],
                     cliques: dict[str, int]) -> list[Change]:
    """A GPU passed with all its functions cannot be addressed by `-set device.hostpciN`."""
    out: list[Change] = []
    taken: set[str] = set()
    for key, others in sorted(a.split.items()):
        if key not in cliques:
            continue
        raw = a.value(key) or ""
        entry = HostPci.parse(raw, key)
        ps = PropertyString.parse(raw, "host")
        ps.set("host", f"{entry.hosts[0]}.0")
        free = [k for k in _free_keys(a, taken)][: len(others)]
        if len(free) < len(others):
            continue  # reported by _block_findings through the split list
        main = VmConfigChange(
            id=f"p2p.{key}.function0", rule=NAME, key=key, before=raw, after=ps.render(),
            reason=f"{key} passes every function of {entry.hosts[0]}: QEMU then ids them {key}.0,"
                   f" {key}.1, ... and `-set device.{key}` cannot address the GPU.",
            risk=Risk(level="low",
                      text="The GPU's other functions move to their own entries (no clique); the"
                           " guest sees them at another slot, not as functions of the GPU.",
                      mitigation="pvefix rollback restores the single entry."),
            evidence=[f"{key}: {raw}", "functions: " + ", ".join([f"{entry.hosts[0]}.0", *others])],
            inverse=f"set {key} back to {raw}" + (
                f" and delete {', '.join(free)}" if free else ""),
            disruption="vm-restart", requires=_requires(earlier, key), needs_root_pam=True)
        out.append(main)
        for fn, new_key in zip(others, free, strict=True):
            taken.add(new_key)
            value = fn[5:] if entry.hosts[0].count(":") == 1 else fn
            if entry.pcie:
                value += ",pcie=1"
            out.append(VmConfigChange(
                id=f"p2p.{new_key}.function{fn[-1]}", rule=NAME,
                key=new_key, before=None, after=value,
                reason=f"function {fn} was passed with {key}; it stays passed, as its own entry"
                       " without a clique.",
                risk=Risk(level="low", text="A new hostpci entry for a function already passed."),
                evidence=[f"{fn}: " + ", ".join(d.class_ for d in ctx.state.pci_devices
                                                 if d.address == fn)],
                inverse=f"delete {new_key}", disruption="vm-restart",
                requires=[main.id], needs_root_pam=True))
    return out


def _args_ignored(before: str | None, exc: ArgsIgnored) -> Finding:
    return Finding(
        id="p2p.args-ignored", rule=NAME, severity="error",
        title="args is ignored by qemu-server: no clique planned",
        detail=f"{exc.message}. qemu-server (PVE::Tools::split_args) then passes none of its"
               " words to QEMU; adding the cliques to it would make the whole line live."
               " Fix or delete args (`qm set VMID --delete args`), then plan again.",
        evidence=[f"args: {before}"])


def _args_change(ctx: Context, a: Assessment, before: str | None, after: str | None,
                 cliques: dict[str, int], requires: list[str]) -> Change:
    added = {k: v for k, v in cliques.items() if clique_map(before).get(k) != v}
    return VmConfigChange(
        id="p2p.args", rule=NAME, key="args", before=before, after=after,
        reason="The clique capability tells the guest NVIDIA driver which passed GPUs may use"
               " P2P; Proxmox sets it only through args (-set device.hostpciN.x-nv-gpudirect-"
               "clique=C). Cliques: " + a.basis + ".",
        risk=Risk(
            level="high",
            text="The clique ASSERTS a capability: where the GPUs cannot really P2P, NCCL can hang"
                 " instead of falling back, and a grant can read OK while writes land elsewhere."
                 " args is root@pam only (a password ticket, or qm set as root over SSH).",
            mitigation=f"pvefix apply {ctx.state.vm.vmid} --phase 3 --verify moves data between"
                       " every pair and runs"
                       " NCCL all-reduce under a timeout; with --auto-rollback a hang, wrong data"
                       " or a slowdown reverts this phase alone."),
        evidence=[f"{k}: clique {v}" for k, v in sorted(added.items())]
        + [f"args before: {before}" if before else "no args before"],
        inverse=("delete args" if before is None else f"set args back to: {before}")
        + " (removes exactly the -set words pvefix added)",
        disruption="vm-restart", requires=requires, needs_root_pam=True,
        effect="After a cold start the guest driver reports P2P OK between GPUs of one clique;"
               " it does not make NCCL or vLLM use it (see the guest-side finding).")


def _cliques_finding(ctx: Context, a: Assessment, cliques: dict[str, int]) -> Finding:
    groups: dict[int, list[str]] = {}
    for k, c in sorted(cliques.items()):
        groups.setdefault(c, []).append(k)
    mapped = [p for p in a.gpus if p.entry.mapping and p.key in cliques]
    detail = a.basis + "."
    if mapped:
        detail += (
            " Mapped entries get their device at start from the mapping's pool; a clique per"
            " entry holds because every candidate of the pool shares it."
        )
    return Finding(
        id="p2p.cliques", rule=NAME, severity="warning" if a.must_measure else "info",
        title="P2P cliques: " + "; ".join(f"{c}: {', '.join(ks)}" for c, ks in groups.items()),
        detail=detail, evidence=[f"{k}: clique {c}" + (
            f" (NUMA node {a.numa[k]})" if k in a.numa else "")
            for k, c in sorted(cliques.items())])


def _proof_commands(ctx: Context, gpus: int) -> Finding:
    """The proofs as exact commands, for a guest pvefix cannot reach."""
    vmid, node = ctx.state.vm.vmid, ctx.state.vm.node
    return Finding(
        id="p2p.proof-commands", rule=NAME, severity="info",
        title="How the P2P phase is proven (the commands, to run by hand without guest access)",
        detail="pvefix runs these itself with `apply --phase 3 --p2p --restart --verify`; a hang,"
               " wrong data or a slowdown fails the phase, and --auto-rollback reverts it alone.",
        evidence=[
            f"on node {node}: tr '\\0' ' ' < /proc/$(cat /var/run/qemu-server/{vmid}.pid)/cmdline"
            "  # every -set device.hostpciN.x-nv-gpudirect-clique=C, no kvm=off in -cpu",
            "in the guest: nvidia-smi topo -p2p w  # OK between GPUs of one clique, not NS",
            "in the guest: timeout 900 python3 -m pvefix.probe --format json --out after.json"
            "  # data delivered, latency, bandwidth, all-reduce with and without P2P",
            f"in the guest: NCCL_P2P_LEVEL=SYS timeout 600 all_reduce_perf -b 8 -e 1G -g {gpus}"
            "  # nccl-tests; a hang here is the failure the clique can cause"])


def _blocked_display(a: Assessment) -> Finding:
    nvidia = {p.key for p in a.gpus}
    named = [k for k in a.xvga_kept if k in nvidia]
    other = [k for k in a.xvga_kept if k not in nvidia]
    lifts = " remove x-vga=1 from it" + (
        f", or name {', '.join(named)} in --clique-map to declare it a compute GPU" if named
        else "") + "." + (
        f" {', '.join(other)} is no NVIDIA GPU: it can take no clique (QEMU gives"
        " x-nv-gpudirect-clique to NVIDIA devices only), so --clique-map refuses it." if other
        else "")
    return Finding(
        id="p2p.kvm-hidden", rule=NAME, severity="warning",
        title="No GPU can join a clique while x-vga=1 stays on a display GPU",
        detail=(
            f"x-vga=1 on {', '.join(a.xvga_kept)} makes Proxmox add kvm=off to -cpu for the whole"
            " VM (qemu-server CPUConfig.pm), which hides the hypervisor from the driver. pvefix"
            " keeps x-vga=1 on a VGA-class GPU (a display the user may keep). What lifts it:"
            + lifts
        ),
        evidence=a.kvm_hidden_by)


def _block_findings(a: Assessment) -> list[Finding]:
    if not a.blocked:
        return []
    return [Finding(
        id="p2p.not-eligible", rule=NAME, severity="warning",
        title=f"{len(a.blocked)} GPU entr{'y' if len(a.blocked) == 1 else 'ies'} cannot join a"
              " clique",
        detail="; ".join(f"{k}: {v}" for k, v in sorted(a.blocked.items())),
        evidence=sorted(a.blocked))]


def _guest_side(ctx: Context, a: Assessment) -> Finding:
    n = len(a.gpus)
    vllm = (f" vLLM disables its custom all-reduce on more than 2 PCIe GPUs ({n} here), so it"
            " uses NCCL." if n > 2 else "")
    return Finding(
        id="p2p.guest-side", rule=NAME, severity="info",
        title="In the guest, NCCL_P2P_LEVEL decides whether NCCL uses P2P",
        detail="Even with P2P enabled, NCCL keeps host memory across CPU host bridges unless"
               " NCCL_P2P_LEVEL allows it (e.g. NCCL_P2P_LEVEL=SYS)." + vllm
               + " pvefix probe reports the environment it sees (NCCL's documentation:"
               " Environment Variables, NCCL_P2P_LEVEL).")


def rule(ctx: Context) -> RuleResult:
    """Placeholder in the rule list: the planner calls `phase` with the earlier changes."""
    return RuleResult(rule=NAME)
