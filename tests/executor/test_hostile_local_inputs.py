"""Files and arguments an admin (or a pull request) hands pvefix: a FIFO or a device is refused
before reading, naming it; every number of a plan file is checked before anything is read from
or written to the node; VMIDs are checked as Proxmox checks them; no argument gives a
traceback."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pvefix.cli import build_command
from pvefix.commands.run import run_app
from pvefix.errors import EXIT_ERROR, PvefixError
from pvefix.executor.snapshot import list_snapshots
from pvefix.flow.planfile import load_plan_file, save_plan
from pvefix.planner import plan as make_plan
from pvefix.sources.live import read_live
from tests.executor.conftest import Node

app = build_command()


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO nobody writes to. Should pvefix open it blocking, a writer comes after 5 s and
    closes at once: the test then fails on the message, it does not hang."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    done = threading.Event()

    def unblock() -> None:
        if not done.wait(5):
            fd = os.open(path, os.O_RDWR)  # a writer for a blocked reader, gone at once
            os.close(fd)

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    yield path
    done.set()
    thread.join()


def _commands(path: str) -> dict[str, list[str]]:
    bundle = str(Path(__file__).parent)  # any folder: the file is refused before it is used
    return {
        "plan file": ["apply", path, "--phase", "1", "--host", "127.0.0.1"],
        "desired file": ["check", "100", "--desired", path, "--bundle", bundle],
        "inspect config": ["inspect", "config", path],
        "inspect cmdline": ["inspect", "cmdline", path],
        "profile": ["plan", "100", "--config", path, "--profile", "x", "--host", "127.0.0.1"],
    }


@pytest.mark.parametrize("what", list(_commands("x")))
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_naming_it(
    what: str, special: str, fifo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(fifo) if special == "fifo" else special
    code = run_app(app, _commands(path)[what])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR, err
    assert f"{path}: is not a regular file" in err
    assert "Traceback" not in err


def test_a_directory_as_a_plan_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PvefixError, match="is a directory"):
        load_plan_file(tmp_path)


def _plan_data(n: Node) -> dict[str, Any]:
    return make_plan(read_live(n.conn(), 100)).to_json_dict()


def _edit(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        here: Any = data
        for part in parents:
            here = here[int(part)] if isinstance(here, list) else here[part]
        here[int(last) if isinstance(here, list) else last] = value
    return edit


BAD_NUMBERS = [
    ("options.clique_map", {"hostpci0": -1}, "options.clique_map.hostpci0"),
    ("options.clique_map", {"hostpci0": 99}, "options.clique_map.hostpci0"),
    ("options.clique_map", {"hostpci0": True}, "options.clique_map.hostpci0"),
    ("options.clique_map", {"hostpci16": 0}, "options.clique_map.hostpci16"),
    ("options.clique_map", {"hostpci01": 0}, "options.clique_map.hostpci01"),
    ("phases.0.number", 0, "phases.0.number"),
    ("phases.0.number", 99, "phases.0.number"),
    ("phases.0.number", -1, "phases.0.number"),
    ("phases.0.number", 1.5, "phases.0.number"),
    ("observed.vmid", 5, "observed.vmid"),
    ("observed.vmid", -100, "observed.vmid"),
    ("observed.vmid", 10**12, "observed.vmid"),
    ("observed.vmid", "100", "observed.vmid"),
]


@pytest.mark.parametrize("field,value,named", BAD_NUMBERS,
                         ids=[f"{f}={v}" for f, v, _ in BAD_NUMBERS])
def test_every_number_of_a_plan_file_is_checked_naming_the_field(
    node: Callable[..., Node], tmp_path: Path, field: str, value: Any, named: str
) -> None:
    n = node("kpro6")
    data = _plan_data(n)
    _edit(field, value)(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PvefixError) as caught:
        load_plan_file(path)
    assert caught.value.exit_code == EXIT_ERROR
    assert f"invalid plan: {named}" in str(caught.value)


@pytest.mark.parametrize("clique", [-1, 99])
def test_apply_of_a_plan_with_a_bad_clique_writes_nothing(
    node: Callable[..., Node], tmp_path: Path, clique: int, capsys: pytest.CaptureFixture[str]
) -> None:
    n = node("kpro6")
    data = _plan_data(n)
    data["options"] = {**data["options"], "p2p": True, "clique_map": {"hostpci0": clique}}
    path = save_plan(data, str(tmp_path / "plan.json"))
    before = n.fingerprint(100)
    code = run_app(app, ["apply", str(path), "--phase", "1", "--yes", "--restart",
                         "--connection", str(n.ready_file), "--state-dir", str(n.state_dir)])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR, err
    assert "options.clique_map.hostpci0" in err and "Traceback" not in err
    assert n.fingerprint(100) == before
    assert list_snapshots(n.state_dir) == []
