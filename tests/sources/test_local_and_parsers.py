"""The local backend over a host tree, and the parsers of remote answers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvefix.errors import PvefixError
from pvefix.facts.parse import acs_from_lspci
from pvefix.facts.sysfs import grep_files, readlink_lines
from pvefix.hostfacts import boot_tool_facts, file_fact
from pvefix.hosttree import resolve_scenario
from pvefix.sources import remote_facts as rf
from pvefix.sources.live import read_live
from pvefix.target.local import LocalApi, LocalShell
from pvefix.target.settings import Connection
from pvefix.target.ssh import CommandResult


def test_the_local_shell_reads_files_under_its_root() -> None:
    root = resolve_scenario("kpro6")
    shell = LocalShell(root)
    got = shell.run(["cat", "/etc/kernel/cmdline"])
    assert (got.exit_code, got.stdout) == (0, (root / "etc/kernel/cmdline").read_text())
    missing = shell.run(["cat", "/etc/nope"])
    assert missing.exit_code == 1 and "No such file" in missing.stderr
    assert file_fact("/etc/nope", missing).text is None


def test_the_local_backend_says_clearly_when_pvesh_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PvefixError, match="needs `pvesh`, which is not on PATH"):
        LocalApi()
    conn = Connection(backend="local", local_root=resolve_scenario("kpro6"), node="kpro6")
    with pytest.raises(PvefixError, match="pvesh"):
        read_live(conn, 100)


def test_a_command_that_is_not_there_answers_127_like_a_shell(tmp_path: Path) -> None:
    shutil.rmtree(tmp_path)
    result = LocalShell(tmp_path).run(["surely-not-a-command-pvefix"])
    assert result.exit_code == 127
    assert boot_tool_facts(result).exit_code is None


def test_acs_lines_are_read_per_port() -> None:
    text = (
        "0000:40:01.1 PCI bridge: AMD Device 14ab\n"
        "\tCapabilities: [2a0 v1] Access Control Services\n"
        "\t\tACSCap:\tSrcValid+ TransBlk+\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk-\n\n"
        "0000:41:00.0 VGA compatible controller: NVIDIA Device 2bb5\n"
        "\tKernel driver in use: vfio-pci\n"
    )
    assert acs_from_lspci(text) == {"0000:40:01.1": "SrcValid+ TransBlk-"}


def test_a_readlink_answer_with_missing_lines_is_an_error() -> None:
    result = CommandResult(("readlink", "-m", "a", "b"), 0, "/x\n", "")
    with pytest.raises(PvefixError, match="1 lines for 2 paths"):
        readlink_lines(result, ["a", "b"])


def test_sysfs_paths_give_the_parent_bridges() -> None:
    path = "/sys/devices/pci0000:c0/0000:c0:05.2/0000:c2:00.0/0000:c3:00.0"
    assert rf.parent_path(path) == ["pci0000:c0", "0000:c0:05.2", "0000:c2:00.0"]


_paths = st.lists(
    st.from_regex(r"/sys/bus/pci/devices/0000:[0-9a-f]{2}:0[0-7]\.[0-7]/[a-z_]{3,12}",
                  fullmatch=True),
    min_size=1, max_size=6, unique=True,
)
_lines = st.lists(st.text(alphabet="0123456789abcdefx :-", max_size=30), min_size=1,
                  max_size=4)


@given(_paths, st.data())
def test_grep_output_splits_back_into_the_files_it_came_from(
    paths: list[str], data: st.DataObject
) -> None:
    contents = {p: data.draw(_lines) for p in paths}
    out = "".join(f"{p}:{line}\n" for p in paths for line in contents[p])
    got = grep_files(CommandResult(("grep",), 0, out, ""), paths)
    assert got == {p: "\n".join(lines) + "\n" for p, lines in contents.items()}
