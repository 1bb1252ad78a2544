"""iommu=pt on the host kernel cmdline, where its boot loader really reads it; the IOMMU kept on.

Where: `proxmox-boot-tool status` decides. Exit 0 with uefi/systemd-boot ESPs: the first line of
/etc/kernel/cmdline, then `proxmox-boot-tool refresh`. Exit 0 with grub ESPs: /etc/default/grub
(GRUB does not use /etc/kernel/cmdline), then `proxmox-boot-tool refresh`. Exit 2 (not
managed): plain GRUB, /etc/default/grub, then `update-grub`. Each needs a host reboot.

What it does, honestly: `iommu=pt` gives host-owned devices an identity (pass-through) DMA
domain. GPUs assigned to a VM through VFIO always get their own translated domain, so it does
not change guest P2P or DMA latency. It is harmless, often recommended (the Proxmox docs say it
"might increase performance") and lowers IOMMU overhead for the host's own devices.
`iommu.passthrough=1` does exactly what `iommu=pt` does (both set the default domain type:
drivers/iommu/iommu.c iommu_set_def_domain_type, arch/x86/kernel/pci-dma.c iommu_setup; the last
of `iommu=pt`, `iommu=nopt` and `iommu.passthrough=` on the line wins), so with it configured
iommu=pt is a no-op and no host reboot is planned for it.

The IOMMU must stay on: without it Proxmox refuses every passthrough start with "cannot prepare
PCI pass-through, IOMMU not present" (qemu-server PCI.pm prepare_pci_device, when
/sys/class/iommu is empty; a mapped entry fails before that, in Mapping::PCI's check of the map
line's IOMMU group: both texts checked against Proxmox's own daemons, ../shared/pve-api). pvefix
never plans a reboot that leaves it off without saying so:
- `amd_iommu=off` (any `off...` option in the comma list) disables the AMD IOMMU
  (drivers/iommu/amd/init.c parse_amd_iommu_options; the valid options are in DOMAIN.md
  section 6), and `intel_iommu=off` the Intel one when it is the last on/off given
  (drivers/iommu/intel/iommu.c intel_iommu_setup). In the configured cmdline their removal is
  planned before iommu=pt, saying why; where pvefix cannot remove it (a combined value like
  `amd_iommu=off,fullflush`, or a GRUB drop-in it does not edit) no host edit is planned and an
  error finding says what to remove by hand.
- The generic `iommu=off` (arch/x86/kernel/pci-dma.c iommu_setup sets no_iommu; no later
  token clears it, `iommu=pt` included, and neither driver then looks for an IOMMU) is removed
  the same way, before iommu=pt: appended after it, iommu=pt would change nothing.
- Intel without `intel_iommu=on`/`off` on the line: the kernel's build default decides
  (CONFIG_INTEL_IOMMU_DEFAULT_ON, read from the host's /boot/config-$(uname -r); Proxmox
  kernels before 6.8 leave it off, pve-docs qm-pci-passthrough.adoc), so where it is off
  `intel_iommu=on` is planned together with iommu=pt, and where the file was not read the
  verdict is not established and nothing is planned. On 6.8 and later `intel_iommu=on` is a
  no-op and is reported, not touched.
- Any other token the closed world does not model and that touches this verdict: not
  established, nothing planned (the section on the host cmdline's closed world, below).
- The running kernel (/proc/cmdline) booted with the IOMMU off: a warning, passthrough is
  refused until the host reboots with it (the iommu-groups rule sees the groups absent too).

Also: `amd_iommu=on` is not a valid value (the kernel logs `AMD-Vi: Unknown option - 'on'`; the
AMD IOMMU is on by default), so its removal is planned. The configured and the running
(/proc/cmdline) command lines are both reported.

GRUB on the ESPs: on every `proxmox-boot-tool refresh` (and every kernel update, which runs the
same hook) update_esps reads /etc/kernel/cmdline when it exists, for GRUB ESPs too, and stops
with "No root= parameter in /etc/kernel/cmdline found!" (exit 1) when its first line lacks
`root=` (proxmox-kernel-helper src/proxmox-boot/zz-proxmox-boot, commit 86c7015). pvefix reads
that file on such hosts on every path (SSH, --local, bundle, the collect script, the
simulator); when it would abort, an error finding says so and how to fix it (move the unused
file aside, or give it the host's root=) and no host edit is planned. A bundle without the
file is taken at its word, and each host change says to check the host's file first.

Configured, not yet booted: when the configured line needs no edit but the running kernel was
booted without its passthrough-relevant parameters (an apply without `--reboot-host`, an edit
by hand), the rule plans a `host-boot` change instead of nothing: phase 2 then writes nothing
and `pvefix apply --phase 2 --reboot-host` activates it, checking /proc/cmdline after the boot
(pvefix/planner/activation.py). Not when the refresh would abort (above): then the boot loader
may not hold the configured line.
"""

