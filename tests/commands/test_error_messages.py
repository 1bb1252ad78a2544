"""Errors a user can cause end in one line that says what and why, never a traceback; trust
refusals (TLS, SSH host key) share exit code 3. Against the simulator (real HTTPS)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pvefix.errors import EXIT_ERROR, EXIT_REFUSED
from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no user config file
    for name in ("PROXMOX_HOST", "PROXMOX_TOKEN_ID", "PROXMOX_TOKEN_SECRET", "PVEFIX_CA_CERT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _token_env(env: pytest.MonkeyPatch, info: ReadyInfo, secret: str | None = None) -> None:
    env.setenv("PROXMOX_TOKEN_ID", info.token_id)
    env.setenv("PROXMOX_TOKEN_SECRET", secret or info.token_secret)


def test_a_missing_ca_file_is_named(env: pytest.MonkeyPatch, kpro6_sim: ReadyInfo,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _token_env(env, kpro6_sim)
    env.setenv("PVEFIX_CA_CERT", "/nonexistent/ca.pem")
    code, err = _run(capsys, ["plan", "100", "--host", f"127.0.0.1:{kpro6_sim.api_port}",
                              "--no-ssh"])
    assert code == EXIT_ERROR and "CA file" in err and "/nonexistent/ca.pem" in err


def test_host_port_and_url_forms_reach_the_api(env: pytest.MonkeyPatch, kpro6_sim: ReadyInfo,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _token_env(env, kpro6_sim)
    env.setenv("PVEFIX_CA_CERT", kpro6_sim.ca_cert)
    for host in (f"127.0.0.1:{kpro6_sim.api_port}", f"{kpro6_sim.api_url}/"):
        env.setenv("PROXMOX_HOST", host)
        code, _ = _run(capsys, ["plan", "100", "--no-ssh"])
        assert code == 2, host
        capsys.readouterr()


def test_an_unreachable_host_says_errno_and_a_hint(
        env: pytest.MonkeyPatch, kpro6_sim: ReadyInfo, capsys: pytest.CaptureFixture[str]) -> None:
    _token_env(env, kpro6_sim)
    code, err = _run(capsys, ["plan", "100", "--host", f"127.0.0.1:{_free_port()}", "--no-ssh"])
    assert code == EXIT_ERROR
    assert "ECONNREFUSED" in err and "API port" in err


def test_a_wrong_token_secret_is_token_refused(
        env: pytest.MonkeyPatch, kpro6_sim: ReadyInfo, capsys: pytest.CaptureFixture[str]) -> None:
    _token_env(env, kpro6_sim, secret="not-the-secret")
    env.setenv("PVEFIX_CA_CERT", kpro6_sim.ca_cert)
    code, err = _run(capsys, ["plan", "100", "--host", f"127.0.0.1:{kpro6_sim.api_port}",
                              "--no-ssh"])
    assert code == EXIT_ERROR and "token refused" in err and "not-the-secret" not in err
    assert "cannot find the node" not in err


def test_an_unknown_vmid_names_the_nodes_looked_at(
        env: pytest.MonkeyPatch, kpro6_sim: ReadyInfo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _token_env(env, kpro6_sim)
    env.setenv("PVEFIX_CA_CERT", kpro6_sim.ca_cert)
    code, err = _run(capsys, ["plan", "999", "--host", f"127.0.0.1:{kpro6_sim.api_port}",
                              "--no-ssh"])
    assert code == EXIT_ERROR and "no QEMU VM 999" in err and f"{kpro6_sim.node}" in err
    ready = tmp_path / "ready.json"
    write_ready_file(kpro6_sim, ready)  # names the node: a different path, the same answer
    code, err = _run(capsys, ["plan", "999", "--connection", str(ready), "--no-ssh"])
    # The node the ready file names does not hold it: the cluster is searched, then named.
    assert code == EXIT_ERROR and f"nodes looked at: {kpro6_sim.node}" in err
    assert "500" not in err


def test_tls_and_ssh_trust_refusals_share_exit_code_3(
        env: pytest.MonkeyPatch, kpro6_sim: ReadyInfo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _token_env(env, kpro6_sim)
    code, err = _run(capsys, ["plan", "100", "--host", f"127.0.0.1:{kpro6_sim.api_port}",
                              "--no-ssh"])  # the system store does not know the sim's CA
    assert code == EXIT_REFUSED and "TLS certificate not trusted" in err
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    env.setenv("PVEFIX_CA_CERT", kpro6_sim.ca_cert)
    code, err = _run(capsys, [
        "plan", "100", "--host", f"127.0.0.1:{kpro6_sim.api_port}",
        "--ssh-host", kpro6_sim.ssh_host, "--ssh-port", str(kpro6_sim.ssh_port),
        "--ssh-key", kpro6_sim.ssh_key, "--known-hosts", str(empty)])
    assert code == EXIT_REFUSED and "not known" in err


def test_an_output_path_that_cannot_be_made_is_one_line(
        kpro6_sim: ReadyInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ready = tmp_path / "ready.json"
    write_ready_file(kpro6_sim, ready)
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, err = _run(capsys, ["desired", "100", "--connection", str(ready),
                              "-o", str(blocker / "sub" / "d.toml")])
    assert code == EXIT_ERROR and str(blocker) in err
