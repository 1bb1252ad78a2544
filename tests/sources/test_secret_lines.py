"""Secrets from files and commands are their first line; anything else is refused, never shown.

`pass show` prints the password and then more lines; a secret with a line break would end up in
an HTTP header (requests then raises with the whole header in its message). Each refusal names
the source and never the value.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pvefix.errors import ParseError
from pvefix.target.settings import resolve_connection

SECRET = "0c5f2b9e-7d31-4b8a-9f6e-2a1d3c4b5e6f"


def _profile(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        '[profiles.lab]\nhost = "pve.example"\ntoken_id = "root@pam!pvefix"\n' + line + "\n"
    )
    return path


def test_a_secret_file_gives_its_first_line(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(f"{SECRET}\nurl: https://pve.example\nuser: root\n")
    conn = resolve_connection(config=_profile(tmp_path, f'token_secret_file = "{secret}"'),
                              env={})
    assert conn.token_secret is not None
    assert conn.token_secret.get_secret_value() == SECRET


def test_a_secret_command_gives_its_first_line(tmp_path: Path) -> None:
    script = tmp_path / "pass.py"
    script.write_text(f"print('{SECRET}')\nprint('login: root')\n")
    line = f'token_secret_command = "{sys.executable} {script}"'
    conn = resolve_connection(config=_profile(tmp_path, line), env={})
    assert conn.token_secret is not None
    assert conn.token_secret.get_secret_value() == SECRET


@pytest.mark.parametrize("content", ["\n" + SECRET + "\n", "", "\r\n"])
def test_an_empty_first_line_is_refused_without_the_rest(tmp_path: Path, content: str) -> None:
    secret = tmp_path / "secret"
    secret.write_text(content)
    with pytest.raises(ParseError) as err:
        resolve_connection(config=_profile(tmp_path, f'token_secret_file = "{secret}"'), env={})
    assert "token_secret_file" in str(err.value)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("value", [SECRET + "\nX-Other: 1", SECRET + "\r", "a\tb" + SECRET])
def test_a_direct_secret_with_control_characters_is_refused_by_name(value: str) -> None:
    env = {"PROXMOX_HOST": "pve.example", "PROXMOX_TOKEN_ID": "root@pam!pvefix",
           "PROXMOX_TOKEN_SECRET": value}
    with pytest.raises(ParseError) as err:
        resolve_connection(env=env)
    assert "token_secret" in str(err.value)
    assert SECRET not in str(err.value) and value not in str(err.value)


def test_a_non_ascii_token_secret_is_refused_before_it_reaches_a_header() -> None:
    env = {"PROXMOX_HOST": "pve.example", "PROXMOX_TOKEN_ID": "root@pam!pvefix",
           "PROXMOX_TOKEN_SECRET": SECRET + "€"}
    with pytest.raises(ParseError) as err:
        resolve_connection(env=env)
    assert "non-ASCII" in str(err.value) and SECRET not in str(err.value)