from __future__ import annotations

from typing import Any

from pvefix.closedworld import not_established
from pvefix.closedworld.kernel_params import classify
from pvefix.cmdline import GrubDefaultFile, KernelCmdlineFile, ProcCmdline
from pvefix.cmdline.files import (
    GRUB_LINUX,
    GRUB_LINUX_DEFAULT,
    KERNEL_CMDLINE_NO_ROOT,
    esp_refresh_aborts,
)
from pvefix.cmdline.grubd import GrubConfig, duplicates, is_dropin, same_as_running
from pvefix.cmdline.iommu import (
    IOMMU_NOT_PRESENT,
    IOMMU_NOT_PRESENT_SOURCE,
    MAPPING_WITHOUT_GROUP,
    intel_default_on,
    intel_needs_on,
    intel_setting,
    iommu_enabled,
    off_tokens,
    passthrough_token,
)
from pvefix.cmdline.lint import CpuVendor
from pvefix.cmdline.tokens import Cmdline, Token, normalize_name
from pvefix.errors import PvefixError
from pvefix.facts.node import UNSAFE_INTERRUPTS
from pvefix.paths import GRUB_DEFAULT, KERNEL_CMDLINE, PROC_CMDLINE
from pvefix.planner import host_world
from pvefix.planner.activation import activation_change
from pvefix.planner.context import Context
from pvefix.planner.model import Change, Finding, HostCmdlineChange, ManualChange, Risk, RuleResult
from pvefix.state import HostState

NAME = "host-iommu"

_WHERE = {
    "systemd-boot": (KERNEL_CMDLINE, ["proxmox-boot-tool", "refresh"]),
    "grub-esp": (GRUB_DEFAULT, ["proxmox-boot-tool", "refresh"]),
    "grub": (GRUB_DEFAULT, ["update-grub"]),
}


def _vendor(ctx: Context) -> CpuVendor | None:
    v = (ctx.state.node.cpu_vendor or "").lower()
    return "amd" if "amd" in v else "intel" if "intel" in v else None


def _unsafe_interrupts(state: HostState, found: list[Finding]) -> list[Finding]:
    """vfio_iommu_type1's allow_unsafe_interrupts as it runs (a modprobe.d option sets it as
    much as the cmdline's token): Y is the same unmodelled input as the token, said once."""
    value = state.node.unsafe_interrupts
    if (value or "").strip().upper() not in ("Y", "1"):
        return []
    path = UNSAFE_INTERRUPTS.tree
    seen = {f.id for f in found}
    token = Cmdline.parse("vfio_iommu_type1.allow_unsafe_interrupts=1").tokens[0]
    out: list[Finding] = []
    for item in classify(token):
        for claim in item.claims:
            finding = not_established(
                NAME, item, claim,
                f"{path} is {value} on the host (set by a modprobe.d option or the cmdline)"
                f" and pvefix does not model what it does to this claim, so it makes no"
                f" verdict that rests on it.", [f"{path}: {value}"])
            if finding.id not in seen:
                seen.add(finding.id)
                out.append(finding)
    return out


def rule(ctx: Context) -> RuleResult:
    state = ctx.state
    loader = state.boot_tool.loader
    findings: list[Finding] = []
    if loader == "unknown":
        return _loader_unknown(state)
    path, refresh = _WHERE[loader]
    fact = state.file(path)
    running = state.file(PROC_CMDLINE)
    running_line = ProcCmdline.parse(running.text).config_cmdline if running.text else None
    if fact.text is None:
        return _file_missing(ctx, path, refresh, loader, running_line)
    try:
        path, editor, configured, where, grub = _configured(state, path, fact.text)
    except PvefixError as exc:
        return RuleResult(rule=NAME, noop=f"{path} cannot be read safely: {exc}")
    if grub is not None and grub.unknown:
        return _grub_not_evaluable(grub)
    vendor = _vendor(ctx)
    findings += _line_findings(state, grub, path, where, configured, editor, vendor)
    not_known, blocking = host_world.unmodelled(NAME, configured, ", ".join(where) or path)
    findings += not_known
    findings += _unsafe_interrupts(state, findings)
    if blocking:
        return RuleResult(rule=NAME, findings=findings, noop=(
            f"not established: {' '.join(blocking)} on the host cmdline; pvefix does not model"
            " what it does to the IOMMU, so no host edit is planned (see findings)"))
    try:
        changes, pt_noop = _edits(state, grub, (path, refresh), editor, configured, vendor,
                                  where, findings)
    except _Refused as refused:
        return RuleResult(rule=NAME, noop=refused.noop, findings=[*findings, *refused.findings])
    findings += _not_booted(path, configured, running_line, grub is not None)
    findings += _running_iommu_off(running_line, vendor, state.node.kernel_version,
                                   state.node.kernel_config)
    return _result(state, path, refresh, editor, configured, running_line, changes, findings,
                   pt_noop)


