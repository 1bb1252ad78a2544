"""/etc/default/grub: shell semantics for reading, one-line edits in the original quoting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvefix.cmdline import GrubDefaultFile
from pvefix.cmdline.grubd import GrubConfig
from pvefix.errors import ParseError, RefusedError
from pvefix.paths import GRUB_DEFAULT

CASES = sorted((Path(__file__).parent / "grub_cases").glob("*.json"))

DEBIAN_DEFAULT = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`( . /etc/os-release && echo ${NAME} )`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""

# Uncomment to enable BadRAM filtering, modify to suit your needs
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"
"""


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.split("\n"), after.split("\n")
    assert len(a) == len(b), "the edit added or removed lines"
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_grub_edit_cases(case: Path) -> None:
    data: dict[str, Any] = json.loads(case.read_text())
    grub = GrubDefaultFile.parse(data["input"])
    assert grub.render() == data["input"], "an unchanged file must render byte-identical"
    op = data["op"]
    changed = getattr(grub, op[0])(*op[1:])
    assert changed == data["changed"], f"{case.stem}: changed={changed}"
    assert grub.render() == data["output"], f"{case.stem}: got {grub.render()!r}"
    assert grub.cmdline.render() == data["effective"]


def test_the_debian_default_file_reads_both_variables() -> None:
    grub = GrubDefaultFile.parse(DEBIAN_DEFAULT)
    assert grub.render() == DEBIAN_DEFAULT
    assert grub.linux_default is not None and grub.linux_default.render() == "quiet"
    assert grub.linux is not None and grub.linux.render() == ""
    assert grub.cmdline.render() == "quiet"
    assert grub.findings() == []


def test_adding_iommu_pt_to_the_debian_default_changes_exactly_one_line() -> None:
    grub = GrubDefaultFile.parse(DEBIAN_DEFAULT)
    assert grub.ensure("iommu", "pt")
    assert changed_lines(DEBIAN_DEFAULT, grub.render()) == [
        ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"', 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"')
    ]


def test_the_last_uncommented_assignment_wins_and_is_the_one_edited() -> None:
    text = (
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
        '#GRUB_CMDLINE_LINUX_DEFAULT="commented"\n'
        "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash'  # the real one\n"
        '  # GRUB_CMDLINE_LINUX_DEFAULT="also commented"\n'
    )
    grub = GrubDefaultFile.parse(text)
    winner = grub.assignment("GRUB_CMDLINE_LINUX_DEFAULT")
    assert winner is not None and winner.line == 3
    assert grub.ensure_pci_option("realloc")
    assert changed_lines(text, grub.render()) == [
        (
            "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash'  # the real one",
            "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash pci=realloc'  # the real one",
        )
    ]
    overridden = [f for f in grub.findings() if f.code == "grub-overridden-assignment"]
    assert [f.line for f in overridden] == [1]


def test_the_kernel_gets_linux_then_linux_default() -> None:
    grub = GrubDefaultFile.parse('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="a=1"\n')
    assert grub.cmdline.render() == "a=1 quiet"


def test_ensure_sees_parameters_already_in_grub_cmdline_linux() -> None:
    text = 'GRUB_CMDLINE_LINUX="iommu=pt"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    grub = GrubDefaultFile.parse(text)
    assert grub.ensure("iommu", "pt") is False
    assert grub.render() == text


def test_remove_takes_the_parameter_out_of_both_variables() -> None:
    text = 'GRUB_CMDLINE_LINUX="amd_iommu=on"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on"\n'
    grub = GrubDefaultFile.parse(text)
    assert grub.remove("amd_iommu", "on")
    assert grub.render() == 'GRUB_CMDLINE_LINUX=""\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'


def test_realloc_off_in_grub_cmdline_linux_is_turned_on_in_place() -> None:
    text = 'GRUB_CMDLINE_LINUX="pci=realloc=off"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    grub = GrubDefaultFile.parse(text)
    assert grub.ensure_pci_option("realloc")
    assert grub.render() == 'GRUB_CMDLINE_LINUX="pci=realloc"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'


def test_variable_expansions_are_kept_verbatim_and_flagged() -> None:
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA ${MORE}"\n'
    grub = GrubDefaultFile.parse(text)
    assert [t.raw for t in grub.cmdline] == ["quiet", "$EXTRA", "${MORE}"]
    (flag,) = [f for f in grub.findings() if f.code == "grub-variable-expansion"]
    assert flag.severity == "warning" and flag.line == 1
    assert "$EXTRA" in flag.message and "${MORE}" in flag.message
    assert grub.ensure("iommu", "pt")
    assert grub.render() == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA ${MORE} iommu=pt"\n'


