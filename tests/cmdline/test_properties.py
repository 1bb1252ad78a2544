"""Property-based tests: parsers are total and lossless, edits are local and reversible."""

from __future__ import annotations

import re
from unittest import mock

from hypothesis import assume, given
from hypothesis import strategies as st

from pvefix.cmdline import (
    Cmdline,
    GrubDefaultFile,
    KernelCmdlineFile,
    ProcCmdline,
    ensure_pci_option,
    files,
    lint,
    pci_realloc_state,
)
from pvefix.cmdline.grubd import GrubConfig
from pvefix.errors import ParseError, PvefixError, RefusedError
from pvefix.paths import GRUB_DEFAULT

name = st.sampled_from(
    ["quiet", "iommu", "amd_iommu", "intel-iommu", "vfio-pci.ids", "console", "root", "x"]
)
plain_value = st.text(alphabet="abcdefgz019=,:./_-", min_size=0, max_size=8)
spaced_value = st.text(alphabet="ab =,", min_size=1, max_size=8)
pci_token = st.sampled_from(
    [
        "pci=realloc", "pci=realloc=off", "pci=realloc=on", "pci=nocrs,realloc",
        "pci=nocrs", "pci=nocrs,realloc=off", '"pci=realloc=off"', 'pci="nocrs"', "pci",
        "pci=",
    ]
)


@st.composite
def token(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 4))
    n = draw(name)
    if kind == 0:
        return n
    if kind == 1:
        return f"{n}={draw(plain_value)}"
    if kind == 2:
        return f'{n}="{draw(spaced_value)}"'
    if kind == 3:
        return f'"{n}={draw(spaced_value)}"'
    return draw(pci_token)


space = st.sampled_from([" ", "  ", "\t", " \t "])


@st.composite
def cmdline_text(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(token(), max_size=8))
    parts = [draw(st.sampled_from(["", " ", "  "]))]
    for t in tokens:
        parts.extend([t, draw(space)])
    if parts[-1] and draw(st.booleans()):
        parts[-1] = ""
    if draw(st.booleans()):
        parts.append("-- init " + draw(st.sampled_from(["a", '"x y"', "pci=realloc=off"])))
    return "".join(parts)


edit = st.one_of(
    st.tuples(name, st.none()),
    st.tuples(name, plain_value),
    st.tuples(name, spaced_value),
)


@given(st.text(max_size=80))
def test_arbitrary_text_never_raises_and_round_trips(text: str) -> None:
    line = Cmdline.parse(text)
    assert line.render() == text
    lint(line, kernel_version="6.8.12-4-pve", cpu_vendor="intel")
    for parsed in (KernelCmdlineFile.parse(text), ProcCmdline.parse(text)):
        assert parsed.render() == text
        parsed.findings()


shellish = st.text(alphabet=st.sampled_from(list("ab =\"'$`\\#;{}()\t")), max_size=24)
grub_line = st.tuples(
    st.sampled_from(
        [
            "GRUB_CMDLINE_LINUX_DEFAULT=",
            "GRUB_CMDLINE_LINUX=",
            "#GRUB_CMDLINE_LINUX_DEFAULT=",
            "  export GRUB_CMDLINE_LINUX_DEFAULT=",
            "GRUB_TIMEOUT=",
            "",
        ]
    ),
    shellish,
).map("".join)


@given(st.lists(grub_line, max_size=5), st.sampled_from(["", "\n"]), edit)
def test_arbitrary_grub_text_parses_losslessly_and_edits_read_back(
    lines: list[str], end: str, change: tuple[str, str | None]
) -> None:
    text = "\n".join(lines) + end
    try:
        grub = GrubDefaultFile.parse(text)
    except ParseError as exc:
        assert exc.source == "/etc/default/grub" and exc.line is not None
        return
    assert grub.render() == text
    grub.findings()
    n, v = change
    try:
        changed = grub.ensure(n, v)
    except (ParseError, RefusedError):
        assert grub.render() == text, "a refused edit must leave the file as it was"
        return
    reread = GrubDefaultFile.parse(grub.render())
    assert reread.cmdline.has(n, v)
    assert changed == (grub.render() != text)


@given(cmdline_text())
def test_generated_cmdlines_round_trip_byte_identical(text: str) -> None:
    assert Cmdline.parse(text).render() == text


@given(cmdline_text(), edit)
def test_ensure_then_remove_returns_to_the_original(
    text: str, change: tuple[str, str | None]
) -> None:
    line = Cmdline.parse(text)
    n, v = change
    if line.ensure(n, v):
        assert line.has(n, v)
        assert line.init_tail == Cmdline.parse(text).init_tail
        assert line.remove(n, v)
    assert line.render() == text


@given(cmdline_text(), edit)
def test_ensure_is_idempotent_and_reparses_to_the_same_tokens(
    text: str, change: tuple[str, str | None]
) -> None:
    line = Cmdline.parse(text)
    n, v = change
    line.ensure(n, v)
    once = line.render()
    assert line.ensure(n, v) is False
    assert line.render() == once
    again = Cmdline.parse(once)
    assert again.tokens == line.tokens
    assert again.has(n, v)


@given(cmdline_text())
def test_ensure_pci_realloc_turns_realloc_on_and_is_idempotent(text: str) -> None:
    line = Cmdline.parse(text)
    ensure_pci_option(line, "realloc")
    assert pci_realloc_state(Cmdline.parse(line.render())) == "on"
    once = line.render()
    assert ensure_pci_option(line, "realloc") is False
    assert line.render() == once
    assert line.init_tail == Cmdline.parse(text).init_tail