def _edits(state: HostState, grub: GrubConfig | None, file: tuple[str, list[str]],
           editor: KernelCmdlineFile | GrubDefaultFile, configured: Cmdline,
           vendor: CpuVendor | None, where: list[str],
           findings: list[Finding]) -> tuple[list[Change], str | None]:
    """The host edits, in order: amd_iommu=on removed, the IOMMU left on, iommu=pt added (the
    repeated parameters removed with it), and why iommu=pt is not added (None: it is).
    `findings` gains the one that says a configured iommu=pt is turned back. Raises _Refused
    where pvefix will not plan them."""
    path, refresh = file
    changes: list[Change] = []
    line_before = " ".join(t.raw for t in configured.tokens)
    common = {"rule": NAME, "disruption": "host-reboot", "file": path, "refresh_command": refresh}
    in_other_files = (
        [str(x) for x in grub.where("amd_iommu", "on") if x.path != path] if grub else [])
    if vendor == "amd" and configured.has("amd_iommu", "on") and not in_other_files:
        try:
            editor.remove("amd_iommu", "on")
        except PvefixError as exc:
            raise _Refused(str(exc)) from None
        line_after = _effective_after(grub, path, editor)
        changes.append(_amd_iommu_on_change(path, refresh, line_before, line_after, common))
        line_before = line_after
    iommu_on = _enable_iommu(state, grub, file, editor, configured, vendor, line_before)
    changes += iommu_on
    if iommu_on:
        line_before = iommu_on[-1].after or line_before
    pt_noop = _pt_already(grub, path, where, configured)
    if configured.has("iommu", "pt") and passthrough_token(configured) is None:
        findings.append(_pt_overridden(configured, where or [path]))
    if pt_noop is None:
        dups = duplicates(configured)
        try:
            if dups:
                editor.dedupe()
            editor.ensure("iommu", "pt")
        except PvefixError as exc:
            raise _Refused(str(exc)) from None
        line_after = _effective_after(grub, path, editor)
        changes.append(_iommu_pt_change(state, path, refresh, line_before, line_after, where,
                                        dups, common))
    return changes, pt_noop


def _line_findings(state: HostState, grub: GrubConfig | None, path: str, where: list[str],
                   configured: Cmdline, editor: KernelCmdlineFile | GrubDefaultFile,
                   vendor: CpuVendor | None) -> list[Finding]:
    """What the configured line says beside the planned edits: GRUB drop-ins read, repeated
    parameters, and the cmdline linter's IOMMU findings."""
    findings: list[Finding] = []
    if grub is not None and grub.dropins:
        findings.append(Finding(
            id="host.cmdline.grub-dropins", rule=NAME, severity="info", title="GRUB drop-ins read",
            detail="update-grub sources /etc/default/grub.d/*.cfg after /etc/default/grub;"
            f" the effective line is built from: {', '.join(where) or 'no assignment'}."
            f" An edit goes to {path}, where GRUB_CMDLINE_LINUX_DEFAULT is set last"
            " without building on the earlier value.",
            evidence=[f"{p}" for p in grub.dropins]))
    dups = duplicates(configured)
    if dups:
        findings.append(Finding(
            id="host.cmdline.duplicate-tokens", rule=NAME, severity="info",
            title="Host cmdline repeats parameters",
            detail=f"{', '.join(dups)} appear more than once; the kernel applies each"
            " occurrence in turn, so the repeats are noise. pvefix removes them when it"
            " edits the line anyway.",
            evidence=where))
    default_on = intel_default_on(state.node.kernel_config)
    # the linter judges the Intel default by Proxmox's kernel versions; where the booted
    # kernel's build config was read, that decides instead (a custom or Debian build)
    contradicted = {True: "intel-iommu-missing", False: "intel-iommu-on-noop"}.get(
        default_on) if default_on is not None else None
    for f in editor.findings(kernel_version=state.node.kernel_version, cpu_vendor=vendor):
        if f.code == contradicted:
            continue
        if f.code.startswith("amd-iommu") or f.severity == "error" or "intel" in f.code:
            findings.append(Finding(
                id=f"host.cmdline.{f.code}", rule=NAME, severity=f.severity,
                title=f"Host cmdline: {f.code}", detail=f.message,
                evidence=[f"{f.source or path}:{f.line or 1}: {f.token or ''}".rstrip(": ")]))
    return findings


