"""pvefix.target.sshlib: paramiko without invoke at import, and invoke still there when used."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, check=True, timeout=60)
    return done.stdout.strip()


def test_ssh_shell_import_does_not_load_invoke() -> None:
    out = _run("""
        import sys
        import pvefix.target.ssh
        print(sorted(m for m in sys.modules if m == "invoke" or m.startswith("invoke.")))
    """)
    assert out == "[]"


def test_match_exec_in_an_ssh_config_still_runs_invoke() -> None:
    # paramiko needs invoke for `Match exec`: the stand-in imports it at that moment.
    out = _run("""
        import sys
        from pvefix.target.sshlib import paramiko
        config = paramiko.SSHConfig.from_text("Match exec true\\n  User bob\\n")
        print(config.lookup("somehost").get("user"), "invoke" in sys.modules)
    """)
    assert out == "bob True"


def test_invoke_imported_first_is_left_alone() -> None:
    out = _run("""
        import invoke
        from pvefix.target.sshlib import paramiko
        import paramiko.config
        print(paramiko.config.invoke is invoke)
    """)
    assert out == "True"
