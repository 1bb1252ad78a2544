"""`pvefix sim serve` as a subprocess: ready file, state kept across restarts, clean SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import stat
from pathlib import Path

import pytest

from pvefix.sim.serve import spawn_simulator
from tests.simkit import api, run, ssh


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_serve_writes_the_ready_file_and_stops_cleanly(tmp_path: Path) -> None:
    ready_path = tmp_path / "ready.json"
    proc, info = spawn_simulator("kpro6", tmp_path / "tree", ready_path)
    try:
        data = json.loads(ready_path.read_text())
        assert stat.S_IMODE(ready_path.stat().st_mode) == 0o600
        for key in ("api_url", "node", "user", "password", "token_id", "token_secret",
                    "ca_cert", "ssh_host", "ssh_port", "ssh_user", "ssh_key", "known_hosts"):
            assert key in data, key
        assert data["token_id"] == "root@pam!pvefix" and data["user"] == "root@pam"
        assert Path(info.known_hosts).read_text().startswith(f"[127.0.0.1]:{info.ssh_port} ")
        assert api(info).nodes(info.node).qemu(100).config.get()["name"] == "llm-serve"
        assert run(ssh(info), "uname -r")[0] == 0
        api(info).nodes(info.node).qemu(101).config.put(cores=7)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert not _port_open(info.api_port)
    assert not _port_open(info.ssh_port)

    # Restart on the same root: state and secrets persist.
    proc, again = spawn_simulator("kpro6", tmp_path / "tree", ready_path)
    try:
        assert again.password == info.password
        assert api(again).nodes(again.node).qemu(101).config.get()["cores"] == 7
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0


def test_secrets_are_kept_private(tmp_path: Path) -> None:
    from pvefix.sim.tls import load_or_create_keys

    keys = load_or_create_keys(tmp_path, "kpro6", ["root@pam!pvefix"])
    for path in keys.dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(keys.dir.stat().st_mode) == 0o700


def test_sim_scenarios_lists_the_built_ins(capsys: pytest.CaptureFixture[str]) -> None:
    from pvefix.main import main

    assert main(["sim", "scenarios"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"kpro6", "intel-grub", "windows-igd", "large"} <= set(names)