def _amd_iommu_on_change(path: str, refresh: list[str], line_before: str, line_after: str,
                         common: dict[str, Any]) -> HostCmdlineChange:
    """amd_iommu=on is no valid value: the change that removes the noise."""
    return HostCmdlineChange(
        id="host.cmdline.amd_iommu", key="amd_iommu", before=line_before, after=line_after,
        reason='amd_iommu=on is not a valid value (the kernel logs "AMD-Vi: Unknown option'
        " - 'on'\"); the AMD IOMMU is on by default. Removing it removes noise.",
        risk=Risk(level="low", text="None: the kernel ignores the value today."),
        evidence=[f"{path}: {line_before}"],
        inverse=f"add amd_iommu=on back to {path} and run {' '.join(refresh)}",
        effect="No functional change; the boot log loses its 'Unknown option' line.",
        **common)


def _result(state: HostState, path: str, refresh: list[str],
            editor: KernelCmdlineFile | GrubDefaultFile, configured: Cmdline,
            running_line: Cmdline | None, changes: list[Change], findings: list[Finding],
            pt_noop: str | None) -> RuleResult:
    """The rule's answer: the edits (unless the ESP refresh would abort), else an activation
    of what is configured and not booted, else why nothing is planned."""
    loader = state.boot_tool.loader
    blocker = _esp_refresh_blocker(state) if loader == "grub-esp" else None
    if isinstance(blocker, Finding):
        findings.append(blocker)
    if not changes and not isinstance(blocker, Finding):
        boot = activation_change(NAME, path, refresh, configured, running_line)
        if boot is not None:
            return RuleResult(rule=NAME, changes=[boot], findings=findings)
    if not changes:
        return RuleResult(rule=NAME, noop=pt_noop or "nothing to change", findings=findings)
    if isinstance(blocker, Finding):
        return RuleResult(
            rule=NAME,
            noop="proxmox-boot-tool refresh would abort on this host: no host edit is planned"
            " (see findings)",
            findings=findings)
    if blocker is not None:
        changes = [c.model_copy(update={"evidence": [*c.evidence, blocker]}) for c in changes]
    return RuleResult(
        rule=NAME, changes=changes, findings=findings, files_after={path: editor.render()})


def _pt_already(grub: GrubConfig | None, path: str, where: list[str],
                configured: Cmdline) -> str | None:
    """Why iommu=pt is not added (already configured, or an equivalent, or configured and
    turned back by a later parameter: a finding says which), or None: add it."""
    pt_token = passthrough_token(configured)
    if pt_token is not None and normalize_name(pt_token.name) == "iommu":
        holders = [str(x) for x in grub.where("iommu", pt_token.value)] if grub else [f"{path}:1"]
        return f"iommu=pt is already configured ({', '.join(holders) or path})"
    if pt_token is not None:
        return (
            f"{pt_token.raw} is already configured ({', '.join(where) or path}): it does what"
            " iommu=pt does (both set the default DMA domain to identity: drivers/iommu/iommu.c"
            " iommu_set_def_domain_type, arch/x86/kernel/pci-dma.c iommu_setup), so adding"
            " iommu=pt would change nothing and no host reboot is planned for it"
        )
    if configured.has("iommu", "pt"):
        return "iommu=pt is configured but a later parameter turns it back (see findings)"
    return None


def _configured(state: HostState, path: str, text: str) -> tuple[
        str, KernelCmdlineFile | GrubDefaultFile, Cmdline, list[str], GrubConfig | None]:
    """The configured line and its editor: /etc/kernel/cmdline, or GRUB's main file with its
    drop-ins (the file an edit goes to, where each value comes from). Raises on a file pvefix
    cannot read safely."""
    if path == KERNEL_CMDLINE:
        editor = KernelCmdlineFile.parse(text, path)
        return path, editor, editor.cmdline, [f"{path}:1"], None
    grub = GrubConfig({p: f.text for p, f in state.files.items()
                       if f.text is not None and (p == GRUB_DEFAULT or is_dropin(p))})
    path, _base = grub.base_assignment()
    where = [str(src) for var in (GRUB_LINUX, GRUB_LINUX_DEFAULT) for src in grub.sources[var]]
    return path, grub.files[path], grub.cmdline, where, grub


