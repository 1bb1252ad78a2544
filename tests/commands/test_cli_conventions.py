"""The CLI a Proxmox admin expects: -h, completion, readable help with an example per
command, one meaning per short option, XDG_CONFIG_HOME and the peers' environment names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pvefix.cli import build_command
from pvefix.commands.clihelp import EXAMPLES
from pvefix.errors import ParseError
from pvefix.main import main
from pvefix.target.settings import resolve_connection


def _commands(command: Any, path: str = "") -> list[tuple[str, Any]]:
    out = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        out += _commands(sub, f"{path} {name}".strip())
    return out


ALL = _commands(build_command())


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: p or "pvefix")
def test_help_has_no_python_types_and_an_example(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*path.split(), "-h"]) == 0
    text = capsys.readouterr().out
    assert text.lstrip().startswith("Usage: pvefix")
    for python_type in ("<str>", "<int>", "<float>", "<path>", "list[", "<bool>"):
        assert python_type not in text, f"{path}: {python_type} in help"
    if path:
        examples = re.split(r"Examples:\s*\n", text, maxsplit=1)[1]
        assert examples.lstrip().startswith(f"pvefix {path.split()[0]}")


def _panels(text: str) -> dict[str, str]:
    """A help text's panels (typer's rich_help_panel groups, in one box, each opened by
    `╭─ Title` or `├─ Title`): title -> the panel's text."""
    out: dict[str, str] = {}
    for box in re.split(r"[╭├]─ ", text)[1:]:
        title, _, body = box.partition(" ")
        out[title] = body.split("╰")[0]
    return out


@pytest.mark.parametrize(("path", "panels"), [
    ("plan", ["Arguments", "Options", "Rehearsal", "P2P", "Guest", "Connection"]),
    ("apply", ["Arguments", "Options", "Safety", "Rehearsal", "P2P", "Guest", "Connection"]),
    ("rollback", ["Arguments", "Options", "Safety", "Guest", "Connection"]),
    ("check", ["Arguments", "Options", "Rehearsal", "Connection"]),
])
def test_help_groups_options_in_panels(path: str, panels: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([path, "-h"]) == 0
    found = _panels(capsys.readouterr().out)
    assert list(found) == panels
    assert "--host " in found["Connection"] and "--ssh-key " in found["Connection"]
    assert "--host " not in found["Options"]
    if "Safety" in found:
        assert "--yes, -y " in found["Safety"] and "--restart " in found["Safety"]
    if "Guest" in found:
        assert "--guest-agent " in found["Guest"]


@pytest.mark.parametrize(("args", "said"), [
    (["plan", "abc", "--bundle", "x"], "'abc' is not a VMID (100..999999999, ASCII digits)"),
    (["plan", "100", "--bundle", "x", "--port", "8k"], "expected a whole number"),
    (["verify", "100", "--probe-timeout", "soon"], "expected a number (given: 'soon')"),
    (["plan", "100", "--host", "h", "--port", "70000"], "port (from command line): must be "
     "65535 or less"),
    (["plan", "100", "--host", "h", "--auth", "x"], "expected one of 'auto', 'token' or "
     "'password'"),
])
def test_usage_errors_are_in_pvefix_words_not_pydantic(
        args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 1
    err = capsys.readouterr().err
    assert said in err and "Input should" not in err and "Traceback" not in err


def test_every_example_names_a_command_that_parses() -> None:
    known = {p for p, _ in ALL}
    for path, lines in EXAMPLES.items():
        assert path in known, path
        for line in lines:
            words = line.split(">")[0].split()[1:]
            assert " ".join(words[: len(path.split())]) == path, line


def test_a_short_option_means_one_thing_everywhere() -> None:
    meaning: dict[str, set[str]] = {}
    for _, command in ALL:
        for param in command.params:
            longs = tuple(o for o in getattr(param, "opts", []) if o.startswith("--"))
            for short in (o for o in getattr(param, "opts", []) if len(o) == 2):
                meaning.setdefault(short, set()).add(longs[-1] if longs else "")
    # -o: write this command's output to a file (check: --out, desired: --out).
    assert {k: v for k, v in meaning.items() if len(v) > 1} == {}


def test_completion_is_on() -> None:
    # What the installed bash completion function asks pvefix (`--install-completion`).
    env = {**os.environ, "_PVEFIX_COMPLETE": "complete_bash", "COMP_WORDS": "pvefix pl",
           "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "pvefix"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["plan"]


def test_xdg_config_home_is_read(tmp_path: Path) -> None:
    (tmp_path / "pvefix").mkdir()
    (tmp_path / "pvefix" / "config.toml").write_text('[profiles.lab]\nhost = "xdg-host"\n')
    conn = resolve_connection(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert conn.host == "xdg-host"
    # A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    assert resolve_connection(env={"XDG_CONFIG_HOME": "rel", "HOME": str(tmp_path)}).host is None


@pytest.mark.parametrize(("value", "host", "port"), [
    ("pve.lab", "pve.lab", 8006),
    ("pve.lab:8443", "pve.lab", 8443),
    ("https://pve.lab:8443/", "pve.lab", 8443),
    ("https://pve.lab/", "pve.lab", 8006),
    ("[2001:db8::1]:8443", "2001:db8::1", 8443),
    ("2001:db8::1", "2001:db8::1", 8006),
])
def test_a_host_is_taken_as_people_write_it(value: str, host: str, port: int) -> None:
    conn = resolve_connection(env={"PROXMOX_HOST": value})
    assert (conn.host, conn.port) == (host, port)


def test_a_port_flag_wins_over_the_port_in_the_host() -> None:
    conn = resolve_connection(env={"PROXMOX_HOST": "pve.lab:8443"}, flags={"port": 9000})
    assert conn.port == 9000


def test_a_bad_port_in_the_host_is_an_error_not_a_traceback() -> None:
    with pytest.raises(ParseError, match="port is not a number"):
        resolve_connection(env={"PROXMOX_HOST": "pve.lab:http"})


def test_peers_environment_names_and_their_precedence() -> None:
    bpg = {"PROXMOX_VE_ENDPOINT": "https://bpg.lab:8443/",
           "PROXMOX_VE_API_TOKEN": "root@pam!tf=uuid-secret", "PROXMOX_VE_INSECURE": "true"}
    conn = resolve_connection(env=bpg)
    assert (conn.host, conn.port, conn.token_id, conn.insecure) == (
        "bpg.lab", 8443, "root@pam!tf", True)
    assert conn.token_secret is not None and conn.token_secret.get_secret_value() == "uuid-secret"
    # pvefix's own and community.proxmox's names win over bpg's.
    ours = resolve_connection(env={**bpg, "PROXMOX_HOST": "ours", "PROXMOX_VALIDATE_CERTS": "1"})
    assert (ours.host, ours.port, ours.insecure) == ("ours", 8006, False)
    with pytest.raises(ParseError, match="user@realm!name=secret") as err:
        resolve_connection(env={"PROXMOX_VE_API_TOKEN": "no-secret-here"})
    assert "no-secret-here" not in str(err.value)
