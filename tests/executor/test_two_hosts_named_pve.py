"""State never crosses hosts: two standalone hosts both named `pve` (the installer's default),
one state directory. A P2P wish recorded on one is not the other's, nor are its snapshots or
probe baselines; state written by earlier versions under the name alone is claimed once, by
the first of them that asks, and then is that host's only."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pvefix.hosttree import materialize_scenario
from pvefix.main import main
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.verify.store import probes_dir, store_report, stored_reports
from tests.simkit import state_key
from tests.verify.conftest import synthetic_report


def _named_pve(tmp_path: Path, label: str) -> Path:
    """A kpro6 host tree whose node is called `pve`."""
    tree = tmp_path / f"tree-{label}"
    materialize_scenario("kpro6", tree)
    for name in ("pvefix-host.json", "etc/pve/mapping/pci.cfg"):
        path = tree / name
        path.write_text(path.read_text().replace("kpro6", "pve"))
    return tree


@pytest.fixture
def two_pves(fresh_sim: Callable[..., ReadyInfo], tmp_path: Path) -> tuple[list[str], list[str]]:
    """The `--connection` arguments of host A and host B, both named pve."""
    args = []
    for label in ("a", "b"):
        info = fresh_sim(str(_named_pve(tmp_path, label)))
        assert info.node == "pve"
        ready = tmp_path / f"ready-{label}.json"
        write_ready_file(info, ready)
        args.append(["--connection", str(ready)])
    return args[0], args[1]


def _phases(capsys: pytest.CaptureFixture[str], *args: str) -> list[int]:
    main(["plan", "100", *args, "-f", "json"])
    (plan,) = json.loads(capsys.readouterr().out)["plans"]
    return [p["number"] for p in plan["phases"]]


def test_a_p2p_wish_and_snapshots_stay_with_their_host(
    two_pves: tuple[list[str], list[str]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = two_pves
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(tmp_path / "state"))
    assert main(["desired", "100", *a, "--p2p", "--record"]) == 0
    recorded = capsys.readouterr().err
    folders = sorted(p.name for p in (tmp_path / "state" / "desired").iterdir())
    assert len(folders) == 1 and folders[0].startswith("node-pve@"), folders
    assert folders[0] in recorded
    assert _phases(capsys, *a) == [1, 2, 3]  # A asked for the P2P phase
    assert _phases(capsys, *b) == [1, 2]  # B did not: A's wish is not B's

    assert main(["apply", "100", "--phase", "1", "--yes", *a]) == 0
    capsys.readouterr()
    assert main(["rollback", "100", "--yes", *b]) == 1  # B has no snapshot of VM 100
    assert "no snapshot of VM 100 to roll back" in capsys.readouterr().err
    assert main(["rollback", "100", "--yes", *a]) == 0


def test_state_of_earlier_versions_is_claimed_once_by_the_first_host_that_asks(
    fresh_sim: Callable[..., ReadyInfo], two_pves: tuple[list[str], list[str]],
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = two_pves
    state = tmp_path / "state"
    monkeypatch.setenv("PVEFIX_STATE_DIR", str(state))
    # As an earlier version recorded it: under the name alone.
    old = state / "desired" / "node-pve" / "100.toml"
    assert main(["desired", "100", *a, "--p2p", "-o", str(old)]) == 0
    capsys.readouterr()
    assert _phases(capsys, *b) == [1, 2, 3]  # B asks first: the old file becomes B's
    assert not old.exists()
    keyed = [p for p in (state / "desired").iterdir() if "@" in p.name]
    assert len(keyed) == 1 and (keyed[0] / "100.toml").is_file()
    assert _phases(capsys, *a) == [1, 2]  # and A no longer reads it
    assert _phases(capsys, *b) == [1, 2, 3]


def test_probe_baselines_are_kept_per_owner_and_old_ones_claimed_once(tmp_path: Path) -> None:
    report = synthetic_report(cell="OK", delivered=True, latency=0.5)
    old = store_report(tmp_path, 100, report)  # as before: probes/100/
    assert old.parent == tmp_path / "probes" / "100"
    mine, theirs = "node-pve@aaaaaaaaaaaa", "node-pve@bbbbbbbbbbbb"
    assert stored_reports(tmp_path, 100, mine) == [probes_dir(tmp_path, 100, mine) / old.name]
    assert not (tmp_path / "probes" / "100").exists()  # moved, once
    assert stored_reports(tmp_path, 100, theirs) == []
    kept = store_report(tmp_path, 100, report, theirs)
    assert kept.parent == tmp_path / "probes" / theirs / "100"
    assert len(stored_reports(tmp_path, 100, mine)) == 1


def test_the_identity_is_the_name_and_the_key_of_the_hosts_ca(
    two_pves: tuple[list[str], list[str]], tmp_path: Path,
) -> None:
    from pvefix.target.nodes import cluster_identity
    from pvefix.target.settings import resolve_connection

    seen = []
    for args in two_pves:
        info = ReadyInfo.model_validate_json(Path(args[1]).read_text())
        conn = resolve_connection(connection_file=Path(args[1]), env={}, config=None)
        seen.append(cluster_identity(conn))
        assert seen[-1] == state_key(info, "node-pve")
    assert seen[0] != seen[1]
