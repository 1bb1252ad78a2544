"""`--local`: pvefix on the Proxmox node itself applies, checks and rolls back, with the API
through `pvesh` and files directly, against a host tree root.

The node's own tools are stand-ins on PATH (tests/executor/fake_node_tools.py) that forward to a
running simulator, so the real subprocess path is exercised and Proxmox's decisions stay the
simulator's (sysfs links are answered by its `readlink`/`grep`/`lspci`, as a host tree stores
sysfs without them); the files pvefix reads and writes directly are the simulator's own tree (a
node's layout: /etc/pve/nodes/NODE/qemu-server beside /etc/pve/qemu-server, as pmxcfs shows).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_OK, EXIT_REFUSED
from pvefix.target.nodes import NodeMismatch
from pvefix.target.sessions import Sessions
from pvefix.target.settings import Connection
from tests.executor.conftest import Node

FAKE = Path(__file__).with_name("fake_node_tools.py")
TOOLS = ("pvesh", "qm", "proxmox-boot-tool", "update-grub", "hostname", "readlink", "grep",
         "lspci")


def _on_the_node(n: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The node's tools first on PATH, and its root as pvefix's local root."""
    tools = tmp_path / "node-bin"
    tools.mkdir()
    for name in TOOLS:
        script = tools / name
        script.write_text(
            f"#!{sys.executable}\nimport sys\nsys.argv[0] = {name!r}\n"
            f"sys.path.insert(0, {str(FAKE.parents[2])!r})\n"
            "from tests.executor.fake_node_tools import main\nsys.exit(main())\n"
        )
        script.chmod(0o755)
    root = n.sim.state.tree.root
    nodes = root / "etc/pve/nodes" / n.info.node
    nodes.mkdir(parents=True, exist_ok=True)
    if not (nodes / "qemu-server").exists():
        (nodes / "qemu-server").symlink_to(Path("../../qemu-server"))
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PVEFIX_FAKE_READY", str(n.ready_file))
    monkeypatch.setenv("PVEFIX_LOCAL_ROOT", str(root))
    for name in ("PVEFIX_CONNECTION", "PROXMOX_HOST", "PVEFIX_HOST"):
        monkeypatch.delenv(name, raising=False)
    return root


def _cli(n: Node, *args: str) -> int:
    return run_app(build_command(), [*args, "--local", "--state-dir", str(n.state_dir)])


def test_apply_check_and_rollback_run_on_the_node_itself(
    node: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    n = node("kpro6")  # type: ignore[operator]
    root = _on_the_node(n, tmp_path, monkeypatch)
    conf = n.sim.state.tree.vm_config_path(100)
    before = conf.read_bytes()
    assert _cli(n, "plan", "100") == 2  # changes planned
    assert _cli(n, "apply", "100", "--phase", "1", "--yes") == EXIT_OK
    after = conf.read_text()
    assert "machine: q35" in after, "written through pvesh, with the digest, into the node"
    out = capsys.readouterr().out
    assert "pvefix rollback" in out
    # What to run next stays on the node, and never asks it to reboot itself (refused below).
    assert f"\nNext: pvefix apply 100 --phase 2 --local --state-dir {n.state_dir}\n" in out
    # Phase 2 edits /etc/kernel/cmdline directly and refreshes with the node's own tool.
    assert _cli(n, "apply", "100", "--phase", "2", "--yes") == EXIT_OK
    assert "iommu=pt" in (root / "etc/kernel/cmdline").read_text()
    assert _cli(n, "rollback", "100", "--yes") == EXIT_OK  # the newest: phase 2's
    assert "iommu=pt" not in (root / "etc/kernel/cmdline").read_text()
    assert _cli(n, "rollback", "100", "--yes") == EXIT_OK  # then phase 1's
    assert conf.read_bytes() == before, "rolled back byte for byte"
    capsys.readouterr()
    # apply recorded the goal as the desired state; the rolled-back VM has drifted from it.
    assert _cli(n, "check", "100") == 2
    assert "machine" in capsys.readouterr().out


def test_a_refresh_longer_than_timeout_runs_to_its_end_on_the_node_itself(
    node: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The refresh asks for its own time (300 s), not --timeout's: it was killed at --timeout
    # and reported as "exited with 124".
    n = node("kpro6")  # type: ignore[operator]
    root = _on_the_node(n, tmp_path, monkeypatch)
    assert _cli(n, "apply", "100", "--phase", "1", "--yes") == EXIT_OK
    monkeypatch.setenv("PVEFIX_FAKE_SLOW_REFRESH", "6")
    assert _cli(n, "apply", "100", "--phase", "2", "--yes", "--timeout", "5") == EXIT_OK
    assert "iommu=pt" in (root / "etc/kernel/cmdline").read_text()
    assert "exited with 124" not in capsys.readouterr().err  # (pytest-124 may name tmp)


def test_a_host_reboot_from_the_node_itself_is_refused(
    node: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    n = node("kpro6")  # type: ignore[operator]
    root = _on_the_node(n, tmp_path, monkeypatch)
    cmdline = (root / "etc/kernel/cmdline").read_text()
    assert _cli(n, "apply", "100", "--phase", "2", "--yes", "--reboot-host") == EXIT_REFUSED
    assert "reboot" in capsys.readouterr().err
    assert (root / "etc/kernel/cmdline").read_text() == cmdline, "nothing was written"


def test_on_a_real_node_the_vm_must_live_on_this_host(
    node: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = node("kpro6")  # type: ignore[operator]
    _on_the_node(n, tmp_path, monkeypatch)
    conn = Connection(backend="local", local_root=Path("/"), timeout=10)
    with pytest.raises(NodeMismatch):
        Sessions(conn).claim("some-other-node")  # `hostname` names kpro6


def test_a_task_longer_than_the_api_timeout_and_the_printed_undo_keep_local(
    node: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # pvesh runs a worker in the foreground: a config task that outlasts --timeout (the API's
    # answer time) still has --task-timeout, as over HTTPS where pvefix polls the task.
    # Margins for a loaded machine: a read of the simulated pvesh must answer within --timeout
    # (it failed at 2.5 s under a full parallel run), the task must outlast it.
    n = node("kpro6", task_seconds=9)  # type: ignore[operator]
    _on_the_node(n, tmp_path, monkeypatch)
    conf = n.sim.state.tree.vm_config_path(100)
    before = conf.read_bytes()
    assert _cli(n, "apply", "100", "--phase", "1", "--yes", "--timeout", "6") == EXIT_OK
    assert "machine: q35" in conf.read_text()
    undo = capsys.readouterr().out.split("to undo: ", 1)[1].splitlines()[0]
    assert "--local" in undo.split(), "the printed rollback reaches the same node the same way"
    assert run_app(build_command(), [*undo.split()[1:], "--yes"]) == EXIT_OK
    assert conf.read_bytes() == before
