"""iommu=pt on the host kernel cmdline, in the place its boot loader really reads.

Where: `proxmox-boot-tool status` decides. Exit 0 with uefi/systemd-boot ESPs: the first line of
/etc/kernel/cmdline, then `proxmox-boot-tool refresh`. Exit 0 with grub ESPs: /etc/default/grub
(/etc/kernel/cmdline is then ignored), then `proxmox-boot-tool refresh`. Exit 2 (not managed):
plain GRUB, /etc/default/grub, then `update-grub`. Each needs a host reboot.

What it does, honestly: `iommu=pt` gives host-owned devices an identity (pass-through) DMA
domain. GPUs assigned to a VM through VFIO always get their own translated domain, so it does
not change guest P2P or DMA latency. It is harmless, often recommended (the Proxmox docs say it
"might increase performance") and lowers IOMMU overhead for the host's own devices.

Also: `amd_iommu=on` is not a valid value (the kernel logs `AMD-Vi: Unknown option - 'on'`; the
AMD IOMMU is on by default), so its removal is planned; `intel_iommu=on` is a no-op on Proxmox
kernels >= 6.8 and is reported, not touched. The configured and the running (/proc/cmdline)
command lines are both reported.
"""

from __future__ import annotations

from pvefix.cmdline import GrubDefaultFile, KernelCmdlineFile, ProcCmdline
from pvefix.cmdline.files import GRUB_LINUX, GRUB_LINUX_DEFAULT
from pvefix.cmdline.grubd import GrubConfig, duplicates, is_dropin, same_as_running
from pvefix.errors import PvefixError
from pvefix.paths import GRUB_DEFAULT, KERNEL_CMDLINE, PROC_CMDLINE
from pvefix.planner.context import Context
from pvefix.planner.model import Change, Finding, HostCmdlineChange, ManualChange, Risk, RuleResult

NAME = "host-iommu"

_WHERE = {
    "systemd-boot": (KERNEL_CMDLINE, ["proxmox-boot-tool", "refresh"]),
    "grub-esp": (GRUB_DEFAULT, ["proxmox-boot-tool", "refresh"]),
    "grub": (GRUB_DEFAULT, ["update-grub"]),
}


def _vendor(ctx: Context) -> str | None:
    v = (ctx.state.node.cpu_vendor or "").lower()
    return "amd" if "amd" in v else "intel" if "intel" in v else None


