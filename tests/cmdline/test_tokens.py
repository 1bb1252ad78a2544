"""The Cmdline model reads a command line as the kernel does and edits it without churn."""

from __future__ import annotations

import pytest

from pvefix.cmdline import Cmdline, Token, normalize_name
from pvefix.errors import ParseError, ValidationError

ZFS = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"


def names_values(text: str) -> list[tuple[str, str | None]]:
    return [(t.name, t.value) for t in Cmdline.parse(text).tokens]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("quiet", [("quiet", None)]),
        ("root=ZFS=rpool/ROOT/pve-1", [("root", "ZFS=rpool/ROOT/pve-1")]),
        ('dyndbg="file x.c +p"', [("dyndbg", "file x.c +p")]),
        ('"param=value with spaces"', [("param", "value with spaces")]),
        ('"quiet"', [("quiet", None)]),
        ("name=", [("name", "")]),
        ("=x", [("=x", None)]),
        ("=a=b", [("=a", "b")]),
        ('a"b c"d e', [('a"b c"d', None), ("e", None)]),
        ("  a \t b\n", [("a", None), ("b", None)]),
    ],
)
def test_tokens_split_and_unquote_like_the_kernel_next_arg(
    text: str, expected: list[tuple[str, str | None]]
) -> None:
    assert names_values(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        ZFS + " quiet",
        "  " + ZFS + "   quiet\t\n",
        'a="b c"  "d=e f" -- init "x y"  ',
        "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet\n",
        'broken="never closed',
    ],
)
def test_an_unchanged_cmdline_renders_byte_identical(text: str) -> None:
    assert Cmdline.parse(text).render() == text


def test_names_compare_with_dashes_and_underscores_equal() -> None:
    line = Cmdline.parse("vfio-pci.ids=10de:2bb1 pcie_acs_override=downstream")
    assert normalize_name("vfio-pci.ids") == "vfio_pci.ids"
    assert line.get("vfio_pci.ids") == ["10de:2bb1"]
    assert line.has("pcie-acs-override", "downstream")
    assert line.remove("vfio_pci.ids")
    assert line.render() == "pcie_acs_override=downstream"


def test_get_returns_every_value_in_order_and_none_for_flags() -> None:
    line = Cmdline.parse("console=tty0 quiet console=ttyS0,115200 console")
    assert line.get("console") == ["tty0", "ttyS0,115200", None]
    assert line.get("absent") == []


def test_has_without_value_matches_any_value() -> None:
    line = Cmdline.parse("iommu=pt quiet")
    assert line.has("iommu")
    assert line.has("iommu", "pt")
    assert not line.has("iommu", "off")
    assert line.has("quiet")


def test_ensure_appends_one_space_and_the_token_at_the_end() -> None:
    line = Cmdline.parse(ZFS + " quiet")
    assert line.ensure("iommu", "pt") is True
    assert line.render() == ZFS + " quiet iommu=pt"


def test_ensure_keeps_the_original_spacing_and_trailing_whitespace() -> None:
    line = Cmdline.parse("  a   b \t")
    assert line.ensure("c")
    assert line.render() == "  a   b c \t"


def test_ensure_is_a_no_op_when_present() -> None:
    line = Cmdline.parse(ZFS + " iommu=pt")
    assert line.ensure("iommu", "pt") is False
    assert line.ensure("boot") is False
    assert line.render() == ZFS + " iommu=pt"


def test_ensure_quotes_a_value_with_spaces() -> None:
    line = Cmdline.parse("quiet")
    assert line.ensure("dyndbg", "file x.c +p")
    assert line.render() == 'quiet dyndbg="file x.c +p"'
    assert Cmdline.parse(line.render()).get("dyndbg") == ["file x.c +p"]


def test_ensure_on_an_empty_line_writes_just_the_token() -> None:
    line = Cmdline.parse("")
    assert line.ensure("quiet")
    assert line.render() == "quiet"


def test_remove_takes_every_match_and_its_separator() -> None:
    line = Cmdline.parse("a iommu=pt b  iommu=pt c")
    assert line.remove("iommu", "pt") is True
    assert line.render() == "a b c"  # each removal took the separator before it
    assert line.remove("iommu") is False


def test_remove_with_value_leaves_other_values() -> None:
    line = Cmdline.parse("iommu=pt iommu=off")
    assert line.remove("iommu", "pt")
    assert line.render() == "iommu=off"


def test_remove_the_first_token_keeps_the_leading_whitespace() -> None:
    line = Cmdline.parse("  a b")
    assert line.remove("a")
    assert line.render() == "  b"


def test_the_init_separator_ends_the_parameters() -> None:
    line = Cmdline.parse('quiet -- single "x y" pci=realloc')
    assert [t.name for t in line.tokens] == ["quiet"]
    assert line.init_args == ("single", "x y", "pci=realloc")
    assert not line.has("pci")


def test_edits_go_before_the_separator_and_never_after() -> None:
    line = Cmdline.parse("quiet -- single quiet")
    assert line.ensure("iommu", "pt")
    assert line.remove("quiet")
    assert line.render() == "iommu=pt -- single quiet"


def test_a_line_that_is_only_init_args_gets_its_first_parameter_before_them() -> None:
    line = Cmdline.parse("-- single")
    assert line.ensure("quiet")
    assert line.render() == "quiet -- single"


def test_a_quoted_separator_still_separates_and_an_assignment_does_not() -> None:
    assert Cmdline.parse('a "--" b').init_args == ("b",)
    assert Cmdline.parse("a --=x b").has("b")


def test_an_unterminated_quote_swallows_the_rest_and_blocks_edits() -> None:
    line = Cmdline.parse('a x="b c d')
    assert line.unterminated_quote
    assert line.get("x") == ["b c d"]
    with pytest.raises(ParseError, match="unterminated"):
        line.ensure("iommu", "pt")


@pytest.mark.parametrize(
    ("name", "value"),
    [("", None), ("a b", None), ("a=b", None), ('a"', None), ("--", None), ("x", 'a"b')],
)
def test_tokens_the_kernel_cannot_express_are_refused(name: str, value: str | None) -> None:
    with pytest.raises(ValidationError):
        Token.build(name, value)


def test_with_value_keeps_the_quoting_form() -> None:
    assert Token.from_raw("pci=nocrs").with_value("nocrs,realloc").raw == "pci=nocrs,realloc"
    assert Token.from_raw('pci="nocrs"').with_value("a,b").raw == 'pci="a,b"'
    assert Token.from_raw('"pci=nocrs"').with_value("a,b").raw == '"pci=a,b"'


def test_copy_is_independent() -> None:
    line = Cmdline.parse("a")
    other = line.copy()
    other.ensure("b")
    assert line.render() == "a"
    assert other.render() == "a b"


def test_dedupe_drops_repeats_but_never_changes_which_value_wins() -> None:
    line = Cmdline.parse("quiet a=1 quiet a=2 a=1 iommu=pt iommu=pt")
    assert line.dedupe()
    # a=1 a=2 a=1: the last a=1 is what the kernel keeps, so all three stay.
    assert line.render() == "quiet a=1 a=2 a=1 iommu=pt"
    assert not line.dedupe()
