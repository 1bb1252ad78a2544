"""How much the probe measures: the full run and `--quick` (under 30 s on an idle box)."""

from __future__ import annotations

from pvefix.probe._model import BaseModel, ConfigDict

#: 8 B .. 32 MiB in powers of 4: the sizes tensor parallelism sends, small to large.
FULL_ALLREDUCE_SIZES: tuple[int, ...] = tuple(8 * 4**k for k in range(12))
QUICK_ALLREDUCE_SIZES: tuple[int, ...] = (8, 8 << 10, 1 << 20, 32 << 20)


class Plan(BaseModel):
    """Sizes and repetitions for one probe run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    latency_bytes: int
    bandwidth_bytes: int
    check_bytes: int
    iterations: int
    allreduce_sizes: tuple[int, ...]
    allreduce_iterations: int
    budget_s: float


def plan_for(quick: bool, timeout: float | None = None) -> Plan:
    """The full plan, or the quick one; `timeout` overrides the total time budget."""
    if quick:
        return Plan(
            latency_bytes=4, bandwidth_bytes=32 << 20, check_bytes=4 << 20, iterations=10,
            allreduce_sizes=QUICK_ALLREDUCE_SIZES, allreduce_iterations=5,
            budget_s=timeout if timeout is not None else 28.0)
    return Plan(
        latency_bytes=4, bandwidth_bytes=256 << 20, check_bytes=64 << 20, iterations=50,
        allreduce_sizes=FULL_ALLREDUCE_SIZES, allreduce_iterations=20,
        budget_s=timeout if timeout is not None else 600.0)
