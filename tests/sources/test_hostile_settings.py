"""No traceback from a file or setting a user or an attacker controls: plan files,
connection (ready) files, config profiles, known_hosts, stdin. Each bad input ends in a
PvefixError naming its source (hypothesis tries many; max_examples stays modest)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import paramiko
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pvefix.errors import ParseError, PvefixError
from pvefix.flow.planfile import load_plan_file
from pvefix.main import main
from pvefix.target.settings import ready_file_layer, resolve_connection
from pvefix.target.ssh import load_known_hosts

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
HOSTILE = [
    b"[" * 100_000 + b"]" * 100_000,  # deep JSON
    b'{"schema": "pvefix.plan/v1", "x": ' + b"9" * 4301 + b"}",  # past int's digit limit
    b"\xff\xfe{}",  # invalid UTF-8
    b'{"schema": "pvefix.plan/v1"}',
    b'{"schema": "pvefix.plan/v1", "phases": [{"number": "x"}]}',
    b'{"api_url": "https://h:99999999"}',
    b'{"api_url": ["x"]}',
    b'{"api_url": "https://h", "port": {"a": 1}, "password": [1]}',
    b"",
]


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_plan_and_connection_files_are_errors_not_tracebacks(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(data)
    with pytest.raises(PvefixError):
        load_plan_file(path)
    with pytest.raises(PvefixError):
        resolve_connection(connection_file=path, env={})


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_as_a_plan_or_connection_file_are_an_error_or_a_value(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "fuzz.json"
    path.write_bytes(data)
    for read in (load_plan_file, ready_file_layer, lambda p: resolve_connection(
            connection_file=p, env={})):
        try:
            read(path)
        except PvefixError:
            pass


@FUZZ
@given(st.dictionaries(st.sampled_from(["api_url", "node", "user", "password", "token_id",
                                        "token_secret", "ssh_port", "ssh_host", "known_hosts"]),
                       st.none() | st.booleans() | st.integers() | st.text(max_size=40)
                       | st.lists(st.integers(), max_size=2)))
def test_any_json_object_as_a_connection_file_is_an_error_or_a_connection(
    tmp_path: Path, data: dict[str, object]
) -> None:
    path = tmp_path / "ready.json"
    path.write_text(json.dumps(data))
    try:
        resolve_connection(connection_file=path, env={})
    except PvefixError:
        pass


def test_a_fifo_as_a_config_or_connection_file_does_not_hang(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ParseError, match="not a regular file"):
        resolve_connection(connection_file=fifo, env={})
    with pytest.raises(ParseError, match="not a regular file"):
        resolve_connection(config=fifo, env={})


KEY = paramiko.Ed25519Key.from_private_key_file
GOOD = ("AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl")


def test_known_hosts_markers_and_bad_lines_are_skipped_and_revoked_is_honoured(
    tmp_path: Path
) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("\n".join([
        f"@cert-authority *.example ssh-ed25519 {GOOD}",
        f"@revoked * ssh-ed25519 {GOOD}",
        f"node1 ssh-ed25519 {GOOD}",  # revoked: not trusted
        "node2 ssh-ed25519 !!!not-base64!!!",
        "node3 ssh-rsa",
        "node4 ssh-unknown AAAA",
        "@weird marker",
        "\x00\xff garbage",
        "",
    ]) + "\n")
    known = load_known_hosts(path)
    assert known.revoked == {f"ssh-ed25519 {GOOD}"}
    assert all(known.keys_for(f"node{i}") == [] for i in range(1, 5))


@FUZZ
@given(st.lists(st.text(max_size=80) | st.sampled_from([
    f"h ssh-ed25519 {GOOD}", "@revoked", "@cert-authority h", f"@revoked h ssh-ed25519 {GOOD}",
    "|1|abc|def ssh-ed25519 AAAA", "h ssh-ed25519 AAAA==="]), max_size=12))
def test_any_known_hosts_text_loads_without_a_traceback(tmp_path: Path,
                                                        lines: list[str]) -> None:
    path = tmp_path / "kh"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    known = load_known_hosts(path)
    for name in ("h", "|1|abc|def"):
        known.keys_for(name)  # keys are parsed when a host is asked for: no traceback there


def test_a_secret_with_a_line_break_from_the_environment_is_refused_naming_the_field(
    tmp_path: Path
) -> None:
    with pytest.raises(ParseError) as caught:
        resolve_connection(env={"PROXMOX_HOST": "h", "PROXMOX_TOKEN_ID": "root@pam!x",
                                "PROXMOX_TOKEN_SECRET": "abc\ns3cr3t"})
    assert "token_secret" in str(caught.value) and "s3cr3t" not in str(caught.value)


def test_inspect_config_from_stdin_with_invalid_utf8_is_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    import io

    class Stdin(io.TextIOWrapper):
        pass

    for fmt in ("text", "json", "conf"):
        monkeypatch.setattr(sys, "stdin",
                            Stdin(io.BytesIO(b"boot: order=scsi0\n#caf\xe9\n\xff\n")))
        code = main(["inspect", "config", "-", "--format", fmt])
        out, err = capsysbinary.readouterr()
        assert code in (0, 1) and b"Traceback" not in err and b"Error" not in err
        if fmt == "conf":
            assert out == b"boot: order=scsi0\n#caf\xe9\n\xff\n", "byte for byte"
