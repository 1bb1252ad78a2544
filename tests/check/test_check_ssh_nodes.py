"""`check` with a profile whose `[profiles.NAME.ssh.nodes]` names the node's SSH address (and
no SSH host of its own) reads the node there: it never first dials the API host's port 22, and a
healthy run says nothing of a node that is away (issue 36)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.target.settings import Connection

app = build_command()


def _profile(info: ReadyInfo, path: Path, *, ssh_host: str | None = None) -> Path:
    lines = ["[profiles.lab]", 'host = "127.0.0.1"', f"port = {info.api_port}",
             f'token_id = "{info.token_id}"', f'token_secret = "{info.token_secret}"',
             f'ca_cert = "{info.ca_cert}"', f'ssh_key = "{info.ssh_key}"',
             f'known_hosts = "{info.known_hosts}"', "ssh_agent = false"]
    if ssh_host:
        lines.append(f'ssh_host = "{ssh_host}"')
    lines += ["[profiles.lab.ssh.nodes]", f'{info.node} = "127.0.0.1:{info.ssh_port}"']
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def test_check_reads_the_node_where_ssh_nodes_says_and_nowhere_else(
    fresh_sim: Callable[..., ReadyInfo], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    info = fresh_sim("kpro6")
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    desired = tmp_path / "desired.toml"
    assert run_app(app, ["desired", "100", "--connection", str(ready), "-o", str(desired)]) == 0
    config = _profile(info, tmp_path / "config.toml")
    capsys.readouterr()
    code = run_app(app, ["check", "100", "--config", str(config), "--profile", "lab",
                         "--desired", str(desired)])
    out, err = capsys.readouterr()
    assert code == 2, out + err  # kpro6 is not fixed yet: drift, read in full
    said = out + err
    assert "away" not in said and "not read over SSH" not in said, said
    assert " 0 unknown" in said and "cmdline iommu=pt" in said, said  # the node was read


def test_the_cluster_session_goes_where_it_is_told() -> None:
    from pvefix.target.open import cluster_ssh

    base = Connection(host="pve.example", token_id="a@pam!b", token_secret="s",
                      ssh_nodes={"node2": "10.0.0.2:2222", "node1": "10.0.0.1"})
    assert (cluster_ssh(base).ssh_host, cluster_ssh(base).ssh_port) == ("10.0.0.1", 22)
    node2 = base.model_copy(update={"node": "node2"})
    assert (cluster_ssh(node2).ssh_host, cluster_ssh(node2).ssh_port) == ("10.0.0.2", 2222)
    given = base.model_copy(update={"ssh_host": "bastion", "ssh_port": 2200})
    assert cluster_ssh(given) == given, "an SSH host given wins"
    plain = Connection(host="pve.example", token_id="a@pam!b", token_secret="s")
    assert cluster_ssh(plain).effective_ssh_host == "pve.example"
