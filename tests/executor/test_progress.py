"""Wait lines: redrawn live on a terminal through rich, clean lines elsewhere; TERM=dumb and
NO_COLOR honoured."""

from __future__ import annotations

import io
import os
import pty

import pytest

from pvefix.console.progress import live_terminal, waiting


def test_off_a_terminal_each_state_change_is_one_clean_line() -> None:
    lines: list[str] = []
    stream = io.StringIO()
    with waiting("host kpro6", "reboot", lines.append, stream) as wait:
        wait.update("api down, ssh down")
        wait.update("api down, ssh down")
        wait.update("api up, ssh up")
    assert [line.split(" (")[0] for line in lines] == [
        "host kpro6: api down, ssh down", "host kpro6: api up, ssh up"]
    assert stream.getvalue() == ""  # nothing redrawn, no escape codes


def _drain(fd: int) -> str:
    """Everything written to the terminal so far: one read may return only the first chunk
    (the cursor-hiding escape) on a loaded machine, so read until it stays quiet."""
    import select

    chunks: list[bytes] = []
    while select.select([fd], [], [], 0.5)[0]:
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def test_on_a_terminal_the_line_is_live_and_says_what_and_how_long(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as tty:
        assert live_terminal(tty)
        lines: list[str] = []
        with waiting("VM 100", "shutdown task", lines.append, tty) as wait:
            wait.update("task running")
            assert wait.line().startswith("VM 100: waiting for shutdown task, 0 s")
            assert wait.line().endswith("(task running)")
        tty.flush()
        assert lines == []  # shown live, not as lines
        shown = _drain(leader)
    os.close(leader)
    assert "VM 100: waiting for shutdown task" in shown
    assert "\x1b[36m" not in shown  # NO_COLOR: no colour


def test_term_dumb_gets_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as tty:
        assert not live_terminal(tty)
    os.close(leader)


def test_with_colour_allowed_the_line_is_coloured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as tty:
        with waiting("VM 100", "start task", print, tty):
            pass
        tty.flush()
        shown = _drain(leader)
    os.close(leader)
    assert "\x1b[36m" in shown and "waiting for start task" in shown
