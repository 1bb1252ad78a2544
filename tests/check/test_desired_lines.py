"""The line finder of desired-state files (desired/parse.py) and the GitHub annotations that use
it: linear in the file (no pattern backtracking over a user's line), one read of each file per
run, and the same line a plain scan of every header and `key =` line would give."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.check.render import github_annotations
from pvefix.check.report import CheckItem, CheckReport
from pvefix.desired.parse import LineIndex, loads_desired, locate
from pvefix.errors import ParseError

GOOD_HEAD = 'schema = "pvefix.desired/v1"\n[vms.100]\n'


@pytest.mark.parametrize("filler", ["[" + " " * 8000, "[[" + " " * 8000 + "]] x", "[ " * 4000,
                                    "[" * 8000, "[" + " " * 8000 + "] x"])
def test_a_long_line_of_brackets_in_a_multi_line_string_costs_well_under_a_second(
        filler: str) -> None:
    text = (GOOD_HEAD + '[vms.100.keys]\ndescription = """\n' + filler + '\n"""\n'
            '[vms.100.machine]\nfamily = "q36"\n')
    started = time.perf_counter()
    with pytest.raises(ParseError) as err:
        loads_desired(text, "d.toml")
    assert time.perf_counter() - started < 0.5
    assert err.value.line == 8  # family = "q36"


_PART = st.sampled_from(["vms", "100", "101", "keys", "machine", "hostpci", "hostpci0", "a-b",
                         '"quoted.key"', "'lit'", "nodes"])


def _plain(key: str) -> str:
    return key.strip("\"'")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(_PART, min_size=1, max_size=3),
                          st.sampled_from(["", "  ", "\t"])), max_size=25),
       st.lists(st.sampled_from(["vms", "100", "keys", "machine", "quoted.key", "lit", "zz"]),
                max_size=4))
def test_the_index_finds_what_a_scan_of_every_line_finds(
        lines: list[tuple[bool, list[str], str]], want: list[str]) -> None:
    text, paths, table = "", [], []
    for is_header, parts, pad in lines:
        dotted = f"{pad}.{pad}".join(parts)
        if is_header:
            text += f"{pad}[{pad}{dotted}{pad}]{pad}# c\n"
            table = [_plain(p) for p in parts]
            paths.append(list(table))
        else:
            text += f"{pad}{dotted}{pad}= 1\n"
            paths.append([*table, *(_plain(p) for p in parts)])
    best: tuple[int, int] | None = None  # what locate() always promised: deepest, then first
    for number, path in enumerate(paths, start=1):
        depth = 0
        for a, b in zip(path, want, strict=False):
            if a != b:
                break
            depth += 1
        if depth and depth in (len(path), len(want)) and (best is None or depth > best[0]):
            best = (depth, number)
    assert locate(text, tuple(want)) == (best[1] if best else None)


def _drift_report(count: int) -> CheckReport:
    return CheckReport(source="test", items=[
        CheckItem(target="vm", vmid=100 + n, node="pve1", property="machine", status="drift",
                  expected="family q35", actual="i440fx") for n in range(count)])


def _desired(count: int) -> str:
    return 'schema = "pvefix.desired/v1"\n' + "".join(
        f'[vms.{100 + n}.machine]\nfamily = "q35"\n' for n in range(count))


def test_annotations_read_and_scan_each_file_once(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "desired.toml"
    path.write_text(_desired(1000))
    reads: list[Path] = []
    real = Path.read_text

    def counted(self: Path, *args: object, **kwargs: object) -> str:
        reads.append(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    lines = github_annotations(_drift_report(1000), lambda item: path).splitlines()
    assert reads == [path]
    assert len(lines) == 1000
    assert lines[999].startswith(f"::error file={path},line={2 * 999 + 2},")


def test_annotating_1000_drifted_vms_costs_about_what_the_plain_text_costs(
        tmp_path: Path) -> None:
    path = tmp_path / "desired.toml"
    path.write_text(_desired(1000))
    report = _drift_report(1000)
    started = time.perf_counter()
    github_annotations(report, lambda item: path)
    assert time.perf_counter() - started < 0.5  # was 29 s when each annotation re-read the file


def test_line_index_is_reusable() -> None:
    index = LineIndex(_desired(3))
    assert [index.find(("vms", str(v), "machine", "family")) for v in (100, 101, 102)] == [
        3, 5, 7]
    assert index.find(("vms", "999")) is None  # only `vms` leads there: no line is that deep
