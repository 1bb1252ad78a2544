"""The journal survives a torn last line; the pure checks say what moved and what is missing."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pvefix.cmdline.running import cmdline_problems
from pvefix.executor.checks import same_content
from pvefix.executor.journal import Journal, read_journal


def test_records_are_appended_numbered_and_read_back(tmp_path: Path) -> None:
    seen: list[int] = []
    journal = Journal(tmp_path / "journal.jsonl", hook=lambda r: seen.append(r["seq"]))
    journal.record("apply-start", phase=1)
    journal.record("step-begin", step="a", kind="vm-config")
    assert [r["event"] for r in read_journal(tmp_path / "journal.jsonl")] == [
        "apply-start", "step-begin"]
    assert seen == [1, 2]
    assert (tmp_path / "journal.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_torn_last_line_from_a_power_cut_is_ignored_and_numbering_goes_on(
    tmp_path: Path
) -> None:
    path = tmp_path / "journal.jsonl"
    Journal(path).record("apply-start")
    with path.open("a") as handle:
        handle.write('{"seq": 2, "event": "step-be')
    assert [r["seq"] for r in read_journal(path)] == [1]
    assert Journal(path).record("rollback-begin")["seq"] == 2


def test_cmdline_problems_name_missing_and_stale_tokens() -> None:
    change = [("quiet intel_iommu=on", "quiet intel_iommu=on iommu=pt")]
    assert cmdline_problems("BOOT_IMAGE=/vmlinuz quiet intel_iommu=on iommu=pt", change) == []
    assert cmdline_problems("quiet intel_iommu=on", change) == ["/proc/cmdline lacks iommu=pt"]
    removal = [("quiet amd_iommu=on", "quiet")]
    assert cmdline_problems("quiet amd_iommu=on", removal) == [
        "/proc/cmdline still has amd_iommu=on"]


KEYS = st.sampled_from(["cores", "memory", "machine", "name", "hostpci0", "cpu"])
VALUES = st.from_regex(r"[a-z0-9=,.]{1,12}", fullmatch=True)


@given(st.dictionaries(KEYS, VALUES, min_size=1))
def test_same_content_ignores_order_but_not_values(values: dict[str, str]) -> None:
    forward = "".join(f"{k}: {v}\n" for k, v in values.items())
    backward = "".join(f"{k}: {v}\n" for k, v in reversed(values.items()))
    assert same_content(forward, backward)
    key = next(iter(values))
    assert not same_content(forward, forward.replace(f"{key}: {values[key]}\n",
                                                     f"{key}: {values[key]}x\n"))
