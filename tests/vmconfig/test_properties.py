"""Property-based tests: the parser is total and lossless, edits are local."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import PvefixError
from pvefix.vmconfig import HostPci, Machine, PropertyString, VMConfig
from pvefix.vmconfig.values import validate

from .conftest import CORPUS

SAMPLES = [p.read_text() for p in sorted(CORPUS.rglob("*.conf"))[:40]] if CORPUS.is_dir() else []

line = st.one_of(
    st.sampled_from(
        [
            "",
            "   ",
            "[PENDING]",
            "[special:cloudinit]",
            "[special:bogus]",
            "[snap1]",
            "[:3]",
            "delete: hostpci0,!vga",
            "#comment%3A with escapes %ZZ",
            "description: text",
            "hostpci0: mapping=pro6000",
            "hostpci1: 0000:41:00.0,pcie=2",
            "machine: pc-i440fx-9.2+pve1",
            "machine: Q35",
            "numa: maybe",
            "cores: 4",
            "cores: 4",
            "args: -set device.hostpci0.x-nv-gpudirect-clique=0",
            "snapstate: prepare",
        ]
    ),
    st.text(max_size=40),
)


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    if SAMPLES and draw(st.booleans()):
        base = draw(st.sampled_from(SAMPLES)).split("\n")
        for _ in range(draw(st.integers(0, 4))):
            base.insert(draw(st.integers(0, len(base))), draw(line))
        return "\n".join(base)
    lines = draw(st.lists(line, max_size=25))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@given(config_texts())
def test_any_text_parses_losslessly_or_raises_only_pvefix_errors(text: str) -> None:
    try:
        cfg = VMConfig.parse(text, "fuzz.conf")
    except PvefixError:
        return
    assert cfg.render() == text
    cfg.render_proxmox()  # the writer view never crashes either
    try:
        VMConfig.parse(text, "fuzz.conf", strict=True)
    except PvefixError as exc:
        assert exc.source == "fuzz.conf"


KEYS = st.from_regex(r"[a-z][a-z_\-]{0,8}[0-9]{0,2}", fullmatch=True)
VALUES = st.from_regex(r"[!-~]([ -~]{0,20}[!-~])?", fullmatch=True)


@given(config_texts(), KEYS, VALUES)
def test_setting_a_key_changes_at_most_one_line_and_nothing_is_lost(
    text: str, key: str, value: str
) -> None:
    cfg = VMConfig.parse(text, "fuzz.conf")
    before = cfg.render().split("\n")
    try:
        changed = cfg.main.set(key, value)
    except PvefixError:
        return
    after = cfg.render().split("\n")
    assert cfg.main.get(key) == value if key != "description" else True
    if not changed:
        assert after == before
        return
    # Either one line replaced, or one line inserted (possibly with the trailing newline).
    if len(after) == len(before):
        assert sum(a != b for a, b in zip(before, after, strict=True)) == 1
    else:
        assert len(after) - len(before) in (1, 2)
        remaining = list(after)
        remaining.remove(f"{key}: {value}")
        assert [x for x in remaining if x] == [x for x in before if x]


@given(st.text(max_size=60))
def test_value_checks_raise_only_pvefix_errors(text: str) -> None:
    for key in ("hostpci0", "machine", "numa", "cores", "cpulimit", "ostype", "bogus"):
        try:
            validate(key, text)
        except PvefixError:
            pass
    for parse in (lambda t: HostPci.parse(t), lambda t: Machine.parse(t)):
        try:
            parse(text)
        except PvefixError:
            pass


@given(st.text(alphabet=st.characters(blacklist_characters=","), max_size=12).filter(bool),
       st.lists(st.from_regex(r"[a-z\-]{1,8}=[a-z0-9]{1,4}", fullmatch=True), max_size=5))
def test_property_string_set_touches_only_its_own_part(head: str, parts: list[str]) -> None:
    text = ",".join([head, *parts])
    ps = PropertyString.parse(text, default_key="host")
    assert ps.render() == text
    ps.set("pcie", "1")
    rendered = ps.render()
    if "pcie=" not in text:
        assert rendered == text + ",pcie=1"
    else:
        assert len(rendered.split(",")) == len(text.split(","))


# Lines shaped like entries, with the near misses of the fast path (spaces and other whitespace
# around the value, a colon in the key, digits before letters, an empty value).
entry_like = st.builds(
    lambda key, sep, value: f"{key}{sep}{value}",
    st.one_of(st.sampled_from(["cores", "hostpci0", "net0", "a-b_c", "x1y", "1a", "A", "", "a:b"]),
              st.text(alphabet="az_-09:A ", max_size=8)),
    st.sampled_from([": ", ":", ":  ", ": \t", ":\u00a0", " : "]),
    st.one_of(st.sampled_from(["", " ", "4", " 4", "4 ", "a: b", "x\r", "\u2003v\u2003", "\u00a0"]),
              st.text(max_size=12)),
)


@given(st.one_of(entry_like, st.text(max_size=30)).filter(lambda raw: "\n" not in raw))
def test_a_line_is_classified_as_the_entry_pattern_alone_would(raw: str) -> None:
    """The parser's fast path for `key: value` gives what _ENTRY gives (a line never holds
    a newline: the text is split on them)."""
    from pvefix.vmconfig.config import _ENTRY, _classify

    line = _classify(raw, 7)
    m = _ENTRY.match(raw)
    if m is not None:
        assert (line.kind, line.key, line.value) == ("entry", m.group(1), m.group(2)), raw
    else:
        assert line.kind != "entry", raw
    assert (line.raw, line.number) == (raw, 7)
