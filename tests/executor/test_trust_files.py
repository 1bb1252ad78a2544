"""Trust files as OpenSSH treats them: a private key or a profile holding a secret that others
may read (refused / warned, with the chmod), known_hosts in linear time, several keys for one
host, and a host that comes back from a reboot under another name (said at once)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from pvefix.errors import PvefixError
from pvefix.executor.power import ActivationError
from pvefix.target.settings import resolve_connection
from pvefix.target.ssh import (
    HostKeyChanged,
    HostKeyUnknown,
    SshShell,
    known_hosts_name,
    load_known_hosts,
)
from tests.executor.conftest import Captured, Node


def _other_key(kind: str = "ed25519") -> str:
    """A fresh public key as `type base64`, not the node's."""
    private = ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else \
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def _with_known_hosts(n: Node, tmp_path: Path, lines: list[str]) -> SshShell:
    path = tmp_path / "known_hosts"
    path.write_text("\n".join(lines) + "\n")
    conn = n.conn().model_copy(update={"known_hosts": str(path)})
    return SshShell(conn)


def _name_and_key(n: Node) -> tuple[str, str]:
    name = known_hosts_name(n.info.ssh_host, n.info.ssh_port)
    line = Path(n.info.known_hosts).read_text().splitlines()[0].split()
    return name, f"{line[1]} {line[2]}"


@pytest.mark.parametrize("right_first", [True, False], ids=["right-first", "right-second"])
def test_any_of_several_keys_for_a_host_is_accepted(
    node: Callable[..., Node], tmp_path: Path, right_first: bool
) -> None:
    n = node("kpro6")
    name, right = _name_and_key(n)
    wrong = _other_key()
    order = [right, wrong] if right_first else [wrong, right]
    shell = _with_known_hosts(n, tmp_path, [f"{name} {key}" for key in order])
    try:
        assert shell.run(["hostname"]).stdout.strip() == "kpro6"
    finally:
        shell.close()


def test_only_other_keys_of_its_type_is_changed_and_only_other_types_is_unknown(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("kpro6")
    name, _ = _name_and_key(n)
    with pytest.raises(HostKeyChanged, match="CHANGED"):
        _with_known_hosts(n, tmp_path, [f"{name} {_other_key()}", f"{name} {_other_key()}"])
    with pytest.raises(HostKeyUnknown, match="holds only ssh-rsa for it"):
        _with_known_hosts(n, tmp_path, [f"{name} {_other_key('rsa')}"])


def test_known_hosts_of_100000_lines_loads_in_linear_time(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("kpro6")
    name, right = _name_and_key(n)
    other = _other_key()
    lines = [f"host-{i}.example,10.{i >> 16}.{(i >> 8) & 255}.{i & 255} {other}"
             for i in range(100_000)]
    lines.insert(50_000, f"{name} {right}")
    path = tmp_path / "known_hosts"
    path.write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    keys = load_known_hosts(path).keys_for(name)
    seconds = time.perf_counter() - start
    assert [f"{k.get_name()} {k.get_base64()}" for k in keys] == [right]
    assert seconds < 1.0, f"{seconds:.2f} s for 100,000 lines"
    shell = _with_known_hosts(n, tmp_path, lines)  # and a real connection with it
    shell.close()


def test_a_private_key_others_may_read_is_refused_with_the_chmod(
    node: Callable[..., Node], tmp_path: Path
) -> None:
    n = node("kpro6")
    key = tmp_path / "id_ed25519"
    key.write_bytes(Path(n.info.ssh_key).read_bytes())
    for mode in (0o644, 0o640, 0o604):
        key.chmod(mode)
        conn = n.conn().model_copy(update={"ssh_key": str(key)})
        with pytest.raises(PvefixError) as caught:
            SshShell(conn)
        assert f"chmod 600 {key}" in str(caught.value)
        assert f"mode {mode:04o}" in str(caught.value)
    key.chmod(0o600)
    SshShell(n.conn().model_copy(update={"ssh_key": str(key)})).close()


@pytest.mark.parametrize("field", ["password", "token_secret", "ssh_password"])
def test_a_profile_with_a_secret_that_others_may_read_is_warned_with_the_chmod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    config = tmp_path / f"config-{field}.toml"
    config.write_text(f'[profiles.p]\nhost = "pve.example"\n{field} = "s3cr3t-value"\n')
    config.chmod(0o644)
    resolve_connection(config=config, profile="p", env={})
    err = capsys.readouterr().err
    assert f"{config} holds {field}" in err and f"chmod 600 {config}" in err
    assert "s3cr3t-value" not in err
    private = tmp_path / f"private-{field}.toml"
    private.write_text(config.read_text())
    private.chmod(0o600)
    resolve_connection(config=private, profile="p", env={})
    assert capsys.readouterr().err == ""


def test_a_secret_file_that_others_may_read_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cr3t-value\n")
    secret.chmod(0o644)
    config = tmp_path / "config.toml"
    config.write_text(f'[profiles.p]\nhost = "h"\npassword_file = "{secret}"\n')
    config.chmod(0o600)
    resolve_connection(config=config, profile="p", env={})
    err = capsys.readouterr().err
    assert f"chmod 600 {secret}" in err and "s3cr3t-value" not in err


def test_a_host_back_under_another_name_is_said_at_once(
    node: Callable[..., Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    n = node("kpro6", reboot_seconds=0.3)
    state = n.sim.state
    reboot = state.reboot

    def renamed(on_boot: Callable[[], None]) -> None:
        state.hostname = "pve-reinstalled"  # it boots with another name
        reboot(on_boot)

    monkeypatch.setattr(state, "reboot", renamed)
    start = time.monotonic()
    with pytest.raises(ActivationError) as caught:
        n.apply(100, 2, reboot_host=True, captured=Captured())
    assert time.monotonic() - start < 60, "said at once, not after the 900 s reboot timeout"
    message = str(caught.value)
    assert "under another name" in message and "pve-reinstalled" in message
    assert "did not come back" not in message


def test_a_hashed_name_of_the_host_is_accepted(node: Callable[..., Node], tmp_path: Path) -> None:
    import paramiko

    n = node("kpro6")
    name, right = _name_and_key(n)
    hashed = paramiko.HostKeys.hash_host(name)
    shell = _with_known_hosts(n, tmp_path, [f"{paramiko.HostKeys.hash_host('x')} {right}",
                                            f"{hashed} {right}"])
    shell.close()
    with pytest.raises(HostKeyUnknown):  # a hash of another name names nothing
        _with_known_hosts(n, tmp_path, [f"{paramiko.HostKeys.hash_host('x')} {right}"])