def _warned(noop: str, finding_id: str, title: str, detail: str,
            evidence: list[str]) -> RuleResult:
    """No host change, and the one warning that says why."""
    return RuleResult(rule=NAME, noop=noop, findings=[Finding(
        id=finding_id, rule=NAME, severity="warning", title=title, detail=detail,
        evidence=evidence)])


def _loader_unknown(state: HostState) -> RuleResult:
    """`proxmox-boot-tool status` gave no usable answer: no host change, said why."""
    return _warned(
        "cannot tell which boot loader the host uses", "host.bootloader-unknown",
        "Boot loader unknown",
        "`proxmox-boot-tool status` could not be read or gave an unexpected answer, so pvefix"
        " does not know whether /etc/kernel/cmdline or /etc/default/grub is the host's"
        " cmdline. No host change is planned.",
        [f"exit code {state.boot_tool.exit_code}", state.boot_tool.output])


def _file_missing(ctx: Context, path: str, refresh: list[str], loader: str,
                  running_line: Cmdline | None) -> RuleResult:
    """The boot loader reads a cmdline file that is absent: a manual step (pvefix will not
    guess root=), or nothing without SSH (no API reads it)."""
    state = ctx.state
    if state.access.method == "api" and not state.access.ssh:
        return RuleResult(
            rule=NAME, noop="no SSH access: the host cmdline cannot be read (no API for it)"
        )
    base, fixed = _base_with_iommu_on(running_line, _vendor(ctx), state.node.kernel_version,
                                      state.node.kernel_config)
    return RuleResult(
        rule=NAME,
        findings=_running_iommu_off(running_line, _vendor(ctx), state.node.kernel_version,
                                    state.node.kernel_config),
        changes=[
            ManualChange(
                id="host.cmdline.create", rule=NAME, key="iommu", before=None,
                after=f"{base} iommu=pt".strip(),
                reason=f"{path} is missing but the boot loader ({loader}) reads it."
                + "".join(f" {note}" for note in fixed),
                risk=Risk(
                    level="high",
                    text="A wrong root= makes the host unbootable; pvefix will not guess it."),
                evidence=[f"{path}: absent", f"boot loader: {loader}"],
                inverse=f"rm {path} && {' '.join(refresh)}", disruption="host-reboot", file=path,
                refresh_command=refresh,
                commands=[
                    f"echo '{base} iommu=pt' > {path}   # check root= first",
                    " ".join(refresh),
                    "reboot"])])


def _grub_not_evaluable(grub: GrubConfig) -> RuleResult:
    """update-grub would expand what pvefix does not evaluate: no host edit, said why."""
    return _warned(
        "the GRUB command line cannot be evaluated (see findings)",
        "host.cmdline.grub-not-evaluable", "GRUB command line not evaluable",
        "update-grub would expand values pvefix does not evaluate, so the effective command"
        " line is unknown; pvefix plans no host edit. Check `grep -m1 linux"
        " /boot/grub/grub.cfg` after update-grub instead.", grub.unknown)


def _iommu_pt_change(state: HostState, path: str, refresh: list[str], line_before: str,
                     line_after: str, where: list[str], dups: list[str],
                     common: dict[str, Any]) -> HostCmdlineChange:
    """The change that adds iommu=pt, with why, what it does not do and how to undo it."""
    loader = state.boot_tool.loader
    return HostCmdlineChange(
        id="host.cmdline.iommu_pt", key="iommu", before=line_before, after=line_after,
        reason="iommu=pt puts host-owned devices in an identity DMA domain, lowering IOMMU"
        " overhead for the host's own I/O; commonly recommended for passthrough hosts.",
        risk=Risk(level="low", text="Needs a host reboot (every VM on the node stops). The boot"
                  " loader must be refreshed or the edit has no effect."),
        evidence=[
            f"boot loader: {loader} (proxmox-boot-tool exit {state.boot_tool.exit_code})",
            *([host_world.intel_default_basis(state.node)]
              if state.node.kernel_config is not None and "intel" in (
                  state.node.cpu_vendor or "").lower() else []),
            f"configured ({', '.join(where) or path}): {line_before}",
            *([f"duplicates removed: {', '.join(dups)}"] if dups else [])],
        inverse=f"remove iommu=pt from {path} and run {' '.join(refresh)}, then reboot",
        effect="Does NOT change GPU peer-to-peer or DMA latency inside the VM: VFIO-assigned"
        " GPUs always get their own translated IOMMU domain. Expect no tok/s change from this"
        " alone.",
        **common)


