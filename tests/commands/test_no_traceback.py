"""No argument gives a traceback: any text where a VMID, a phase, a number, a clique map or a
file goes, for the main commands. Each run ends in an exit code (0-3) and, for an error, a
message; an exception escaping `run_app` is what a user would see as a traceback. Every run
stays off the network: a bundle that does not exist, or a refusal before any connection."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.cli import build_command
from pvefix.commands.run import run_app

app = build_command()
NOWHERE = "/nonexistent/pvefix-bundle"

# Text as a user (or a script) could pass it: digits of any script, signs, spaces, control
# characters, underscores (`int()` takes `1_000`), huge numbers.
ARG = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="0123456789²³¹٣０-+_ .e\x00\n", min_size=1, max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
).filter(lambda s: not s.startswith("-") or s == "-")

FORMS = {
    "plan": lambda a, b: ["plan", a, "--bundle", NOWHERE],
    "plan-clique": lambda a, b: ["plan", "100", "--bundle", NOWHERE, "--p2p",
                                 "--clique-map", f"hostpci{a}={b}"],
    "check": lambda a, b: ["check", a, b, "--bundle", NOWHERE],
    "desired": lambda a, b: ["desired", a, "--bundle", NOWHERE],
    "apply": lambda a, b: ["apply", a, "--phase", b, "--host", "127.0.0.1:1", "--timeout", "2"],
    "rollback": lambda a, b: ["rollback", a, "--snapshot", b, "--bundle", NOWHERE],
    "snapshots": lambda a, b: ["snapshots", a],
    "collect": lambda a, b: ["collect", "script", "--vmid", a],
    "timeout": lambda a, b: ["plan", "100", "--bundle", NOWHERE, "--timeout", a],
    "inspect-cmdline": lambda a, b: ["inspect", "cmdline", "-", "--kind", a],
    "inspect-config": lambda a, b: ["inspect", "config", a, "--format", b],
    "desired-file": lambda a, b: ["check", "100", "--desired", a, "--bundle", NOWHERE],
    "profile": lambda a, b: ["plan", "100", "--config", a, "--profile", b, "--bundle", NOWHERE],
}


@pytest.mark.parametrize("form", list(FORMS))
@given(a=ARG, b=ARG)
def test_no_argument_gives_a_traceback(form: str, a: str, b: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out), redirect_stderr(err):
        mp.chdir("/")  # a plan file named `a` is not found (nor written)
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"root=/dev/sda1\n")))
        code = run_app(app, FORMS[form](a, b))  # an exception here is a user's traceback
    assert code in (0, 1, 2, 3), (out.getvalue(), err.getvalue())
    assert "Traceback" not in err.getvalue()
