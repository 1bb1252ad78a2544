"""Connection settings: layers in order, profiles, and secrets that never show."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from pvefix.errors import ParseError, PvefixError
from pvefix.target.settings import Connection, resolve_connection

SECRET = "s3cr3t-Value-42"


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body)
    return path


def _ready(tmp_path: Path, **extra: object) -> Path:
    data = {
        "api_url": "https://127.0.0.1:9443", "node": "simnode", "user": "root@pam",
        "password": SECRET, "token_id": "root@pam!pvefix", "token_secret": SECRET,
        "ca_cert": "/tmp/ca.pem", "ssh_host": "127.0.0.1", "ssh_port": 2222,
        "ssh_user": "root", "ssh_key": "/tmp/key", "known_hosts": "/tmp/kh", **extra,
    }
    path = tmp_path / "ready.json"
    path.write_text(json.dumps(data))
    return path


LAYERED = """
default_profile = "lab"
[profiles.lab]
host = "from-file"
node = "file-node"
timeout = 45
user = "root@pam"
[profiles.prod]
host = "prod.example"
"""


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    config = _config(tmp_path, LAYERED)
    env = {"PROXMOX_HOST": "from-env", "PVEFIX_TIMEOUT": "50", "PVEFIX_SSH_PORT": "2200"}
    only_file = resolve_connection(config=config, env={})
    assert (only_file.host, only_file.timeout, only_file.node) == ("from-file", 45, "file-node")
    with_env = resolve_connection(config=config, env=env)
    assert (with_env.host, with_env.timeout, with_env.ssh_port) == ("from-env", 50, 2200)
    with_flags = resolve_connection(config=config, env=env, flags={"host": "from-flag"})
    assert (with_flags.host, with_flags.timeout) == ("from-flag", 50)
    with_ready = resolve_connection(
        config=config, env=env, flags={"host": "from-flag", "timeout": 70.0},
        connection_file=_ready(tmp_path),
    )
    assert (with_ready.host, with_ready.port, with_ready.node) == ("127.0.0.1", 9443, "simnode")
    assert with_ready.timeout == 70.0  # the ready file says nothing of timeouts
    assert with_ready.node == "simnode"


def test_the_profile_flag_beats_the_default_profile_and_the_env(tmp_path: Path) -> None:
    config = _config(tmp_path, LAYERED)
    assert resolve_connection(config=config, env={}).profile == "lab"
    chosen = resolve_connection(config=config, env={"PVEFIX_PROFILE": "prod"})
    assert (chosen.profile, chosen.host) == ("prod", "prod.example")
    chosen = resolve_connection(config=config, profile="lab", env={"PVEFIX_PROFILE": "prod"})
    assert chosen.host == "from-file"


def test_an_unknown_profile_is_an_error_listing_the_known_ones(tmp_path: Path) -> None:
    config = _config(tmp_path, LAYERED)
    with pytest.raises(ParseError, match=r"no profile 'nope' \(profiles: lab, prod\)"):
        resolve_connection(config=config, profile="nope", env={})


def test_an_unknown_key_is_named_with_its_file(tmp_path: Path) -> None:
    config = _config(tmp_path, '[profiles.a]\nhots = "x"\n')
    with pytest.raises(ParseError) as err:
        resolve_connection(config=config, env={})
    assert str(config) in str(err.value) and "profiles.a.hots" in str(err.value)


def test_a_toml_syntax_error_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    config = _config(tmp_path, '[profiles.a]\nhost = "x"\nport = \n')
    with pytest.raises(ParseError) as err:
        resolve_connection(config=config, env={})
    assert str(err.value).startswith(f"{config}:3: not valid TOML: Invalid value")


def test_no_config_file_at_the_default_place_is_fine(tmp_path: Path) -> None:
    conn = resolve_connection(env={"HOME": str(tmp_path), "PROXMOX_HOST": "h"})
    assert conn.host == "h" and conn.timeout == 30.0


def test_an_explicit_config_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="config file not found"):
        resolve_connection(config=tmp_path / "none.toml", env={})


def test_secrets_come_from_files_commands_and_env(tmp_path: Path) -> None:
    secret_file = tmp_path / "token"
    secret_file.write_text(SECRET + "\n")
    config = _config(tmp_path, f"""