def _not_booted(path: str, configured: Cmdline, running_line: Cmdline | None,
                grub: bool) -> list[Finding]:
    """Configured and running lines differ: a host reboot is already pending (info)."""
    if running_line is None:
        return []
    configured_now = " ".join(t.raw for t in configured.tokens)
    running_now = " ".join(t.raw for t in running_line.tokens)
    same = same_as_running(configured, running_line) if grub else running_now == configured_now
    if same:
        return []
    return [Finding(
        id="host.cmdline.not-booted", rule=NAME, severity="info",
        title="Configured and running host cmdline differ",
        detail=f"{path} is not what the running kernel was booted with: a host reboot"
        " (after a boot loader refresh) is already pending.",
        evidence=[f"configured: {configured_now}", f"running: {running_now}"])]


def _effective_after(grub: GrubConfig | None, path: str,
                     editor: KernelCmdlineFile | GrubDefaultFile) -> str:
    """The whole effective command line once `editor`'s file is written."""
    if grub is None:
        return " ".join(t.raw for t in editor.cmdline.tokens)
    texts = {p: f.render() for p, f in grub.files.items()}
    texts[path] = editor.render()
    # The editor already read its edited text back (it refuses what would not read back as
    # intended), so the files are reused rather than parsed again.
    return " ".join(t.raw for t in GrubConfig(texts, parsed=grub.files).cmdline.tokens)


_NOT_PRESENT = (
    f'Proxmox refuses every passthrough start: "{IOMMU_NOT_PRESENT}" ({IOMMU_NOT_PRESENT_SOURCE};'
    f' a mapped entry fails first with "{MAPPING_WITHOUT_GROUP}")'
)


class _Refused(Exception):
    """A host edit pvefix will not plan: why (the rule's noop) and the finding that says it
    (none where the editor refused the edit: its message is the noop)."""

    def __init__(self, noop: str, finding: Finding | None = None) -> None:
        super().__init__(noop)
        self.noop = noop
        self.findings = [] if finding is None else [finding]


def _refuse_off(what: str, detail: str, evidence: list[str]) -> _Refused:
    return _Refused(
        f"{what}: no host reboot is planned, the IOMMU would stay off after it (see findings)",
        Finding(id="host.cmdline.iommu-off", rule=NAME, severity="error",
                title="The configured host cmdline turns the IOMMU off",
                detail=f"{detail} After a reboot with it, {_NOT_PRESENT}.", evidence=evidence))


def _enable_iommu(
    state: HostState,
    grub: GrubConfig | None,
    where: tuple[str, list[str]],
    editor: KernelCmdlineFile | GrubDefaultFile,
    configured: Cmdline,
    vendor: CpuVendor | None,
    line_before: str,
) -> list[HostCmdlineChange]:
    """The edits that leave the IOMMU on after the next boot: `amd_iommu=off` and
    `intel_iommu=off` removed, `intel_iommu=on` added on Proxmox kernels before 6.8. Each is a
    change of `where` (the file and its refresh command); raises _Refused when pvefix cannot
    make them."""
    path = where[0]
    kver, config = state.node.kernel_version, state.node.kernel_config
    changes: list[HostCmdlineChange] = []
    for token in off_tokens(configured, vendor):
        change = _off_removed(state, token, grub, where, editor, line_before)
        changes.append(change)
        line_before = change.after if change.after is not None else line_before
    if host_world.rests_on_intel_default(Cmdline.parse(line_before), vendor) and config is None:
        raise _Refused("not established: the Intel IOMMU's build default decides and it was"
                       " not read (see findings)", host_world.intel_default_unknown(
                           NAME, state.node, Cmdline.parse(line_before)))
    if vendor == "intel" and intel_needs_on(kver, config) and intel_setting(
        Cmdline.parse(line_before)
    )[0] != "on":
        try:
            editor.ensure("intel_iommu", "on")
        except PvefixError as exc:
            raise _refuse_off(
                "the Intel IOMMU stays off", f"Proxmox kernel {kver} is older than 6.8 and the"
                " line has no intel_iommu=on (pve-docs qm-pci-passthrough.adoc), and pvefix"
                f" cannot edit the file: {exc}.", [f"{path}: {line_before}"],
            ) from None
        after = _effective_after(grub, path, editor)
        changes.append(_iommu_change(
            where, "host.cmdline.intel_iommu_on", "intel_iommu", line_before, after,
            f"The Intel IOMMU of kernel {kver} is off unless the command line has"
            f" intel_iommu=on ({host_world.intel_default_basis(state.node)}; pve-docs"
            f" qm-pci-passthrough.adoc: Proxmox kernels before 6.8), and without it"
            f" {_NOT_PRESENT}.",
            f"remove intel_iommu=on from {path}"))
        line_before = after
    if not iommu_enabled(Cmdline.parse(line_before), vendor, kver, config):
        raise _refuse_off(
            "the IOMMU would stay off", "pvefix's edit of the command line would not turn the"
            " IOMMU on (another file overrides it).", [f"after the edit: {line_before}"])
    return changes


