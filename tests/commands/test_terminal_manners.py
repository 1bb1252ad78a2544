"""Terminal manners: colour only where it is wanted (NO_COLOR, TERM=dumb, --color), text wrapped
to the terminal's width with hanging indents and never inside a word, a one-screen summary
first, and a change ticket that says each thing once and cites only what users can read."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from pvefix.console.terminal import terminal
from pvefix.main import main

SCENARIOS = Path(__file__).resolve().parents[2] / "pvefix" / "scenarios"
CASES = [("kpro6", "100"), ("kpro6", "101"), ("windows-igd", "100"), ("sapphire-2s", "500")]
ESC = "\x1b["


@pytest.fixture
def tty() -> Iterator[TextIO]:
    """A stream that is a terminal (the follower end of a pseudo-terminal)."""
    leader, follower = os.openpty()
    stream = os.fdopen(follower, "w", encoding="utf-8")
    try:
        yield stream
    finally:
        stream.close()
        os.close(leader)


def test_colour_follows_no_color_term_dumb_and_the_switch(tty: TextIO, tmp_path: Path) -> None:
    xterm = {"TERM": "xterm-256color"}
    assert terminal(tty, "auto", xterm).color
    assert not terminal(tty, "auto", {**xterm, "NO_COLOR": "1"}).color
    assert not terminal(tty, "auto", {"TERM": "dumb"}).color
    assert not terminal(tty, "never", xterm).color
    with (tmp_path / "log").open("w") as pipe:  # a CI log: no colour unless asked for
        assert not terminal(pipe, "auto", xterm).color
        assert terminal(pipe, "always", {"NO_COLOR": "1"}).color  # the flag wins
        assert terminal(pipe, "auto", {"COLUMNS": "60"}).width == 60
        assert terminal(pipe, "auto", {}).width == 80
    styled = terminal(tty, "always", xterm).style("HOST REBOOT", "bold", "red")
    assert styled.startswith(ESC) and "HOST REBOOT" in styled
    assert terminal(tty, "never", xterm).style("HOST REBOOT", "bold", "red") == "HOST REBOOT"


def _plan(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, scenario: str,
          vmid: str, columns: int, *extra: str) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    main(["plan", vmid, "--bundle", str(SCENARIOS / scenario), *extra])
    return capsys.readouterr().out


def _free_lines(text: str) -> Iterator[str]:
    """The lines pvefix wraps: not diffs, steps or `Next:` (copied as they are, never wrapped)."""
    block = ""
    for line in text.splitlines():
        if not line.strip():
            block = ""
        elif line.startswith("    --- a/"):
            block = "diff"
        elif line == "      steps:":
            block = "steps"
        elif block == "steps" and not line.startswith("        "):
            block = ""
        if not block and not line.startswith(("Next: ", "Next, ")):
            yield line


@pytest.mark.parametrize(("scenario", "vmid"), CASES)
def test_text_fits_80_and_60_columns_and_no_word_is_broken(
    scenario: str, vmid: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wide = _plan(capsys, monkeypatch, scenario, vmid, 1000)
    for columns in (80, 60):
        text = _plan(capsys, monkeypatch, scenario, vmid, columns)
        assert ESC not in text  # not a terminal: no colour
        # The same words in the same order (a wrapped comment step gains its `#`s).
        words = [w for w in text.split() if w != "#"]
        assert words == [w for w in wide.split() if w != "#"], f"a word broken at {columns}"
        for line in _free_lines(text):
            # Only a word wider than the line may stick out, on a line of its own (after its
            # label or bullet at most).
            assert len(line) <= columns or len(line.split()) <= 2, f"{columns}: {line!r}"


def test_wrapped_lines_hang_under_their_label(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = _plan(capsys, monkeypatch, "kpro6", "100", 60, "--verbose").splitlines()
    why = next(i for i, line in enumerate(lines) if line.startswith("      why: "))
    assert lines[why + 1].startswith(" " * len("      why: ")) and lines[why + 1][11] != " "
    bullet = next(i for i, line in enumerate(lines) if line.startswith("  - VM 100 stops"))
    assert lines[bullet + 1].startswith("    ") and lines[bullet + 1][4] != " "
    # Prose that holds a colon is not a label: it continues under its own first line.
    prose = next(i for i, line in enumerate(lines) if line.startswith("      `cpu: host` also"))
    assert lines[prose + 1].startswith("      ") and lines[prose + 1][6] != " "


def test_the_summary_comes_first_and_fits_one_screen(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = _plan(capsys, monkeypatch, "kpro6", "100", 80)
    summary = text.split("\nSummary\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(summary) <= 22, summary  # with the title and the blank line: one 24-line screen
    assert summary[0].startswith("  Phase 1: VM restart (cold start); 11 change(s): machine")
    assert any(line.startswith("  Phase 2: HOST REBOOT") for line in summary)
    assert "  - Highest risk: medium." in summary
    # What to run next ends the plan, once (where the eyes are when the plan has scrolled by).
    # Read from a bundle: the apply needs the live node, which the bundle's options do not
    # reach. Too wide for 80 columns on one line: the command goes whole on the next.
    assert text.splitlines()[-2:] == ["Next, against the live node (a bundle is read-only):",
                                      "  pvefix apply 100 --phase 1 --restart"]
    # (the phase's own activation text names the same command in backticks, as prose)
    assert text.splitlines().count("  pvefix apply 100 --phase 1 --restart") == 1
    assert text.count("Next") == 1
    assert text.index("\nSummary\n") < text.index("\nFindings\n") < text.index("\nPhase 1:")


def test_color_switch_on_the_command_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert ESC in _plan(capsys, monkeypatch, "kpro6", "100", 80, "--color", "always")
    assert ESC not in _plan(capsys, monkeypatch, "kpro6", "100", 80, "--color", "never")
    assert main(["plan", "100", "--bundle", str(SCENARIOS / "kpro6"), "--color", "blue"]) == 1


@pytest.mark.parametrize(("scenario", "vmid"), CASES)
def test_the_ticket_does_not_repeat_itself_and_cites_no_private_notes(
    scenario: str, vmid: str, capsys: pytest.CaptureFixture[str],
) -> None:
    main(["plan", vmid, "--bundle", str(SCENARIOS / scenario), "--format", "markdown",
          "--p2p"])
    ticket = capsys.readouterr().out
    assert "DOMAIN.md" not in ticket and "../shared" not in ticket
    sentences = [s.strip() for s in re.split(r"(?<=[.;])\s+|\n", ticket)
                 if len(s.strip()) > 40 and not s.lstrip().startswith(("|", "-", "+", "@"))]
    # Each phase states its own activation, and a P2P change states its cliques' basis beside
    # the finding that found it: twice at most; a sentence per change (8 GPUs: 8 times) no more.
    repeated = {s for s in sentences if sentences.count(s) > 2}
    assert not repeated, repeated
