"""--local and the state directory against a local user: private modes whatever the umask, no
secret in a child's environment, atomic lock takeover, and the truth after a kill -9."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pvefix.errors import EXIT_ERROR, EXIT_OK
from pvefix.executor.locks import NODE_DIR, take_over, tombstone
from pvefix.store.statedir import ensure_private_dir
from pvefix.target.process import child_environment
from pvefix.target.sessions import Sessions
from tests.executor.conftest import Captured, Node
from tests.executor.test_local_backend import _cli, _on_the_node

REPO = Path(__file__).resolve().parents[2]
SECRETS = {"PROXMOX_PASSWORD": "pw-1", "PROXMOX_TOKEN_SECRET": "tok-2",
           "PROXMOX_VE_API_TOKEN": "root@pam!ci=tok-3", "PVEFIX_SSH_PASSWORD": "pw-4",
           "PVEFIX_GUEST_SSH_PASSWORD": "pw-5", "pvefix_api_secret": "s-6"}


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    yield
    os.umask(old)


def _modes(root: Path) -> dict[str, str]:
    """Every folder and file under `root` that is not 0700 / 0600."""
    wrong = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            mode = stat.S_IMODE(os.lstat(Path(folder) / name).st_mode)
            if mode != 0o700:
                wrong[str(Path(folder) / name)] = oct(mode)
        for name in files:
            mode = stat.S_IMODE(os.lstat(Path(folder) / name).st_mode)
            if mode != 0o600:
                wrong[str(Path(folder) / name)] = oct(mode)
    return wrong


def test_a_private_dir_and_its_new_parents_are_0700_under_umask_000(
    tmp_path: Path, umask_000: None
) -> None:
    ensure_private_dir(tmp_path / "state" / "desired" / "cluster-x")
    assert _modes(tmp_path / "state") == {}
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700


def test_local_apply_under_umask_000_keeps_everything_private(
    node: Callable[..., Node], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_000: None,
) -> None:
    n = node("kpro6")
    root = _on_the_node(n, tmp_path, monkeypatch)
    n.state_dir = tmp_path / "fresh" / "state"  # made by pvefix itself, parents too
    assert _cli(n, "apply", "100", "--phase", "1", "--yes") == EXIT_OK
    assert _modes(tmp_path / "fresh") == {}, "state dir, snapshots/, desired/, locks/"
    assert stat.S_IMODE((root / NODE_DIR.lstrip("/")).stat().st_mode) == 0o700


def test_no_secret_reaches_a_process_pvefix_starts(
    node: Callable[..., Node], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = node("kpro6")
    _on_the_node(n, tmp_path, monkeypatch)
    log = tmp_path / "env.jsonl"
    monkeypatch.setenv("PVEFIX_FAKE_ENV_LOG", str(log))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    assert _cli(n, "apply", "100", "--phase", "1", "--yes") == EXIT_OK
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert {r["tool"] for r in runs} >= {"pvesh", "readlink"}, "the node's tools ran"
    leaked = {name for r in runs for name in r["env"]} & set(SECRETS)
    assert leaked == set()
    assert all("PATH" in r["env"] for r in runs)


def test_the_child_environment_drops_secrets_only() -> None:
    env = {**SECRETS, "PATH": "/bin", "PVEFIX_STATE_DIR": "/s", "PROXMOX_HOST": "h",
           "PROXMOX_PASSWORD_FILE": "/run/pw", "LANG": "C"}
    assert child_environment(env) == {"PATH": "/bin", "PVEFIX_STATE_DIR": "/s",
                                      "PROXMOX_HOST": "h", "LANG": "C"}


def _lock_holder(n: Node) -> subprocess.Popen[str]:
    """A pvefix process that takes VM 100's locks as apply does, then waits (to be killed
    before its first write)."""
    script = (
        "import sys, time\nfrom pathlib import Path\n"
        "from pvefix.executor.locks import vm_lock\nfrom pvefix.target.sessions import Sessions\n"
        "from pvefix.target.settings import resolve_connection\n"
        f"conn = resolve_connection(connection_file=Path({str(n.ready_file)!r}))\n"
        "sessions = Sessions(conn)\n"
        f"with vm_lock(Path({str(n.state_dir)!r}), sessions, conn.node, 100, 'apply phase 1',"
        " print):\n"
        "    print('locked', flush=True)\n    time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_after_a_kill_9_before_the_first_write_rollback_and_apply_say_the_truth(
    node: Callable[..., Node], capsys: pytest.CaptureFixture[str],
) -> None:
    from pvefix.cli import build_command
    from pvefix.commands.run import run_app

    n = node("kpro6")
    argv = ["rollback", "100", "--yes", "--connection", str(n.ready_file),
            "--state-dir", str(n.state_dir)]
    proc = _lock_holder(n)
    try:
        assert run_app(build_command(), argv) == EXIT_ERROR
        err = capsys.readouterr().err
        assert "holds VM 100 now" in err and "apply phase 1" in err
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert run_app(build_command(), argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "ended before its first write" in err and "it wrote nothing" in err
    assert "nothing to roll back" not in err

    cap = Captured()
    n.apply(100, 1, captured=cap)  # the node lock of the dead process is taken over
    said = cap.err.getvalue()
    assert "cleared a stale local lock" in said and "cleared a stale lock on the node" in said
    assert not (n.state_dir / "locks" / "kpro6-100.lock").exists()
    assert n.host_file(f"{NODE_DIR}/vm-100.lock/owner") is None
    left = sorted(p.name for p in (n.sim.state.tree.root / NODE_DIR.lstrip("/")).iterdir())
    assert left == [], "no lock, no litter: the dead holder's tombstone went with the lock"


def test_a_second_taker_of_the_same_stale_lock_cannot_move_the_new_one(
    node: Callable[..., Node],
) -> None:
    """Two pvefix find the same dead holder's node lock. The first takes it over (its tombstone
    is named after the owner text read) and holds the VM; the second, late, renames 'the stale
    lock' to the same tombstone: that rename fails, so the first one's lock stays."""
    n = node("kpro6")
    folder = f"{NODE_DIR}/vm-100.lock"
    stale = json.dumps({"host": "x", "pid": 1, "user": "u", "action": "a", "since": 1.0})
    n.sim.state.write_host(f"{folder}/owner", stale)
    with Sessions(n.conn()) as sessions:
        host = sessions.at("kpro6")
        assert host.run_in_time(["mv", "-T", folder, tombstone(folder, stale)]).ok  # the first
        assert host.run_in_time(["mkdir", folder]).ok
        host.replace_file(f"{folder}/owner", "the first one's lock\n")
        late = host.run_in_time(["mv", "-T", folder, tombstone(folder, stale)])  # the second
        assert not late.ok
        assert host.read_file(f"{folder}/owner") == "the first one's lock\n"


def test_a_very_late_taker_puts_back_a_lock_that_is_not_the_one_it_read(
    node: Callable[..., Node],
) -> None:
    """The first taker released its lock and removed its tombstone; a third pvefix holds the
    VM now. A second taker whose read of the dead owner predates all that renames 'the stale
    lock': it sees an owner other than the one it read, puts the lock back and takes nothing."""
    n = node("kpro6")
    folder = f"{NODE_DIR}/vm-100.lock"
    stale = json.dumps({"host": "x", "pid": 1, "user": "u", "action": "a", "since": 1.0})
    with Sessions(n.conn()) as sessions:
        host = sessions.at("kpro6")
        assert host.run_in_time(["mkdir", "-p", folder]).ok
        host.replace_file(f"{folder}/owner", "the third one's lock\n")
        assert take_over(host, folder, stale) is None
        assert host.read_file(f"{folder}/owner") == "the third one's lock\n"
        assert host.read_file(f"{tombstone(folder, stale)}/owner") is None