def _off_removed(state: HostState, token: Token, grub: GrubConfig | None,
                 where: tuple[str, list[str]], editor: KernelCmdlineFile | GrubDefaultFile,
                 line_before: str) -> HostCmdlineChange:
    """The change that removes `token`, a parameter that turns the IOMMU off; raises _Refused
    where `off` is not its whole value, it is set in another file too, or the edit fails."""
    path = where[0]
    name = normalize_name(token.name)  # amd-iommu=off is amd_iommu=off to the kernel
    holders = grub.where(token.name, token.value) if grub else []
    elsewhere = [str(x) for x in holders if x.path != path]
    if token.value != "off" or elsewhere:
        raise _refuse_off(
            f"{token.raw} turns the IOMMU off",
            f"{token.raw} {_OFF_WHAT[name]}"
            f" ({_KERNEL_SOURCE[name]}). pvefix removes it only where it is the"
            " parameter's whole value and in the file it edits: remove `off` by hand.",
            [f"{path}: {line_before}", *elsewhere])
    try:
        editor.remove(token.name, token.value)
    except PvefixError as exc:
        raise _refuse_off(
            f"{token.raw} turns the IOMMU off", f"{token.raw} {_OFF_WHAT[name]}"
            f" ({_KERNEL_SOURCE[name]}), and pvefix"
            f" cannot edit the file: {exc}.", [f"{path}: {line_before}"],
        ) from None
    intel_on = name == "intel_iommu" and intel_needs_on(state.node.kernel_version,
                                                        state.node.kernel_config)
    return _iommu_change(
        where, f"host.cmdline.{name}_off", name, line_before,
        _effective_after(grub, path, editor),
        f"{token.raw} {_OFF_WHAT[name]}"
        f" ({_KERNEL_SOURCE[name]}): after the reboot {_NOT_PRESENT}. Removing it"
        " leaves the IOMMU on" + (" (the Intel IOMMU then needs intel_iommu=on on this"
                                  " kernel, planned below)." if intel_on else "."),
        f"add {token.raw} back to {path}")


_OFF_WHAT = {
    "amd_iommu": "disables the AMD IOMMU",
    "intel_iommu": "disables the Intel IOMMU",
    "iommu": "sets no_iommu: neither the AMD nor the Intel driver looks for an IOMMU, and no"
    " later token (iommu=pt included) clears it",
}
_KERNEL_SOURCE = {
    "iommu": "arch/x86/kernel/pci-dma.c iommu_setup; amd_iommu_detect, detect_intel_iommu",
    "amd_iommu": "drivers/iommu/amd/init.c parse_amd_iommu_options",
    "intel_iommu": "drivers/iommu/intel/iommu.c intel_iommu_setup",
}


def _iommu_change(where: tuple[str, list[str]], change_id: str, key: str, before: str, after: str,
                  reason: str, inverse: str) -> HostCmdlineChange:
    path, refresh = where
    return HostCmdlineChange(
        id=change_id, rule=NAME, key=key, before=before, after=after, reason=reason,
        risk=Risk(
            level="low",
            text="Needs a host reboot (every VM on the node stops). The boot loader must be"
            " refreshed or the edit has no effect."),
        evidence=[f"configured ({path}): {before}"],
        inverse=f"{inverse}, run {' '.join(refresh)} and reboot", disruption="host-reboot",
        file=path, refresh_command=refresh,
        effect="After the host reboot the IOMMU is on and Proxmox can start VMs with"
        " passed-through devices (when the firmware has VT-d / AMD-Vi enabled).")


