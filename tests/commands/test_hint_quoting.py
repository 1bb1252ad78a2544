"""A printed command (`Next:`, `to undo:`) runs as printed whatever its option values hold:
copied from the terminal into a real bash, it gives pvefix exactly the words it was built from.
A value with ESC, CR, a bidi or zero-width character, a newline or an undecodable byte is
written as bash's $'...' (it was printed as `\\x1b` inside '...', and so named another folder);
the printed line holds nothing the output filter (render/inert.py) would escape again."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.hints import Context, shell_word
from pvefix.render.inert import inert_text

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")

PIECES = ["\x1b", "\x1b[31m", "\r", "\n", "\t", "\x00x"[1:], "\x7f", "\x9b", "\u202e", "\u2066",
          "\u200b", "\ufeff", "\u061c", "\udcff", "'", '"', "\\", "$(id)", "`id`", " ", ";",
          "*", "~", "!", "é", "a", "/tmp/x", "%s", "{a,b}", "-"]
VALUES = st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join)


def _as_bash_runs_it(line: str) -> list[bytes]:
    """The words bash gives the command of `line` (its `pvefix` replaced by printf)."""
    assert line.startswith("pvefix ")
    script = "printf '%s\\0' " + line.removeprefix("pvefix ")
    done = subprocess.run([BASH or "bash", "-c", script.encode("utf-8", "surrogateescape")],
                          capture_output=True, check=True, env={"LC_ALL": "C"})
    return done.stdout.split(b"\0")[:-1]


@settings(max_examples=150, deadline=None)
@given(state_dir=VALUES, host=VALUES)
def test_a_printed_command_runs_as_printed_in_bash(state_dir: str, host: str) -> None:
    ctx = Context(target=("--state-dir", state_dir), guest=("--guest-ssh-host", host))
    line = ctx.command(["rollback", "100", "--restart"])
    printed = inert_text(line)
    assert printed == line, "nothing in it for the output filter to escape"
    assert "\n" not in line and "\r" not in line
    want = ["rollback", "100", "--restart", "--state-dir", state_dir, "--guest-ssh-host", host]
    assert _as_bash_runs_it(printed) == [w.encode("utf-8", "surrogateescape") for w in want]


@pytest.mark.parametrize("value,printed", [
    ("/srv/state", "/srv/state"),
    ("/srv/my state", "'/srv/my state'"),
    ("/srv/a\x1bb", "$'/srv/a\\x1bb'"),
    ("/srv/a\rb", "$'/srv/a\\x0db'"),
    ("it's\x1b", "$'it\\x27s\\x1b'"),
])
def test_plain_values_keep_their_usual_quoting(value: str, printed: str) -> None:
    assert shell_word(value) == printed
