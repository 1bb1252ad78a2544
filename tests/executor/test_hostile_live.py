"""Live targets with hostile or broken input: a VM config with non-UTF-8 bytes plans, applies,
rolls back byte for byte and records its desired state; secrets never reach an output when
anything around them fails; a node that refuses connections is "away", not "untrusted"."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import SecretStr

from pvefix.errors import PvefixError
from pvefix.main import main
from pvefix.sources.live import read_live
from pvefix.target.settings import Connection
from tests.executor.conftest import Node


def test_a_live_config_with_non_utf8_bytes_plans_applies_and_rolls_back(
    node: Callable[..., Node], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    n = node("kpro6")
    path = n.sim.state.tree.vm_config_path(100)
    path.write_bytes(b"#caf\xe9 au lait\n" + path.read_bytes())
    before = n.fingerprint(100)
    ready = ["--connection", str(n.ready_file), "--state-dir", str(n.state_dir)]
    assert main(["plan", "100", *ready[:2]]) == 2
    result = n.apply(100, 1)
    # Proxmox decodes the description as UTF-8 (a bad byte: U+FFFD) and escapes it again.
    assert n.conf(100).startswith(b"#caf%EF%BF%BD au lait\n")
    assert main(["desired", "100", *ready[:2]]) == 0
    n.rollback(100, result.snapshot_id)
    assert n.fingerprint(100) == before
    assert b"Traceback" not in capsysbinary.readouterr().err


SECRETS = ("wrong-token-secret-123", "wrong-password-456", "wrong-ssh-password-789")


def test_no_output_carries_a_secret_when_a_login_or_connection_fails(
    node: Callable[..., Node], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    base = n.conn()
    attempts = [
        base.model_copy(update={"auth": "token", "token_id": n.info.token_id,
                                "token_secret": SECRETS[0]}),  # refused by the API
        base.model_copy(update={"password": SECRETS[1]}),  # a wrong password
        base.model_copy(update={"ssh_key": None, "ssh_password": SECRETS[2]}),  # SSH fails
        base.model_copy(update={"port": _closed_port(), "password": SECRETS[1]}),
    ]
    messages = []
    for conn in attempts:
        conn = Connection.model_validate(
            {**conn.model_dump(), **{k: getattr(conn, k) for k in ("password", "token_secret",
                                                                   "ssh_password")}})
        with pytest.raises(PvefixError) as caught:
            read_live(conn, 100)
        messages.append(f"{caught.value!s} {caught.value!r} {caught.value.__cause__!r}")
    # Past the settings' own check (model_copy does not validate): requests' InvalidHeader
    # quotes the whole `PVEAPIToken=...=secret` header; pvefix names only its type.
    raw = base.model_copy(update={"auth": "token", "token_id": n.info.token_id,
                                  "token_secret": SecretStr(f"x\n{SECRETS[0]}")})
    with pytest.raises(PvefixError) as caught:
        read_live(raw, 100)
    messages.append(f"{caught.value!s} {caught.value!r} {caught.value.__cause__!r}")
    out = capsys.readouterr()
    blob = "\n".join([*messages, out.out, out.err])
    for secret in SECRETS:
        assert secret not in blob
    assert "the node is away" in messages[3]
    assert "TLS certificate not trusted" not in messages[3]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