def _pt_overridden(configured: Cmdline, where: list[str]) -> Finding:
    return Finding(
        id="host.cmdline.iommu-pt-overridden", rule=NAME, severity="info",
        title="iommu=pt is turned back later on the line",
        detail="iommu=pt, iommu=nopt and iommu.passthrough= all set the default DMA domain, and the"
        " last one on the command line wins (drivers/iommu/iommu.c, arch/x86/kernel/"
        "pci-dma.c): here a later one makes it translated again. pvefix does not reorder"
        " the line.",
        evidence=[*where, " ".join(t.raw for t in configured.tokens
                                    if t.name in ("iommu", "iommu.passthrough"))])


def _base_with_iommu_on(running: Cmdline | None, vendor: CpuVendor | None,
                        kernel_version: str | None,
                        kernel_config: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """The running line as the base of a new cmdline file, with the IOMMU left on: exact
    `amd_iommu=off`/`intel_iommu=off` dropped, `intel_iommu=on` added before 6.8; and what was
    changed, said plainly."""
    if running is None:
        return "root=...", []
    line = running.copy()
    notes: list[str] = []
    for token in off_tokens(running, vendor):
        if token.value == "off":
            line.remove(token.name, token.value)
            notes.append(f"{token.raw} (running now) is left out: after the reboot {_NOT_PRESENT}.")
        else:
            notes.append(f"{token.raw} (running now) turns the IOMMU off: take `off` out of it.")
    if vendor == "intel" and intel_needs_on(kernel_version, kernel_config) and intel_setting(
            line)[0] != "on":
        line.ensure("intel_iommu", "on")
        notes.append(f"intel_iommu=on is added: Proxmox kernel {kernel_version} is older than 6.8.")
    # the tokens only: /proc/cmdline ends in a newline, and a newline in the new file would
    # push what follows to line 2, which proxmox-boot-tool never reads
    return " ".join(t.raw for t in line.tokens), notes


def _running_iommu_off(running: Cmdline | None, vendor: CpuVendor | None,
                       kernel_version: str | None,
                       kernel_config: dict[str, str] | None = None) -> list[Finding]:
    """The running kernel booted with the IOMMU off: passthrough is refused until a reboot."""
    if running is None or iommu_enabled(running, vendor, kernel_version, kernel_config):
        return []
    culprits = [t.raw for t in off_tokens(running, vendor)] or [
        f"Proxmox kernel {kernel_version} (before 6.8) and no intel_iommu=on"
    ]
    return [
        Finding(
            id="host.iommu.off-running", rule=NAME, severity="warning",
            title="The running host kernel has no IOMMU",
            detail=f"The host booted with {', '.join(culprits)}: until it boots with the IOMMU on,"
            f" {_NOT_PRESENT}.",
            evidence=[f"/proc/cmdline: {running.render()}"])]


def _esp_refresh_blocker(state: HostState) -> Finding | str | None:
    """GRUB on ESPs: `proxmox-boot-tool refresh` still reads /etc/kernel/cmdline and aborts
    when its first line lacks root=. A Finding when it would abort; a note for the changes
    when the source cannot say whether the file exists (a bundle without it); else None."""
    fact = state.file(KERNEL_CMDLINE)
    if fact.text is None:
        if state.access.method != "bundle":
            return None
        return (
            f"this bundle has no {KERNEL_CMDLINE}: read it on the host (`head -n1"
            f" {KERNEL_CMDLINE}`); if it exists its first line must contain root=, or"
            " `proxmox-boot-tool refresh` aborts (proxmox-kernel-helper zz-proxmox-boot"
            " update_esps)"
        )
    if not esp_refresh_aborts(fact.text):
        return None
    first = fact.text.split("\n", 1)[0]
    return Finding(
        id="host.boot-tool.kernel-cmdline-no-root", rule=NAME, severity="error",
        title="proxmox-boot-tool refresh would abort",
        detail=f"GRUB boots from the ESPs here, yet on every refresh (a kernel update runs one too)"
        f" proxmox-boot-tool reads"
        f" {KERNEL_CMDLINE} when it exists and stops with \"{KERNEL_CMDLINE_NO_ROOT}\" (exit"
        " 1) when its first line lacks root= (proxmox-kernel-helper zz-proxmox-boot"
        " update_esps, commit 86c7015). GRUB does not use that file, so pvefix plans no host"
        f" edit: move it aside (`mv {KERNEL_CMDLINE} /root/kernel-cmdline.unused`) or put the"
        " host's root= in its first line, then plan again.",
        evidence=[f"{KERNEL_CMDLINE}:1: {first}",
                  f"boot loader: grub-esp ({state.boot_tool.output.strip()})"])