@given(
    cmdline_text(),
    st.lists(st.sampled_from(["# comment", "", "x y z"]), max_size=3),
    edit,
    st.booleans(),
)
def test_a_kernel_cmdline_edit_changes_exactly_line_1(
    text: str, rest: list[str], change: tuple[str, str | None], add: bool
) -> None:
    body = "root=ZFS=rpool/ROOT/pve-1 " + text + "\n" + "\n".join(rest)
    kfile = KernelCmdlineFile.parse(body)
    n, v = change
    try:
        changed = kfile.ensure(n, v) if add else kfile.remove(n, v)
    except RefusedError:
        # only a removal that takes every root= away is refused, and it leaves the file as is
        assert not add and n == "root"
        assert kfile.render() == body
        return
    before, after = body.split("\n"), kfile.render().split("\n")
    assert len(before) == len(after)
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert diff == ([0] if changed else [])


@st.composite
def grub_file(draw: st.DrawFn) -> str:
    value = draw(cmdline_text())
    assume("'" not in value)
    quote = draw(st.sampled_from(["double", "single"]))
    if quote == "double":
        escaped = value.replace('"', '\\"')  # kernel quotes, escaped for the shell
        assign = f'GRUB_CMDLINE_LINUX_DEFAULT="{escaped}"'
    else:
        assign = f"GRUB_CMDLINE_LINUX_DEFAULT='{value}'"
    lines = draw(
        st.lists(
            st.sampled_from(
                [
                    "GRUB_DEFAULT=0",
                    '# GRUB_CMDLINE_LINUX_DEFAULT="x"',
                    "",
                    'GRUB_CMDLINE_LINUX=""',
                    "GRUB_TIMEOUT=5  # five",
                ]
            ),
            max_size=5,
        )
    )
    lines.insert(draw(st.integers(0, len(lines))), assign + draw(st.sampled_from(["", "  # c"])))
    return "\n".join(lines) + "\n"


@given(grub_file(), edit, st.sampled_from(["ensure", "remove", "pci"]))
def test_a_grub_edit_changes_exactly_one_line(
    text: str, change: tuple[str, str | None], op: str
) -> None:
    grub = GrubDefaultFile.parse(text)
    assert grub.render() == text
    n, v = change
    if op == "ensure":
        changed = grub.ensure(n, v)
    elif op == "remove":
        changed = grub.remove(n, v)
    else:
        changed = grub.ensure_pci_option("realloc")
    before, after = text.split("\n"), grub.render().split("\n")
    assert len(before) == len(after)
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(diff) == (1 if changed else 0)
    if changed:
        assert after[diff[0]].startswith("GRUB_CMDLINE_LINUX_DEFAULT=")
    reread = GrubDefaultFile.parse(grub.render())
    assert reread.cmdline.tokens == grub.cmdline.tokens
    if op == "ensure":
        assert reread.cmdline.has(n, v)
    if op == "remove":
        assert not reread.cmdline.has(n, v)


def _scanned(text: str) -> list[tuple[object, ...]] | str:
    try:
        grub = GrubDefaultFile.parse(text)
    except ParseError as exc:
        return f"{exc.line}: {exc}"
    return [(a.variable, a.line, a.end_line, a.prefix, a.suffix, a.word.raw, a.word.value,
             a.word.style, a.word.expansions, a.word.literal_specials) for a in grub.assignments]


@given(st.lists(grub_line, max_size=5), st.sampled_from(["", "\n"]))
def test_the_plain_assignment_fast_path_reads_what_the_shell_word_parser_reads(
    lines: list[str], end: str
) -> None:
    text = "\n".join(lines) + end
    fast = _scanned(text)
    # The same regex with its optional plain-shape group made unmatchable, so every
    # assignment goes through the shell-word parser:
    pattern = files._ASSIGN_LINE.pattern
    assert pattern.count("(?:(?:") == 1
    slow_only = re.compile(pattern.replace("(?:(?:", "(?:(?!)(?:"), re.MULTILINE)
    with mock.patch.object(files, "_ASSIGN_LINE", slow_only):
        slow = _scanned(text)
    assert fast == slow


def _read_and_edit(text: str) -> object:
    """Everything a plan reads from one GRUB file, then the file after adding iommu=pt."""
    scanned = _scanned(text)
    if isinstance(scanned, str):
        return scanned
    config = GrubConfig({GRUB_DEFAULT: text})
    grub = config.files[GRUB_DEFAULT]
    read = (scanned, config.values, config.unknown, config.sources, config.where("quiet"),
            [f.model_dump() for f in grub.findings()])
    try:
        grub.ensure("iommu", "pt")
    except PvefixError as exc:
        return read, str(exc)
    return read, grub.render(), _scanned(grub.render())


@given(st.lists(grub_line, max_size=6), st.sampled_from(["", "\n"]))
def test_the_line_by_line_scan_reads_and_edits_as_the_match_by_match_scan(
    lines: list[str], end: str
) -> None:
    # A file that mentions the variables more than files._MANY times is first read line by
    # line; with the threshold below zero every file is, and must read and edit the same.
    text = "\n".join(lines) + end
    by_match = _read_and_edit(text)
    with mock.patch.object(files, "_MANY", -1):
        by_line = _read_and_edit(text)
    assert by_line == by_match
