"""Properties of the host-iommu rule over generated command lines (issue 26): a planned host
reboot never leaves the IOMMU off without saying so, and iommu=pt is never planned where the
line already makes the default domain identity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.cmdline import Cmdline
from pvefix.cmdline.iommu import generic_off_tokens, iommu_enabled, passthrough_token
from pvefix.hosttree import resolve_scenario
from pvefix.paths import KERNEL_CMDLINE
from pvefix.planner import plan
from pvefix.sources.bundle import read_bundle
from pvefix.state import FileFact

BASE = read_bundle(resolve_scenario("kpro6"), 100)
WORDS = st.sampled_from([
    "quiet", "amd_iommu=off", "amd_iommu=on", "amd_iommu=fullflush,off", "amd_iommu=fullflush",
    "intel_iommu=on", "intel_iommu=off", "intel_iommu=on,igfx_off", "iommu=pt", "iommu=nopt",
    "iommu.passthrough=1", "iommu.passthrough=0", "iommu=pt", "pci=realloc", "amd-iommu=off",
    "intel-iommu=off", "iommu=off", "iommu=off,pt", "amd_iommu=force_enable", "iommu=force",
    "pcie_acs_override=downstream", "intel_iommu=sm_on",
])
# The booted kernel's build config: not read, VT-d on by default, VT-d off by default.
CONFIGS = st.sampled_from([None, {"CONFIG_INTEL_IOMMU": "y", "CONFIG_INTEL_IOMMU_DEFAULT_ON": "y"},
                           {"CONFIG_INTEL_IOMMU": "y"}])
VENDORS = st.sampled_from([("AuthenticAMD", "amd"), ("GenuineIntel", "intel")])
KERNELS = st.sampled_from(["6.5.13-6-pve", "6.8.12-4-pve", "6.17.2-1-pve"])


@settings(max_examples=150, deadline=None)
@given(st.lists(WORDS, max_size=6), VENDORS, KERNELS, CONFIGS)
def test_a_host_reboot_never_leaves_the_iommu_off_unsaid(
    words: list[str], vendor: tuple[str, str], kernel: str, config: dict[str, str] | None
) -> None:
    line = " ".join(["root=ZFS=rpool/ROOT/pve-1", "boot=zfs", *words])
    state = BASE.model_copy(update={
        "files": {**BASE.files, KERNEL_CMDLINE: FileFact.of(KERNEL_CMDLINE, line + "\n")},
        "node": BASE.node.model_copy(update={"cpu_vendor": vendor[0], "kernel_version": kernel,
                                             "kernel_config": config}),
    })
    result = plan(state)
    host = [c for p in result.phases for c in p.changes if c.target == "host-cmdline"]
    findings = {f.id for f in result.findings}
    configured = Cmdline.parse(line)
    unknown = {f for f in findings if f.startswith("not-established.host-iommu.")}
    if unknown:  # the closed world: nothing written that rests on a verdict not established
        assert not host, (line, unknown)
    if host:
        after = Cmdline.parse(host[-1].after or "")
        assert iommu_enabled(after, vendor[1], kernel, config), (line, host[-1].after)  # type: ignore[arg-type]
        assert host[0].before == line
        assert not generic_off_tokens(after), (line, host[-1].after)
    elif not iommu_enabled(configured, vendor[1], kernel, config):  # type: ignore[arg-type]
        assert "host.cmdline.iommu-off" in findings or unknown, line
    if passthrough_token(configured) is not None:
        assert "host.cmdline.iommu_pt" not in {c.id for c in host}, line