def rule(ctx: Context) -> RuleResult:
    state = ctx.state
    loader = state.boot_tool.loader
    findings: list[Finding] = []
    if loader == "unknown":
        return RuleResult(
            rule=NAME,
            noop="cannot tell which boot loader the host uses",
            findings=[
                Finding(
                    id="host.bootloader-unknown",
                    rule=NAME,
                    severity="warning",
                    title="Boot loader unknown",
                    detail=(
                        "`proxmox-boot-tool status` could not be read or gave an unexpected"
                        " answer, so pvefix does not know whether /etc/kernel/cmdline or"
                        " /etc/default/grub is the host's cmdline. No host change is planned."
                    ),
                    evidence=[f"exit code {state.boot_tool.exit_code}", state.boot_tool.output],
                )
            ],
        )
    path, refresh = _WHERE[loader]
    fact = state.file(path)
    running = state.file(PROC_CMDLINE)
    running_line = ProcCmdline.parse(running.text).config_cmdline if running.text else None
    if fact.text is None:
        if state.access.method == "api" and not state.access.ssh:
            return RuleResult(
                rule=NAME, noop="no SSH access: the host cmdline cannot be read (no API for it)"
            )
        base = running_line.render() if running_line is not None else "root=..."
        return RuleResult(
            rule=NAME,
            changes=[
                ManualChange(
                    id="host.cmdline.create",
                    rule=NAME,
                    key="iommu",
                    before=None,
                    after=f"{base} iommu=pt".strip(),
                    reason=f"{path} is missing but the boot loader ({loader}) reads it.",
                    risk=Risk(
                        level="high",
                        text="A wrong root= makes the host unbootable; pvefix will not guess it.",
                    ),
                    evidence=[f"{path}: absent", f"boot loader: {loader}"],
                    inverse=f"rm {path} && {' '.join(refresh)}",
                    disruption="host-reboot",
                    file=path,
                    refresh_command=refresh,
                    commands=[
                        f"echo '{base} iommu=pt' > {path}   # check root= first",
                        " ".join(refresh),
                        "reboot",
                    ],
                )
            ],
        )
    grub: GrubConfig | None = None
    try:
        if path == KERNEL_CMDLINE:
            editor: KernelCmdlineFile | GrubDefaultFile = KernelCmdlineFile.parse(fact.text, path)
            configured = editor.cmdline
            where = [f"{path}:1"]
        else:
            grub = GrubConfig(
                {p: f.text for p, f in state.files.items()
                 if f.text is not None and (p == GRUB_DEFAULT or is_dropin(p))}
            )
            path, _base = grub.base_assignment()
            editor = grub.files[path]
            configured = grub.cmdline
            where = [str(src) for var in (GRUB_LINUX, GRUB_LINUX_DEFAULT)
                     for src in grub.sources[var]]
    except PvefixError as exc:
        return RuleResult(rule=NAME, noop=f"{path} cannot be read safely: {exc}")
    if grub is not None and grub.unknown:
        return RuleResult(
            rule=NAME,
            noop="the GRUB command line cannot be evaluated (see findings)",
            findings=[
                Finding(
                    id="host.cmdline.grub-not-evaluable",
                    rule=NAME,
                    severity="warning",
                    title="GRUB command line not evaluable",
                    detail=(
                        "update-grub would expand values pvefix does not evaluate, so the"
                        " effective command line is unknown; pvefix plans no host edit. Check"
                        " `grep -m1 linux /boot/grub/grub.cfg` after update-grub instead."
                    ),
                    evidence=grub.unknown,
                )
            ],
        )
    if grub is not None and grub.dropins:
        findings.append(
            Finding(
                id="host.cmdline.grub-dropins",
                rule=NAME,
                severity="info",
                title="GRUB drop-ins read",
                detail=(
                    "update-grub sources /etc/default/grub.d/*.cfg after /etc/default/grub;"
                    f" the effective line is built from: {', '.join(where) or 'no assignment'}."
                    f" An edit goes to {path}, where GRUB_CMDLINE_LINUX_DEFAULT is set last"
                    " without building on the earlier value."
                ),
                evidence=[f"{p}" for p in grub.dropins],
            )
        )
    dups = duplicates(configured)
    if dups:
        findings.append(
            Finding(
                id="host.cmdline.duplicate-tokens",
                rule=NAME,
                severity="info",
                title="Host cmdline repeats parameters",
                detail=(
                    f"{', '.join(dups)} appear more than once; the kernel applies each"
                    " occurrence in turn, so the repeats are noise. pvefix removes them when it"
                    " edits the line anyway."
                ),
                evidence=where,
            )
        )
    vendor = _vendor(ctx)
    for f in editor.findings(kernel_version=state.node.kernel_version, cpu_vendor=vendor):  # type: ignore[arg-type]
        if f.code.startswith("amd-iommu") or f.severity == "error" or "intel" in f.code:
            findings.append(
                Finding(
                    id=f"host.cmdline.{f.code}",
                    rule=NAME,
                    severity=f.severity,
                    title=f"Host cmdline: {f.code}",
                    detail=f.message,
                    evidence=[f"{f.source or path}:{f.line or 1}: {f.token or ''}".rstrip(": ")],
                )
            )
    changes: list[Change] = []
    line_before = " ".join(t.raw for t in configured.tokens)
    common = {
        "rule": NAME,
        "disruption": "host-reboot",
        "file": path,
        "refresh_command": refresh,
    }
    in_other_files = (
        [str(x) for x in grub.where("amd_iommu", "on") if x.path != path] if grub else []
    )
    if vendor == "amd" and configured.has("amd_iommu", "on") and not in_other_files:
        try:
            editor.remove("amd_iommu", "on")
        except PvefixError as exc:
            return RuleResult(rule=NAME, noop=str(exc), findings=findings)
        line_after = _effective_after(grub, path, editor)
        changes.append(
            HostCmdlineChange(
                id="host.cmdline.amd_iommu",
                key="amd_iommu",
                before=line_before,
                after=line_after,
                reason=(
                    'amd_iommu=on is not a valid value (the kernel logs "AMD-Vi: Unknown option'
                    " - 'on'\"); the AMD IOMMU is on by default. Removing it removes noise."
                ),
                risk=Risk(level="low", text="None: the kernel ignores the value today."),
                evidence=[f"{path}: {line_before}"],
                inverse=f"add amd_iommu=on back to {path} and run {' '.join(refresh)}",
                effect="No functional change; the boot log loses its 'Unknown option' line.",
                **common,
            )
        )
        line_before = line_after
    if configured.has("iommu", "pt"):
        holders = [str(x) for x in grub.where("iommu", "pt")] if grub else [f"{path}:1"]
        pt_noop = f"iommu=pt is already configured ({', '.join(holders) or path})"
    else:
        pt_noop = None
        try:
            if dups:
                editor.dedupe()
            editor.ensure("iommu", "pt")
        except PvefixError as exc:
            return RuleResult(rule=NAME, noop=str(exc), findings=findings)
        line_after = _effective_after(grub, path, editor)
        changes.append(
            HostCmdlineChange(
                id="host.cmdline.iommu_pt",
                key="iommu",
                before=line_before,
                after=line_after,
                reason=(
                    "iommu=pt puts host-owned devices in an identity DMA domain, lowering IOMMU"
                    " overhead for the host's own I/O; commonly recommended for passthrough"
                    " hosts."
                ),
                risk=Risk(
                    level="low",
                    text=(
                        "Needs a host reboot (every VM on the node stops). The boot loader must"
                        " be refreshed or the edit has no effect."
                    ),
                ),
                evidence=[
                    f"boot loader: {loader} (proxmox-boot-tool exit {state.boot_tool.exit_code})",
                    f"configured ({', '.join(where) or path}): {line_before}",
                    *([f"duplicates removed: {', '.join(dups)}"] if dups else []),
                ],
                inverse=f"remove iommu=pt from {path} and run {' '.join(refresh)}, then reboot",
                effect=(
                    "Does NOT change GPU peer-to-peer or DMA latency inside the VM: VFIO-assigned"
                    " GPUs always get their own translated IOMMU domain. Expect no tok/s change"
                    " from this alone."
                ),
                **common,
            )
        )
    if running_line is not None:
        configured_now = " ".join(t.raw for t in configured.tokens)
        running_now = " ".join(t.raw for t in running_line.tokens)
        same = (
            same_as_running(configured, running_line)
            if grub is not None
            else running_now == configured_now
        )
        if not same:
            findings.append(
                Finding(
                    id="host.cmdline.not-booted",
                    rule=NAME,
                    severity="info",
                    title="Configured and running host cmdline differ",
                    detail=(
                        f"{path} is not what the running kernel was booted with: a host reboot"
                        " (after a boot loader refresh) is already pending."
                    ),
                    evidence=[f"configured: {configured_now}", f"running: {running_now}"],
                )
            )
    if not changes:
        return RuleResult(rule=NAME, noop=pt_noop or "nothing to change", findings=findings)
    return RuleResult(
        rule=NAME, changes=changes, findings=findings, files_after={path: editor.render()}
    )


def _effective_after(
    grub: GrubConfig | None, path: str, editor: KernelCmdlineFile | GrubDefaultFile
) -> str:
    """The whole effective command line once `editor`'s file is written."""
    if grub is None:
        return " ".join(t.raw for t in editor.cmdline.tokens)
    texts = {p: f.render() for p, f in grub.files.items()}
    texts[path] = editor.render()
    # The editor already read its edited text back (it refuses what would not read back as
    # intended), so the files are reused rather than parsed again.
    return " ".join(t.raw for t in GrubConfig(texts, parsed=grub.files).cmdline.tokens)