def test_an_unquoted_value_that_gains_a_space_becomes_double_quoted() -> None:
    grub = GrubDefaultFile.parse("GRUB_CMDLINE_LINUX_DEFAULT=quiet\n")
    assert grub.ensure("iommu", "pt")
    assert grub.render() == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\n'


def test_a_missing_assignment_is_appended_as_a_new_line() -> None:
    grub = GrubDefaultFile.parse("GRUB_TIMEOUT=5")
    assert grub.ensure_pci_option("realloc")
    assert grub.render() == 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="pci=realloc"\n'


def test_removing_from_a_file_without_assignments_changes_nothing() -> None:
    grub = GrubDefaultFile.parse("GRUB_TIMEOUT=5\n")
    assert grub.remove("quiet") is False
    assert grub.render() == "GRUB_TIMEOUT=5\n"


def test_escaped_quotes_inside_double_quotes_are_kernel_quotes() -> None:
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet dyndbg=\\"file x.c +p\\""\n'
    grub = GrubDefaultFile.parse(text)
    assert grub.cmdline.get("dyndbg") == ["file x.c +p"]
    assert grub.ensure("iommu", "pt")
    assert grub.render() == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet dyndbg=\\"file x.c +p\\" iommu=pt"\n'


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('GRUB_CMDLINE_LINUX_DEFAULT="quiet \\\n splash"\n', "several lines"),
        ('GRUB_CMDLINE_LINUX_DEFAULT="quiet "\'splash\'\n', "mixes quoting"),
        ('GRUB_CMDLINE_LINUX_DEFAULT="quiet \\$HOME"\n', "escaped"),
    ],
)
def test_values_pvefix_cannot_rewrite_faithfully_are_refused(text: str, why: str) -> None:
    grub = GrubDefaultFile.parse(text)
    assert grub.render() == text
    with pytest.raises(RefusedError, match=why):
        grub.ensure("iommu", "pt")
    assert grub.render() == text
    assert "grub-value-not-editable" in {f.code for f in grub.findings()}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet\n', 2),
        ("GRUB_CMDLINE_LINUX='quiet\n", 1),
        ('GRUB_CMDLINE_LINUX_DEFAULT="quiet" update-grub\n', 1),
    ],
)
def test_assignments_pvefix_cannot_read_raise_parse_errors_with_the_line(
    text: str, line: int
) -> None:
    with pytest.raises(ParseError) as info:
        GrubDefaultFile.parse(text, source="/etc/default/grub")
    assert (info.value.source, info.value.line) == ("/etc/default/grub", line)


def test_a_commented_line_with_an_open_quote_is_ignored() -> None:
    text = '#GRUB_CMDLINE_LINUX_DEFAULT="quiet\nGRUB_CMDLINE_LINUX_DEFAULT="a"\n'
    assert GrubDefaultFile.parse(text).cmdline.render() == "a"


def test_export_and_indentation_are_understood() -> None:
    text = '  export GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    grub = GrubDefaultFile.parse(text)
    assert grub.ensure("iommu", "pt")
    assert grub.render() == '  export GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\n'


def test_an_evaluation_reuses_a_file_read_only_when_its_text_is_the_same() -> None:
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    editor = GrubDefaultFile.parse(text)
    assert GrubConfig({GRUB_DEFAULT: text}, parsed={GRUB_DEFAULT: editor}).files[
        GRUB_DEFAULT] is editor
    other = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\n'
    config = GrubConfig({GRUB_DEFAULT: other}, parsed={GRUB_DEFAULT: editor})
    assert config.files[GRUB_DEFAULT] is not editor
    assert config.cmdline.render() == "quiet iommu=pt"


def test_many_overridden_assignments_are_one_finding_with_the_first_lines() -> None:
    text = "".join(f'GRUB_CMDLINE_LINUX_DEFAULT="x{i}"\n' for i in range(8))
    found = [f for f in GrubDefaultFile.parse(text).findings()
             if f.code == "grub-overridden-assignment"]
    assert len(found) == 1 and found[0].line == 1
    assert "lines 1, 2, 3, 4, 5 and 2 more" in found[0].message
    assert "again on line 8" in found[0].message


def test_an_edit_that_would_be_swallowed_by_a_continued_value_is_refused() -> None:
    # GRUB_CMDLINE_LINUX ends in a backslash-newline: a GRUB_CMDLINE_LINUX_DEFAULT line added
    # after it would become part of its value. The edited file is read back (from the last
    # assignment before the change on) and the edit refused, leaving the file as it was.
    text = "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=quiet\\\n"
    grub = GrubDefaultFile.parse(text)
    with pytest.raises(RefusedError, match="would not read back as intended"):
        grub.ensure("iommu", "pt")
    assert grub.render() == text
