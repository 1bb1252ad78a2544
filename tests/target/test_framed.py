"""Several commands on one SSH channel (pvefix.target.framed): what sh prints splits back into
each command's own output and status, through a real POSIX shell and through the simulator's."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvefix.errors import PvefixError
from pvefix.sim.serve import ReadyInfo, write_ready_file
from pvefix.sources.cluster import HOST_COMMANDS
from pvefix.target import framed
from pvefix.target.open import open_cluster_ssh
from pvefix.target.result import CommandResult
from pvefix.target.settings import resolve_connection
from pvefix.target.ssh import SshShell

NONCE = "0123456789abcdef0123456789abcdef"
_TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0), max_size=40) | st.sampled_from(
    ["", "\n", "@@pvefix-frame:", f"@@pvefix-frame:{NONCE[:-1]}:0:0\n", "no newline at the end"])


def _as_sh_prints(outputs: list[tuple[str, str, int]]) -> CommandResult:
    """What `sh -c SCRIPT` sends back for commands that printed these and exited so."""
    stdout = "".join(f"{out}@@pvefix-frame:{NONCE}:{i}:{code}\n"
                     for i, (out, _, code) in enumerate(outputs))
    stderr = "".join(f"{err}@@pvefix-frame:{NONCE}:{i}\n"
                     for i, (_, err, _) in enumerate(outputs))
    return CommandResult(("sh", "-c", "..."), 0, stdout, stderr)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT, st.integers(0, 255)), min_size=1, max_size=6))
def test_any_output_and_status_splits_back_into_each_commands_own(
    outputs: list[tuple[str, str, int]],
) -> None:
    commands = [("cmd", str(i)) for i in range(len(outputs))]
    results = framed.unframe(commands, NONCE, _as_sh_prints(outputs))
    assert [(r.stdout, r.stderr, r.exit_code) for r in results] == outputs
    assert [r.argv for r in results] == commands


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT, st.integers(0, 255)), min_size=1, max_size=5),
       st.data())
def test_a_stream_cut_short_is_an_error_never_a_shorter_answer(
    outputs: list[tuple[str, str, int]], data: st.DataObject,
) -> None:
    whole = _as_sh_prints(outputs)
    cut_out = data.draw(st.integers(0, len(whole.stdout) - 1))
    cut = CommandResult(whole.argv, None, whole.stdout[:cut_out], whole.stderr, timed_out=True)
    with pytest.raises(PvefixError, match="stopped before"):
        framed.unframe([("cmd", str(i)) for i in range(len(outputs))], NONCE, cut)


def test_the_script_is_an_argument_list_and_the_nonce_only_hex() -> None:
    argv = framed.framed_argv([("cat", "/etc/a b"), ("echo", "it's; $(reboot)")], NONCE)
    assert argv[:2] == ["sh", "-c"]
    assert "'/etc/a b'" in argv[2] and "'it'\"'\"'s; $(reboot)'" in argv[2]
    for bad in ("", "xyz", "0123456", "$(reboot)", "ab cd"):
        with pytest.raises(ValueError, match="nonce"):
            framed.framed_argv([("true",)], bad)
    with pytest.raises(ValueError, match="empty"):
        framed.framed_argv([()], NONCE)
    assert len({framed.new_nonce() for _ in range(50)}) == 50


SH = shutil.which("sh")


@pytest.mark.skipif(SH is None, reason="no POSIX sh on this machine")
@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\0"),
                                  max_size=30),
                          st.integers(0, 200)), min_size=1, max_size=4))
def test_a_real_sh_gives_each_command_what_it_gives_alone(items: list[tuple[str, int]]) -> None:
    commands: list[tuple[str, ...]] = [
        ("sh", "-c", 'printf %s "$1"; printf %s "$1" >&2; exit "$2"', "x", text, str(code))
        for text, code in items]
    commands += [("cat", "/nonexistent/pvefix"), ("pvefix-no-such-command",)]
    nonce = framed.new_nonce()
    together = _local(framed.framed_argv(commands, nonce))
    got = framed.unframe(commands, nonce, together)
    # Alone, as sshd runs a command: its quoted line through the shell.
    alone = [_local(["sh", "-c", shlex.join(c)]) for c in commands]
    assert [(r.stdout, r.exit_code) for r in got] == [(r.stdout, r.exit_code) for r in alone]
    # The shell names itself and the script's line in its own messages ("sh: 2: ..."): the
    # command's part is the same.
    def own(text: str) -> str:
        return re.sub(r"^(sh|dash|bash): (line )?\d+: ", "", text)

    for one, each in zip(got, alone, strict=True):
        assert own(one.stderr) == own(each.stderr)


def _local(argv: list[str]) -> CommandResult:
    done = subprocess.run(argv, capture_output=True, check=False)
    return CommandResult(tuple(argv), done.returncode,
                         done.stdout.decode("utf-8", "surrogateescape"),
                         done.stderr.decode("utf-8", "surrogateescape"))


# -- through the simulator, over real SSH -----------------------------------------------------

Sim = Callable[..., ReadyInfo]


def _shell(info: ReadyInfo, tmp_path: Path, node: str | None = None) -> SshShell:
    ready = tmp_path / "ready.json"
    write_ready_file(info, ready)
    conn = resolve_connection(connection_file=ready, env={})
    if node is not None:
        host, _, port = info.ssh_nodes[node].rpartition(":")
        conn = conn.model_copy(update={"ssh_host": host, "ssh_port": int(port)})
    return open_cluster_ssh(conn)


@pytest.mark.parametrize("scenario", ["large", "intel-grub", "xeon-seabios-h200"])
def test_the_simulators_shell_frames_as_sh_does(
    fresh_sim: Sim, tmp_path: Path, scenario: str,
) -> None:
    info = fresh_sim(scenario)
    nodes = sorted(info.ssh_nodes) or [None]
    commands = [*HOST_COMMANDS, ("cat", "/nonexistent"), ("false",), ("no-such-command",)]
    for node in nodes:
        shell = _shell(info, tmp_path, node)
        try:
            before = shell.exec_count
            together = shell.run_batch(commands)
            assert shell.exec_count == before + 1  # one channel: the frames came back whole
            assert together == shell.run_many(commands)
        finally:
            shell.close()
    assert [r.exit_code for r in together[-3:]] == [1, 1, 127]


class _CutShort(SshShell):
    """A node whose framed script dies half way (a shell that is not sh, a broken channel)."""

    def run(self, argv: Sequence[str]) -> CommandResult:
        result = super().run(argv)
        if list(argv[:2]) == ["sh", "-c"] and framed._PREFIX in argv[2]:
            return CommandResult(result.argv, 2, result.stdout[:20], "sh: killed\n")
        return result


def test_frames_that_do_not_come_back_whole_fall_back_to_a_channel_each(
    fresh_sim: Sim, tmp_path: Path,
) -> None:
    info = fresh_sim("kpro6")
    shell = _shell(info, tmp_path)
    cut = _CutShort.__new__(_CutShort)
    cut.__dict__.update(shell.__dict__)
    try:
        before = cut.exec_count
        results = cut.run_batch(HOST_COMMANDS)
        assert cut.exec_count == before + 1 + len(HOST_COMMANDS)
        assert results == cut.run_many(HOST_COMMANDS)
        assert results[0].stdout.strip() == "kpro6"
    finally:
        shell.close()


def test_commands_too_long_for_one_script_are_not_framed() -> None:
    short = [("cat", "/etc/hostname"), ("uname", "-r")]
    long = [("cat", "/x" * 30_000), ("cat", "/y" * 30_000)]
    assert framed.fits(short)
    assert not framed.fits(long)
    # fits() errs on the safe side: what it takes is a script under the limit.
    assert len(framed.framed_argv(short, NONCE)[2]) <= framed.MAX_SCRIPT
    assert len(framed.framed_argv(long, NONCE)[2]) > framed.MAX_SCRIPT / 2