[profiles.a]
host = "h"
user = "root@pam"
token_id = "pvefix"
token_secret_file = "{secret_file}"
password_command = "{sys.executable} -c 'print(\\"pw-from-command\\")'"
ssh_password_env = "MY_SSH_PW"
""")
    conn = resolve_connection(config=config, env={"MY_SSH_PW": "ssh-pw"})
    assert conn.token_secret is not None and conn.token_secret.get_secret_value() == SECRET
    assert conn.password is not None
    assert conn.password.get_secret_value() == "pw-from-command"
    assert conn.ssh_password is not None and conn.ssh_password.get_secret_value() == "ssh-pw"
    assert (conn.auth_method, conn.api_user) == ("token", "root@pam!pvefix")


def test_a_failing_password_command_names_the_key_not_the_output(tmp_path: Path) -> None:
    config = _config(tmp_path, f"""
[profiles.a]
password_command = "{sys.executable} -c 'print(\\"{SECRET}\\"); raise SystemExit(3)'"
""")
    with pytest.raises(ParseError) as err:
        resolve_connection(config=config, env={})
    assert "password_command" in str(err.value) and "exited with 3" in str(err.value)
    assert SECRET not in str(err.value)


def test_secrets_never_appear_in_repr_str_errors_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    conn = resolve_connection(connection_file=_ready(tmp_path), env={})
    for text in (repr(conn), str(conn), conn.model_dump_json(), f"{conn}"):
        assert SECRET not in text
    logging.getLogger("pvefix").info("connection: %s %r", conn, conn)
    with pytest.raises(ParseError) as err:
        resolve_connection(
            connection_file=_ready(tmp_path), env={"PROXMOX_PASSWORD": SECRET},
            flags={"timeout": "soon"},
        )
    assert SECRET not in str(err.value) and "timeout (from command line)" in str(err.value)
    with pytest.raises(PvefixError) as err2:
        Connection(host="h", user="root@pam", auth="token").check_ready()
    assert "token_id" in str(err2.value)
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err + caplog.text


def test_a_token_wins_over_a_password_unless_auth_says_otherwise(tmp_path: Path) -> None:
    ready = _ready(tmp_path)
    assert resolve_connection(connection_file=ready, env={}).auth_method == "token"
    conn = resolve_connection(connection_file=ready, env={}, flags={"auth": "password"})
    assert (conn.auth_method, conn.api_user) == ("password", "root@pam")


def test_fingerprints_are_normalised_and_checked() -> None:
    colons = ":".join(["AB"] * 32)
    assert Connection(fingerprint=colons).fingerprint == "ab" * 32
    with pytest.raises(ValueError, match="SHA-256"):
        Connection(fingerprint="abcd")


def test_env_booleans_and_numbers_are_parsed() -> None:
    conn = resolve_connection(env={
        "PVEFIX_INSECURE": "yes", "PVEFIX_SSH": "0", "PVEFIX_TIMEOUT": "12.5",
        "PVEFIX_ACCEPT_NEW_HOST_KEY": "true",
    })
    assert (conn.insecure, conn.ssh, conn.timeout, conn.accept_new_host_key) == (
        True, False, 12.5, True
    )
    with pytest.raises(ParseError, match="insecure: expected a boolean"):
        resolve_connection(env={"PVEFIX_INSECURE": "maybe"})


def test_the_config_example_in_the_docs_uses_only_known_keys(tmp_path: Path) -> None:
    import re
    import tomllib

    from pvefix.target.settings import SECRET_FIELDS, SECRET_SOURCES

    doc = (Path(__file__).parents[2] / "docs" / "connection.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.S)
    assert example is not None
    data = tomllib.loads(example.group(1))
    assert data["default_profile"] in data["profiles"]
    for name, table in data["profiles"].items():
        for key in table:
            base, _, kind = key.rpartition("_")
            known = key in Connection.model_fields or (
                base in SECRET_FIELDS and kind in SECRET_SOURCES
            )
            assert known, f"profiles.{name}.{key}"
    # And the default profile resolves once its secret file exists.
    secret = tmp_path / "kpro6.token"
    secret.write_text(SECRET)
    text = example.group(1).replace("~/.config/pvefix/kpro6.token", str(secret))
    conn = resolve_connection(config=_config(tmp_path, text), env={})
    assert (conn.profile, conn.api_user, conn.timeout) == ("kpro6", "root@pam!pvefix", 60)
