"""One module per remediation rule. Each is `rule(ctx) -> RuleResult`, pure, documented."""

from pvefix.planner.rules import (
    bar_space,
    config_health,
    host_iommu,
    iommu_groups,
    p2p,
    pcie,
    permissions,
    q35,
    topology,
)

RULES = [
    config_health.rule,
    q35.rule,
    pcie.rule,
    bar_space.rule,
    host_iommu.rule,
    topology.rule,
    iommu_groups.rule,
    p2p.rule,
    permissions.rule,
]

__all__ = ["RULES"]
